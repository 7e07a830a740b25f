import type { Knex } from "knex";
import type { KeyMaterial } from "../../config/key-material.js";
import { insertAuditEvents } from "../../store/audit-store.js";
import type { ApiUserRow } from "../../store/tables.js";
import { toCount } from "../../store/tables.js";
import { generateClientSecret, hashClientSecret } from "../credentials/client-secret.js";
import { sealScimToken } from "../credentials/scim-token.js";
import { notFound, permissionDenied } from "../errors.js";
import type { Principal } from "../tokens/access-tokens.js";
import type { CredentialState } from "../tokens/credential-state.js";
import type { ApiUserProvisioning, CreatedApiUser } from "./api-user-provisioning.js";
import type { ApiUserCredentialType, ApiUserRole } from "../../store/tables.js";

/** Spec 4.3: at most 100 per page, 100 by default. */
export const DEFAULT_PAGE_SIZE = 100;

/**
 * A TMC admin's management of its own TMC's API users (spec 4.2 to 4.5). Every operation is
 * scoped to the caller's TMC; another TMC's API user is "not found" — its existence is not
 * revealed. Rotation and revocation change the credential generation and tell the credential
 * state inside the same transaction, so every token of the old credential fails at once.
 */
export class ApiUserAdmin {
  constructor(
    private readonly db: Knex,
    private readonly keys: KeyMaterial,
    private readonly provisioning: ApiUserProvisioning,
    private readonly credentials: CredentialState,
  ) {}

  async create(
    caller: Principal,
    request: { tmcId: string | undefined; orgId: string | undefined; role: ApiUserRole; credentialType: ApiUserCredentialType },
    requestId: string,
  ): Promise<CreatedApiUser> {
    const tmcId = request.tmcId ?? caller.tmcId;
    if (tmcId !== caller.tmcId) throw permissionDenied("A TMC admin may create API users only for its own TMC");
    return this.provisioning.create({ ...request, tmcId, actor: caller.clientId, requestId });
  }

  async list(caller: Principal, limit: number, offset: number): Promise<{ clientIds: string[]; totalCount: number }> {
    const active = () => this.db<ApiUserRow>("api_users").where({ tmc_id: caller.tmcId }).whereNull("revoked_at");
    const [rows, total] = await Promise.all([
      limit === 0 ? Promise.resolve([]) : active().orderBy([{ column: "created_at" }, { column: "client_id" }]).limit(limit).offset(offset).select("client_id"),
      active().count({ n: "*" }).first(),
    ]);
    return { clientIds: rows.map((r) => r.client_id), totalCount: toCount(total?.n) };
  }

  /** New secret (or SCIM token), generation + 1: the old credential and its tokens die at once. */
  async rotate(caller: Principal, clientId: string, requestId: string): Promise<CreatedApiUser> {
    const secret = generateClientSecret();
    const user = await this.changeCredential(clientId, async (trx) => {
      const row = await this.lockOwnActive(trx, caller, clientId);
      const generation = row.credential_generation + 1;
      await trx("api_users").where({ client_id: clientId }).update({
        secret_hash: hashClientSecret(this.keys.secretPepper, secret),
        credential_generation: generation,
        rotated_at: trx.fn.now(),
        updated_at: trx.fn.now(),
      });
      await insertAuditEvents(trx, [audit("API_USER_ROTATE", caller, row, requestId)]);
      await this.credentials.publishWithin(trx, clientId, generation);
      return row;
    });
    return user.credential_type === "SCIM_TOKEN"
      ? { clientId, scimToken: sealScimToken(this.keys.scimTokenKey, this.keys.scimTokenKeyId, { clientId, secret }) }
      : { clientId, clientSecret: secret };
  }

  /** Permanent: the row stays as a tombstone so the clientId can never authenticate or be reused. */
  async revoke(caller: Principal, clientId: string, requestId: string): Promise<void> {
    await this.changeCredential(clientId, async (trx) => {
      const row = await this.lockOwnActive(trx, caller, clientId);
      await trx("api_users").where({ client_id: clientId }).update({ revoked_at: trx.fn.now(), updated_at: trx.fn.now() });
      await trx("refresh_tokens").where({ client_id: clientId }).whereNull("revoked_at").update({ revoked_at: trx.fn.now() });
      await insertAuditEvents(trx, [audit("API_USER_REVOKE", caller, row, requestId)]);
      await this.credentials.publishWithin(trx, clientId, undefined);
    });
  }

  /** Runs a credential change; if it fails after publishing, Postgres's unchanged value is re-published. */
  private async changeCredential<T>(clientId: string, change: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
    try {
      return await this.db.transaction(change);
    } catch (error) {
      await this.credentials.refresh(clientId).catch(() => {});
      throw error;
    }
  }

  private async lockOwnActive(trx: Knex.Transaction, caller: Principal, clientId: string): Promise<ApiUserRow> {
    const row = await trx<ApiUserRow>("api_users").where({ client_id: clientId }).forUpdate().first();
    // Another TMC's user, an unknown one and a revoked one all look the same: not found.
    if (!row || row.revoked_at || row.tmc_id !== caller.tmcId) throw notFound("API user", [{ name: "clientId", value: clientId }]);
    return row;
  }
}

function audit(action: string, caller: Principal, target: ApiUserRow, requestId: string) {
  return {
    action,
    outcome: "SUCCESS" as const,
    actor: caller.clientId,
    tmcId: target.tmc_id,
    targetClientId: target.client_id,
    debugIdentifier: requestId,
  };
}
