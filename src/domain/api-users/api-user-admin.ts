import { invalidArgument, notFound, permissionDenied } from "../../errors/domain-error.js";
import { checkedKeyRegistration, registeredKeysOf } from "../shared/client-key-registration.js";
import type { RemoteKeySets } from "../shared/remote-key-sets.js";
import type { AuditEvent } from "../audit/model.js";
import type { AuditRepository } from "../audit/ports.js";
import type { Clock } from "../shared/clock.js";
import { generateClientSecret, hashClientSecret, NO_SECRET } from "../shared/client-secret.js";
import type { KeyMaterial } from "../shared/key-material.js";
import { tenantScope, type TenantScope } from "../shared/tenant-scope.js";
import type { Tx, UnitOfWork } from "../shared/unit-of-work.js";
import { credentialOf, type ApiUserProvisioning } from "./api-user-provisioning.js";
import type {
  ApiUser,
  ApiUserAdminCaller,
  ApiUserCredentialType,
  ApiUserRole,
  ClientKeyRegistration,
  CreatedApiUser,
  RegisteredClientKeys,
} from "./model.js";
import type {
  ApiUserCredentialChange,
  ApiUserRepository,
  ClientRefreshTokens,
  CredentialChangePublisher,
} from "./ports.js";

/** Spec 4.3: at most 100 per page, 100 by default. */
export const DEFAULT_PAGE_SIZE = 100;

/** What ApiUserAdmin is built from. */
export interface ApiUserAdminDeps {
  readonly uow: UnitOfWork;
  readonly apiUsers: ApiUserRepository;
  readonly refreshTokens: ClientRefreshTokens;
  readonly audit: AuditRepository;
  readonly provisioning: ApiUserProvisioning;
  readonly credentials: CredentialChangePublisher;
  readonly keys: KeyMaterial;
  readonly clock: Clock;
  /** Sets registered by URL: checked (fetched) at registration. */
  readonly keySets: Pick<RemoteKeySets, "registered">;
}

/**
 * A TMC admin's management of its own TMC's API users (spec 4.2 to 4.5). Every operation is
 * scoped to the caller's TMC; another TMC's API user is "not found" — its existence is not
 * revealed. Rotation and revocation number the change in their transaction (every instance hears
 * of it at commit) and put the committed state in the shared cache before answering, so every
 * token of the old credential fails at once, on every instance.
 */
