import type { ApiUserRepository } from "../api-users/ports.js";
import type { AuditRepository } from "../audit/ports.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { TenantRepository } from "../tenants/ports.js";
import type { TrustedIssuerRepository } from "../tokens/ports.js";
import { OperatorAuthenticator, type OperatorAttemptLimiter } from "./operator-authenticator.js";
import { OperatorConsole, type ApiUserRevoker } from "./operator-console.js";
import { OperatorCredential } from "./operator-credential.js";

/** What the operator area is built from: the console's repositories (by the store's names) and revoker, and the limiter of operator attempts. */
export interface OperatorAreaDeps {
  readonly uow: UnitOfWork;
  readonly repositories: {
    readonly tenants: TenantRepository;
    readonly apiUsers: ApiUserRepository;
    readonly trustedIssuers: TrustedIssuerRepository;
    readonly audit: AuditRepository;
  };
  /** Revokes an API user as its TMC admin would (the API-user area's admin). */
  readonly revoker: ApiUserRevoker;
  readonly limiter: OperatorAttemptLimiter;
}

/** The operator area's settings: the operator credential (the OPERATOR_TOKEN secret). */
export interface OperatorAreaConfig {
  readonly token: string;
}

/** The operator area: the console (tenants, API users, trusted issuers, audit) and the operator's authentication. */
export function createOperatorArea(
  { uow, repositories: r, revoker, limiter }: OperatorAreaDeps,
  config: OperatorAreaConfig,
) {
  const { tenants, apiUsers, trustedIssuers: issuers, audit } = r;
  return {
    console: new OperatorConsole({ uow, tenants, apiUsers, issuers, audit, revoker }),
    authenticator: new OperatorAuthenticator({ credential: new OperatorCredential(config.token), limiter }),
  };
}
