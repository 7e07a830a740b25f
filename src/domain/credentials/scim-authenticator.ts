import type { Knex } from "knex";
import type { KeyMaterial } from "../../config/key-material.js";
import type { ApiUserRow } from "../../store/tables.js";
import { unauthenticated } from "../errors.js";
import { verifyClientSecret } from "./client-secret.js";
import { openScimToken } from "./scim-token.js";

/**
 * Authenticates a SCIM bearer token: strict decoding, decryption, then the secret inside checked
 * in constant time against the stored hash of an active SCIM_TOKEN API user. Every malformed,
 * forged, rotated-away or revoked token gets the same 401. (The SCIM paths under /v2/scim use
 * this; client-credentials access tokens are refused there.)
 */
export class ScimAuthenticator {
  private readonly keys: ReadonlyMap<string, Buffer>;

  constructor(
    private readonly db: Knex,
    private readonly material: KeyMaterial,
  ) {
    this.keys = new Map([[material.scimTokenKeyId, material.scimTokenKey]]);
  }

  async authenticate(token: string): Promise<ApiUserRow> {
    const envelope = openScimToken(this.keys, token);
    const row = envelope
      ? await this.db<ApiUserRow>("api_users").where({ client_id: envelope.clientId, credential_type: "SCIM_TOKEN" }).whereNull("revoked_at").first()
      : undefined;
    // The comparison runs even for a forged envelope, so every refusal costs the same.
    const matches = verifyClientSecret(this.material.secretPepper, envelope?.secret ?? "", row?.secret_hash);
    if (!row || !matches) throw unauthenticated("A valid SCIM token is required");
    return row;
  }
}
