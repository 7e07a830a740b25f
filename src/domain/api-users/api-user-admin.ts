import { notFound, permissionDenied } from "../../errors/domain-error.js";
import type { AuditEvent } from "../audit/model.js";
import type { AuditRepository } from "../audit/ports.js";
import type { Clock } from "../shared/clock.js";
import { generateClientSecret, hashClientSecret } from "../shared/client-secret.js";
import type { KeyMaterial } from "../shared/key-material.js";
import { tenantScope, type TenantScope } from "../shared/tenant-scope.js";
import type { Tx, UnitOfWork } from "../shared/unit-of-work.js";
import { credentialOf, type ApiUserProvisioning } from "./api-user-provisioning.js";
import type { ApiUser, ApiUserAdminCaller, ApiUserCredentialType, ApiUserRole, CreatedApiUser } from "./model.js";
import type { ApiUserRepository, ClientRefreshTokens, CredentialChangePublisher } from "./ports.js";

/** Spec 4.3: at most 100 per page, 100 by default. */
export const DEFAULT_PAGE_SIZE = 100;

/**
 * A TMC admin's management of its own TMC's API users (spec 4.2 to 4.5). Every operation is
 * scoped to the caller's TMC; another TMC's API user is "not found" — its existence is not
 * revealed. Rotation and revocation number the change in their transaction (every instance hears
 * of it at commit) and put the committed state in the shared cache before answering, so every
 * token of the old credential fails at once, on every instance.
 */
export class ApiUserAdmin {
  constructor(
    private readonly uow: UnitOfWork,
    private readonly apiUsers: ApiUserRepository,
    private readonly refreshTokens: ClientRefreshTokens,
    private readonly audit: AuditRepository,
    private readonly provisioning: ApiUserProvisioning,
    private readonly credentials: CredentialChangePublisher,
    private readonly keys: KeyMaterial,
    private readonly clock: Clock,
  ) {}

  async create(
    caller: ApiUserAdminCaller,
    request: {
      tmcId: string | undefined;
      orgId: string | undefined;
      role: ApiUserRole;
      credentialType: ApiUserCredentialType;
    },
    requestId: string,
  ): Promise<CreatedApiUser> {
    const tmcId = request.tmcId ?? caller.tmcId;
    if (tmcId !== caller.tmcId) throw permissionDenied("A TMC admin may create API users only for its own TMC");
    return this.provisioning.create({ ...request, tmcId, actor: caller.clientId, requestId });
  }

  async list(
    caller: ApiUserAdminCaller,
    limit: number,
    offset: number,
  ): Promise<{ clientIds: string[]; totalCount: number }> {
    const scope = tenantScope(caller.tmcId);
    // One round trip: the page and the total come in one statement (limit 0 asks for the total alone).
    const { clientIds, total } = await this.apiUsers.listActive(this.uow.direct, scope, { limit, offset });
    return { clientIds, totalCount: total };
  }

  /** New secret (or SCIM token), generation + 1: the old credential and its tokens die at once. */
  async rotate(caller: ApiUserAdminCaller, clientId: string, requestId: string): Promise<CreatedApiUser> {
    const secret = generateClientSecret();
    const scope = tenantScope(caller.tmcId);
    const { user, change } = await this.uow.transaction(async (tx) => {
      const user = await this.lockOwnActive(tx, scope, clientId);
      await this.apiUsers.setCredential(tx, scope, clientId, {
        secretHash: hashClientSecret(this.keys.secretPepper, secret),
        generation: user.credentialGeneration + 1,
      });
      await this.audit.append(tx, [changed("API_USER_ROTATE", caller, user, requestId)]);
      return { user, change: await this.credentials.recordChange(tx, clientId) };
    });
    await this.credentials.publish(clientId, change);
    return credentialOf(this.keys, clientId, user.credentialType, secret);
  }

  /** Permanent: the row stays as a tombstone so the clientId can never authenticate or be reused. */
  async revoke(caller: ApiUserAdminCaller, clientId: string, requestId: string): Promise<void> {
    const scope = tenantScope(caller.tmcId);
    const change = await this.uow.transaction(async (tx) => {
      const user = await this.lockOwnActive(tx, scope, clientId);
      await this.apiUsers.markRevoked(tx, scope, clientId);
      await this.refreshTokens.revokeAllOfClient(tx, scope, clientId, this.clock());
      await this.audit.append(tx, [changed("API_USER_REVOKE", caller, user, requestId)]);
      return this.credentials.recordChange(tx, clientId);
    });
    await this.credentials.publish(clientId, change);
  }

  private async lockOwnActive(tx: Tx, scope: TenantScope, clientId: string): Promise<ApiUser> {
    const user = await this.apiUsers.lockActive(tx, scope, clientId);
    // Another TMC's user, an unknown one and a revoked one all look the same: not found.
    if (!user) throw notFound("API user", [{ name: "clientId", value: clientId }]);
    return user;
  }
}

function changed(action: string, caller: ApiUserAdminCaller, target: ApiUser, requestId: string): AuditEvent {
  return {
    action,
    outcome: "SUCCESS",
    actor: caller.clientId,
    tmcId: target.tmcId,
    targetClientId: target.clientId,
    debugIdentifier: requestId,
  };
}
