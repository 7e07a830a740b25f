import type { JSONWebKeySet } from "jose";
import type { ApiUser, NewApiUser } from "../../../domain/api-users/model.js";
import type { ApiUserCredentialChange, ApiUserListing, ApiUserRepository } from "../../../domain/api-users/ports.js";
import { tenantScope, type TenantScope } from "../../../domain/shared/tenant-scope.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { CredentialState } from "../../../domain/tokens/model.js";
import { compiledStatement } from "../compiled-statement.js";
import { pageOf, pageWithTotal, pageWithTotalQuery } from "../paging.js";
import { toCount, type ApiUserRow } from "../tables.js";
import { knexOf, tableIn } from "../unit-of-work.js";
import { credentialStatesIn, rotatedCredentialColumns } from "./credential-states.js";

export class PostgresApiUserRepository implements ApiUserRepository {
  async insert(tx: Tx, scope: TenantScope, user: NewApiUser): Promise<void> {
    await knexOf(tx)<ApiUserRow>("api_users").insert({
      client_id: user.clientId,
      tmc_id: scope.tmcId,
      org_id: user.orgId ?? null,
      role: user.role,
      credential_type: user.credentialType,
      secret_hash: user.secretHash,
      created_by: user.createdBy,
    });
  }

  async countActive(tx: Tx, scope: TenantScope): Promise<number> {
    const row = await active(tx, scope).count({ n: "*" }).first();
    return toCount(row?.n);
  }

  async listActive(
    tx: Tx,
    scope: TenantScope,
    page: { limit: number; offset: number },
  ): Promise<{ clientIds: string[]; total: number }> {
    // The hot read of GET /v2/api-users: its statement compiled once (compiled-statement.ts).
    const joined = await ACTIVE_CLIENT_IDS<Pick<ApiUserRow, "client_id">>(tx, scope.tmcId, page.limit, page.offset);
    const { rows, total } = pageOf(ACTIVE_PAGE, joined);
    return { clientIds: rows.map((r) => r.client_id), total };
  }

  async listActiveDetails(
    tx: Tx,
    scope: TenantScope,
    page: { limit: number; offset: number },
  ): Promise<{ users: ApiUserListing[]; total: number }> {
    const { rows, total } = await activePage<ApiUserRow & { last_token_issued_at: Date | null }>(
      tx,
      scope,
      page,
      ["client_id", "org_id", "role", "credential_type", "created_by", "rotated_at", "dpop_bound_access_tokens"],
      [lastTokenIssued(tx)],
    );
    return {
      users: rows.map((r) => ({
        clientId: r.client_id,
        orgId: r.org_id ?? undefined,
        role: r.role,
        credentialType: r.credential_type,
        createdAt: new Date(r.created_at),
        createdBy: r.created_by ?? undefined,
        rotatedAt: r.rotated_at ? new Date(r.rotated_at) : undefined,
        lastTokenIssuedAt: r.last_token_issued_at ? new Date(r.last_token_issued_at) : undefined,
        dpopBoundAccessTokens: r.dpop_bound_access_tokens,
      })),
      total,
    };
  }

  async lockActive(tx: Tx, scope: TenantScope, clientId: string): Promise<ApiUser | undefined> {
    const row = await active(tx, scope).where({ client_id: clientId }).forUpdate().noWait().first();
    return row && toApiUser(row);
  }

  async setCredential(
    tx: Tx,
    scope: TenantScope,
    clientId: string,
    credential: ApiUserCredentialChange,
  ): Promise<void> {
    const db = knexOf(tx);
    await active(tx, scope)
      .where({ client_id: clientId })
      .update({
        ...rotatedCredentialColumns(db, credential),
        // A new secret leaves the keys as they are; a new key set replaces them (null: none).
        ...(credential.publicKeys === undefined
          ? {}
          : { public_keys: credential.publicKeys === null ? null : JSON.stringify(credential.publicKeys) }),
        ...(credential.jwksUri === undefined ? {} : { jwks_uri: credential.jwksUri }),
        ...(credential.dpopBoundAccessTokens === undefined
          ? {}
          : { dpop_bound_access_tokens: credential.dpopBoundAccessTokens }),
      });
  }

