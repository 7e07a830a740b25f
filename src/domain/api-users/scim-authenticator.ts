import { unauthenticated } from "../../errors/domain-error.js";
import { verifyClientSecret } from "../shared/client-secret.js";
import type { KeyMaterial } from "../shared/key-material.js";
import { openScimToken } from "../shared/scim-token.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { ApiUser } from "./model.js";
import type { ApiUserRepository } from "./ports.js";

/** What ScimAuthenticator is built from. */
export interface ScimAuthenticatorDeps {
  readonly uow: UnitOfWork;
  readonly apiUsers: ApiUserRepository;
  readonly keys: KeyMaterial;
}

/**
 * Authenticates a SCIM bearer token: strict decoding, decryption, then the secret inside checked
 * in constant time against the stored hash of an active SCIM_TOKEN API user. Every malformed,
 * forged, rotated-away or revoked token gets the same 401. (The SCIM paths under /v2/scim will
 * use this; client-credentials access tokens are refused there.)
 */
export class ScimAuthenticator {
  private readonly tokenKeys: ReadonlyMap<string, Buffer>;

  constructor(private readonly deps: ScimAuthenticatorDeps) {
    this.tokenKeys = new Map([[deps.keys.scimTokenKeyId, deps.keys.scimTokenKey]]);
  }

  async authenticate(token: string): Promise<ApiUser> {
    const envelope = openScimToken(this.tokenKeys, token);
    const found = envelope ? await this.deps.apiUsers.findActive(this.deps.uow.direct, envelope.clientId) : undefined;
    const user = found?.credentialType === "SCIM_TOKEN" ? found : undefined;
    // The comparison runs even for a forged envelope, so every refusal costs the same.
    const matches = verifyClientSecret(this.deps.keys.secretPepper, envelope?.secret ?? "", user?.secretHash);
    if (!user || !matches) throw unauthenticated("A valid SCIM token is required");
    return user;
  }
}
