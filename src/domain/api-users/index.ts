import type { AuditRepository } from "../audit/ports.js";
import type { Clock } from "../shared/clock.js";
import type { KeyMaterial } from "../shared/key-material.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { TenantRepository } from "../tenants/ports.js";
import { ApiUserAdmin, type ApiUserAdminDeps } from "./api-user-admin.js";
import { ApiUserProvisioning } from "./api-user-provisioning.js";
import type { ApiUserRepository, ClientRefreshTokens, CredentialChangePublisher } from "./ports.js";
import { ScimAuthenticator } from "./scim-authenticator.js";

/** What the API-user area is built from: its repositories (by the store's names), who numbers credential changes, the keys and the clock. */
export interface ApiUserAreaDeps {
  readonly uow: UnitOfWork;
  readonly repositories: {
    readonly tenants: TenantRepository;
    readonly apiUsers: ApiUserRepository;
    readonly refreshTokens: ClientRefreshTokens;
    readonly audit: AuditRepository;
  };
  /** Numbers a rotation or revocation in its transaction and publishes it after commit (the credential generations). */
  readonly credentials: CredentialChangePublisher;
  readonly keys: KeyMaterial;
  readonly clock: Clock;
  /** Key sets registered by URL (checked at registration). */
  readonly keySets: ApiUserAdminDeps["keySets"];
}

/** The API-user area: provisioning (operator and TMC admin), the TMC admin's operations, and SCIM tokens' authentication. */
export function createApiUserArea({ uow, repositories: r, credentials, keys, clock, keySets }: ApiUserAreaDeps) {
  const { tenants, apiUsers, refreshTokens, audit } = r;
  const provisioning = new ApiUserProvisioning({ uow, tenants, apiUsers, audit, keys });
  return {
    provisioning,
    admin: new ApiUserAdmin({ uow, apiUsers, refreshTokens, audit, provisioning, credentials, keys, clock, keySets }),
    scimAuthenticator: new ScimAuthenticator({ uow, apiUsers, keys }),
  };
}