  async markRevoked(tx: Tx, scope: TenantScope, clientId: string): Promise<void> {
    const db = knexOf(tx);
    await active(tx, scope)
      .where({ client_id: clientId })
      .update({ revoked_at: db.fn.now() as unknown as Date, updated_at: db.fn.now() as unknown as Date });
  }

  async findActive(tx: Tx, clientId: string): Promise<ApiUser | undefined> {
    const row = await knexOf(tx)<ApiUserRow>("api_users")
      .where({ client_id: clientId })
      .whereNull("revoked_at")
      .first();
    return row && toApiUser(row);
  }

  credentialStates(tx: Tx, clientIds: readonly string[]): Promise<Map<string, CredentialState>> {
    return credentialStatesIn(tx, { table: "api_users", tombstone: "revoked_at" }, clientIds);
  }
}

/** The user's last-token time, kept beside it by the audit flush (see the audit repository's append). */
const lastTokenIssued = (tx: Tx) => `(select a.last_token_issued_at from ${tableIn(tx, "api_user_token_activity")} a
  where a.client_id = api_users.client_id and a.tmc_id = api_users.tmc_id) as last_token_issued_at`;

function active(tx: Tx, scope: TenantScope) {
  return knexOf(tx)<ApiUserRow>("api_users").where({ tmc_id: scope.tmcId }).whereNull("revoked_at");
}

/** A page of the tenant's active users by creation time, then client id, with their number: one statement. */
function activePage<Row extends Pick<ApiUserRow, "client_id">>(
  tx: Tx,
  scope: TenantScope,
  page: { limit: number; offset: number },
  columns: ReadonlyArray<keyof ApiUserRow>,
  computed: readonly string[] = [],
): Promise<{ rows: Row[]; total: number }> {
  return pageWithTotal<Row>(knexOf(tx), activePageParts(tx, scope, page, columns, computed));
}

/** The order of a page and the column a real row always has (pageWithTotal). */
const ACTIVE_PAGE = { order: "page.created_at, page.client_id", present: "client_id" } as const;

function activePageParts(
  tx: Tx,
  scope: TenantScope,
  page: { limit: number; offset: number },
  columns: ReadonlyArray<keyof ApiUserRow>,
  computed: readonly string[] = [],
) {
  return {
    ...ACTIVE_PAGE,
    count: active(tx, scope),
    page: active(tx, scope)
      .select([...new Set([...columns, "created_at", "client_id"])])
      .select(computed.map((sql) => knexOf(tx).raw(sql)))
      .orderBy([{ column: "created_at" }, { column: "client_id" }])
      .limit(page.limit)
      .offset(page.offset),
  };
}

/** listActive's statement: activePage of the client ids, compiled once. */
const ACTIVE_CLIENT_IDS = compiledStatement((tx, tmcId: string, limit: number, offset: number) =>
  pageWithTotalQuery(knexOf(tx), activePageParts(tx, tenantScope(tmcId), { limit, offset }, ["client_id"])),
);

function toApiUser(row: ApiUserRow): ApiUser {
  return {
    clientId: row.client_id,
    tmcId: row.tmc_id,
    orgId: row.org_id ?? undefined,
    role: row.role,
    credentialType: row.credential_type,
    secretHash: row.secret_hash,
    credentialGeneration: row.credential_generation,
    ...(row.public_keys ? { publicKeys: parsedJson<JSONWebKeySet>(row.public_keys) } : {}),
    ...(row.jwks_uri ? { jwksUri: row.jwks_uri } : {}),
    dpopBoundAccessTokens: row.dpop_bound_access_tokens,
  };
}

/** jsonb: parsed by pg, a string from PGlite's knex driver. */
export function parsedJson<T>(value: unknown): T {
  return (typeof value === "string" ? JSON.parse(value) : value) as T;
}
