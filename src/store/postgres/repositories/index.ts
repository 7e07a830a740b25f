import { PostgresAirCreditRepository } from "./air-credit-repository.js";
import { PostgresApiUserRepository } from "./api-user-repository.js";
import { PostgresAuditRepository } from "./audit-repository.js";
import { credentialChangeChannel, PostgresCredentialChangeLog } from "./credential-change-log.js";
import { PostgresCredentialSnapshots } from "./credential-snapshots.js";
import { PostgresRefreshTokenRepository } from "./refresh-token-repository.js";
import { PostgresResourceServerRepository } from "./resource-server-repository.js";
import { PostgresRevokedTokenRepository } from "./revoked-token-repository.js";
import { PostgresSecurityEventPositions } from "./security-event-positions.js";
import { PostgresScimUserRepository } from "./scim-user-repository.js";
import { PostgresSigningKeyRepository, signingKeyChangeChannel } from "./signing-key-repository.js";
import { PostgresTenantRepository } from "./tenant-repository.js";
import { PostgresTrustedIssuerRepository } from "./trusted-issuer-repository.js";
import { PostgresUserRepository } from "./user-repository.js";

/**
 * Every repository of the Postgres (and embedded PGlite) store. They hold no state: the Tx says
 * where to run. `schema` names the deployment's NOTIFY channels.
 */
export function postgresRepositories(schema = "public") {
  return {
    tenants: new PostgresTenantRepository(),
    apiUsers: new PostgresApiUserRepository(),
    resourceServers: new PostgresResourceServerRepository(),
    audit: new PostgresAuditRepository(),
    signingKeys: new PostgresSigningKeyRepository(signingKeyChangeChannel(schema)),
    refreshTokens: new PostgresRefreshTokenRepository(),
    revokedTokens: new PostgresRevokedTokenRepository(),
    trustedIssuers: new PostgresTrustedIssuerRepository(),
    airCredits: new PostgresAirCreditRepository(),
    credentialChanges: new PostgresCredentialChangeLog(credentialChangeChannel(schema)),
    credentialSnapshots: new PostgresCredentialSnapshots(),
    securityEventPositions: new PostgresSecurityEventPositions(),
    scimUsers: new PostgresScimUserRepository(),
    users: new PostgresUserRepository(),
  };
}

export type Repositories = ReturnType<typeof postgresRepositories>;
