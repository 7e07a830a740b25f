import { PostgresAirCreditRepository } from "./air-credit-repository.js";
import { PostgresApiUserRepository } from "./api-user-repository.js";
import { PostgresAuditRepository } from "./audit-repository.js";
import { PostgresCredentialOutbox } from "./credential-outbox-repository.js";
import { PostgresRefreshTokenRepository } from "./refresh-token-repository.js";
import { PostgresSigningKeyRepository } from "./signing-key-repository.js";
import { PostgresTenantRepository } from "./tenant-repository.js";
import { PostgresTrustedIssuerRepository } from "./trusted-issuer-repository.js";

/** Every repository of the Postgres (and embedded PGlite) store. They hold no state: the Tx says where to run. */
export function postgresRepositories() {
  return {
    tenants: new PostgresTenantRepository(),
    apiUsers: new PostgresApiUserRepository(),
    audit: new PostgresAuditRepository(),
    signingKeys: new PostgresSigningKeyRepository(),
    refreshTokens: new PostgresRefreshTokenRepository(),
    trustedIssuers: new PostgresTrustedIssuerRepository(),
    airCredits: new PostgresAirCreditRepository(),
    credentialOutbox: new PostgresCredentialOutbox(),
  };
}

export type Repositories = ReturnType<typeof postgresRepositories>;