export class ApiUserAdmin {
  constructor(private readonly deps: ApiUserAdminDeps) {}

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
    return this.deps.provisioning.create({ ...request, tmcId, actor: caller.clientId, requestId });
  }

  async list(
    caller: ApiUserAdminCaller,
    limit: number,
    offset: number,
  ): Promise<{ clientIds: string[]; totalCount: number }> {
    const scope = tenantScope(caller.tmcId);
    // One round trip: the page and the total come in one statement (limit 0 asks for the total alone).
    const { clientIds, total } = await this.deps.apiUsers.listActive(this.deps.uow.direct, scope, { limit, offset });
    return { clientIds, totalCount: total };
  }

  /** New secret (or SCIM token), generation + 1: the old credential and its tokens die at once. */
  async rotate(caller: ApiUserAdminCaller, clientId: string, requestId: string): Promise<CreatedApiUser> {
    const secret = generateClientSecret();
    const scope = tenantScope(caller.tmcId);
    const { user, change } = await this.deps.uow.transaction(async (tx) => {
      const user = await this.lockOwnActive(tx, scope, clientId);
      await this.deps.apiUsers.setCredential(tx, scope, clientId, {
        secretHash: hashClientSecret(this.deps.keys.secretPepper, secret),
        generation: user.credentialGeneration + 1,
      });
      await this.deps.audit.append(tx, [changed("API_USER_ROTATE", caller, user, requestId)]);
      return { user, change: await this.deps.credentials.recordChange(tx, clientId) };
    });
    await this.deps.credentials.publish(clientId, change);
    return credentialOf(this.deps.keys, clientId, user.credentialType, secret);
  }

  /**
   * Registers `jwks` as the user's public keys (private_key_jwt) in place of its secret or its
   * former keys: key rotation is replacing the set. Like a secret rotation, the generation rises
   * and the change is published before this returns, so every instance refuses an assertion
   * signed by a removed key, and tokens issued under the former credential, at once. The user has
   * no secret afterwards. A set registered by URL (`jwksUri`) is fetched and checked now (an
   * unusable one is refused with its reason), then fetched again by each instance as assertions
   * need it (RemoteKeySets). Answers the registered key ids.
   */
  async setKeys(
    caller: ApiUserAdminCaller,
    clientId: string,
    registration: ClientKeyRegistration,
    requestId: string,
  ): Promise<RegisteredClientKeys> {
    const checked = await this.keySetOf(caller, clientId, registration);
    const { publicKeys, jwksUri } = checked;
    await this.changeClientCredential(caller, clientId, requestId, "API_USER_KEYS_SET", (user) => ({
      secretHash: NO_SECRET,
      generation: user.credentialGeneration + 1,
      publicKeys,
      jwksUri,
    }));
    return registeredKeysOf(checked);
  }

  /**
   * The registration checked (checkedKeyRegistration). A URL is fetched only for the caller's own
   * active user (nobody makes the service fetch for a client id it does not manage), and outside
   * the transaction (no row lock held through a fetch).
   */
  private keySetOf(caller: ApiUserAdminCaller, clientId: string, registration: ClientKeyRegistration) {
    return checkedKeyRegistration(registration, this.deps.keySets, async () => {
      const user = await this.deps.apiUsers.findActive(this.deps.uow.direct, clientId);
      if (user?.tmcId !== caller.tmcId) throw apiUserNotFound(clientId);
    });
  }

  /**
   * Sets the user's DPoP policy (RFC 9449 5.2): with `required`, the token endpoint refuses its
   * token requests that carry no proof. A change raises the generation like a rotation (the secret
   * or keys stay): cached client records are read again on every instance before this returns,
   * and the tokens issued under the former policy (bearer tokens among them) die with their
   * refresh tokens, so once required, every live token of the user is DPoP-bound. Setting the
   * policy in force changes nothing.
   */
  async setDpopPolicy(
    caller: ApiUserAdminCaller,
    clientId: string,
    required: boolean,
    requestId: string,
  ): Promise<boolean> {
    await this.changeClientCredential(caller, clientId, requestId, "API_USER_DPOP_POLICY_SET", (user) =>
      user.dpopBoundAccessTokens === required
        ? undefined
        : { secretHash: user.secretHash, generation: user.credentialGeneration + 1, dpopBoundAccessTokens: required },
    );
    return required;
  }

  /**
   * A new credential generation for a CLIENT_CREDENTIALS user of the caller's TMC (`next` of the
   * locked user; undefined: nothing to change), audited as `action` and published before this
   * returns, as a rotation is.
   */
  private async changeClientCredential(
    caller: ApiUserAdminCaller,
    clientId: string,
    requestId: string,
    action: string,
    next: (user: ApiUser) => ApiUserCredentialChange | undefined,
  ): Promise<void> {
    const scope = tenantScope(caller.tmcId);
    const change = await this.deps.uow.transaction(async (tx) => {
      const user = await this.lockOwnActive(tx, scope, clientId);
      if (user.credentialType !== "CLIENT_CREDENTIALS")
        throw invalidArgument("Only a CLIENT_CREDENTIALS API user uses the token endpoint", [
          { name: "clientId", value: "not a client-credentials API user" },
        ]);
      const credential = next(user);
      if (credential === undefined) return undefined;
      await this.deps.apiUsers.setCredential(tx, scope, clientId, credential);
      const details =
        credential.dpopBoundAccessTokens === undefined
          ? undefined
          : { dpopBoundAccessTokens: credential.dpopBoundAccessTokens };
      await this.deps.audit.append(tx, [changed(action, caller, user, requestId, details)]);
      return this.deps.credentials.recordChange(tx, clientId);
    });
    if (change !== undefined) await this.deps.credentials.publish(clientId, change);
  }

  /** Permanent: the row stays as a tombstone so the clientId can never authenticate or be reused. */
  async revoke(caller: ApiUserAdminCaller, clientId: string, requestId: string): Promise<void> {
    const scope = tenantScope(caller.tmcId);
    const change = await this.deps.uow.transaction(async (tx) => {
      const user = await this.lockOwnActive(tx, scope, clientId);
      await this.deps.apiUsers.markRevoked(tx, scope, clientId);
      await this.deps.refreshTokens.revokeAllOfClient(tx, scope, clientId, this.deps.clock());
      await this.deps.audit.append(tx, [changed("API_USER_REVOKE", caller, user, requestId)]);
      return this.deps.credentials.recordChange(tx, clientId);
    });
    await this.deps.credentials.publish(clientId, change);
  }

  private async lockOwnActive(tx: Tx, scope: TenantScope, clientId: string): Promise<ApiUser> {
    const user = await this.deps.apiUsers.lockActive(tx, scope, clientId);
    // Another TMC's user, an unknown one and a revoked one all look the same: not found.
    if (!user) throw apiUserNotFound(clientId);
    return user;
  }
}

const apiUserNotFound = (clientId: string) => notFound("API user", [{ name: "clientId", value: clientId }]);

function changed(
  action: string,
  caller: ApiUserAdminCaller,
  target: ApiUser,
  requestId: string,
  details?: AuditEvent["details"],
): AuditEvent {
  return {
    ...(details ? { details } : {}),
    action,
    outcome: "SUCCESS",
    actor: caller.clientId,
    tmcId: target.tmcId,
    targetClientId: target.clientId,
    debugIdentifier: requestId,
  };
}
