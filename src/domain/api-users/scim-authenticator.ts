import { unauthenticated } from "../../errors/domain-error.js";
import { verifyClientSecret } from "../shared/client-secret.js";
import type { KeyMaterial } from "../shared/key-material.js";
import { openScimToken } from "../shared/scim-token.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { ApiUser } from "./model.js";
import type { ApiUserRepository } from "./ports.js";

/**
 * Authenticates a SCIM bearer token: strict decoding, decryption, then the secret inside checked
 * in constant time against the stored hash of an active SCIM_TOKEN API user. Every malformed,
 * forged, rotated-away or revoked token gets the same 401. (The SCIM paths under /v2/scim will
 * use this; client-credentials access tokens are refused there.)
 */
export class ScimAuthenticator {
  private readonly keys: ReadonlyMap<string, Buffer>;

  constructor(
    private readonly uow: UnitOfWork,
    private readonly apiUsers: ApiUserRepository,
    private readonly material: KeyMaterial,
  ) {
    this.keys = new Map([[material.scimTokenKeyId, material.scimTokenKey]]);
  }

  async authenticate(token: string): Promise<ApiUser> {
    const envelope = openScimToken(this.keys, token);
    const found = envelope ? await this.apiUsers.findActive(this.uow.direct, envelope.clientId) : undefined;
    const user = found?.credentialType === "SCIM_TOKEN" ? found : undefined;
    // The comparison runs even for a forged envelope, so every refusal costs the same.
    const matches = verifyClientSecret(this.material.secretPepper, envelope?.secret ?? "", user?.secretHash);
    if (!user || !matches) throw unauthenticated("A valid SCIM token is required");
    return user;
  }
}
