import type { JSONWebKeySet } from "jose";
import type { Knex } from "knex";
import type {
  ResourceServer,
  NewResourceServer,
  ResourceServerListing,
} from "../../../domain/resource-servers/model.js";
import type { ResourceServerRepository } from "../../../domain/resource-servers/ports.js";
import { registeredKeyIds } from "../../../domain/shared/client-assertion.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { CredentialState } from "../../../domain/tokens/model.js";
import { pageWithTotal } from "../paging.js";
import type { ResourceServerAudienceRow, ResourceServerRow } from "../tables.js";
import { knexOf, tableIn } from "../unit-of-work.js";
import { parsedJson } from "./api-user-repository.js";
import { credentialStatesIn, rotatedCredentialColumns } from "./credential-states.js";

/** A server's audiences, sorted, as a JSON array in the same statement as its row. */
const audiences = (tx: Tx) => `(select coalesce(json_agg(a.audience order by a.audience), '[]'::json)
  from ${tableIn(tx, "resource_server_audiences")} a where a.client_id = resource_servers.client_id) as audiences`;

type RowWithAudiences = ResourceServerRow & { audiences: string[] | string };

export class PostgresResourceServerRepository implements ResourceServerRepository {
  async insert(tx: Tx, server: NewResourceServer): Promise<void> {
    await knexOf(tx)<ResourceServerRow>("resource_servers").insert({
      client_id: server.clientId,
      name: server.name,
      secret_hash: server.secretHash,
      public_keys: server.publicKeys ? JSON.stringify(server.publicKeys) : null,
      jwks_uri: server.jwksUri ?? null,
      created_by: server.createdBy,
    });
  }

  async claimAudiences(tx: Tx, clientId: string, audiences: readonly string[]): Promise<string[]> {
    if (audiences.length === 0) return [];
    // ON CONFLICT DO NOTHING waits for a concurrent uncommitted claim of the same audience and
    // then skips it if that one committed: the conflict is answered, never a unique violation.
    const claimed = (await knexOf(tx)<ResourceServerAudienceRow>("resource_server_audiences")
      .insert(audiences.map((audience) => ({ audience, client_id: clientId })))
      .onConflict("audience")
      .ignore()
      .returning("audience")) as Array<Pick<ResourceServerAudienceRow, "audience">>;
    const got = new Set(claimed.map((r) => r.audience));
    return audiences.filter((audience) => !got.has(audience));
  }

  async list(
    tx: Tx,
    page: { limit: number; offset: number },
  ): Promise<{ servers: ResourceServerListing[]; total: number }> {
    const db = knexOf(tx);
    const { rows, total } = await pageWithTotal<RowWithAudiences>(db, {
      count: active(tx),
      page: active(tx)
        .select(
          "client_id",
          "name",
          "created_by",
          "created_at",
          "rotated_at",
          "public_keys",
          "jwks_uri",
          db.raw(audiences(tx)),
        )
        .orderBy([{ column: "created_at" }, { column: "client_id" }])
        .limit(page.limit)
        .offset(page.offset),
      order: "page.created_at, page.client_id",
      present: "client_id",
    });
    return { servers: rows.map(toListing), total };
  }

  async get(tx: Tx, clientId: string): Promise<ResourceServerListing | undefined> {
    const row = await withAudiences(tx).where({ client_id: clientId }).first();
    return row && toListing(row);
  }

  async findActive(tx: Tx, clientId: string): Promise<ResourceServer | undefined> {
    const row = await withAudiences(tx).where({ client_id: clientId }).first();
    return row && toResourceServer(row);
  }

  async lockActive(tx: Tx, clientId: string): Promise<ResourceServer | undefined> {
    const row = await withAudiences(tx).where({ client_id: clientId }).forUpdate().noWait().first();
    return row && toResourceServer(row);
  }

  async setCredential(
    tx: Tx,
    clientId: string,
    credential: { secretHash: Buffer; generation: number; publicKeys: JSONWebKeySet | null; jwksUri: string | null },
  ): Promise<void> {
    const db = knexOf(tx);
    const publicKeys = credential.publicKeys === null ? null : JSON.stringify(credential.publicKeys);
    await active(tx)
      .where({ client_id: clientId })
      .update({ ...rotatedCredentialColumns(db, credential), public_keys: publicKeys, jwks_uri: credential.jwksUri });
  }

  async markRemoved(tx: Tx, clientId: string): Promise<void> {
    const db = knexOf(tx);
    await db<ResourceServerAudienceRow>("resource_server_audiences").where({ client_id: clientId }).delete();
    await active(tx)
      .where({ client_id: clientId })
      .update({ removed_at: db.fn.now() as unknown as Date, updated_at: db.fn.now() as unknown as Date });
  }

  async registeredAudiences(tx: Tx, audiences: readonly string[]): Promise<Set<string>> {
    if (audiences.length === 0) return new Set();
    // Only active servers have audience rows: removal deletes them.
    const rows = await knexOf(tx)<ResourceServerAudienceRow>("resource_server_audiences")
      .whereIn("audience", [...audiences])
      .select("audience");
    return new Set(rows.map((r) => r.audience));
  }

  credentialStates(tx: Tx, clientIds: readonly string[]): Promise<Map<string, CredentialState>> {
    return credentialStatesIn(tx, { table: "resource_servers", tombstone: "removed_at" }, clientIds);
  }
}

function active(tx: Tx): Knex.QueryBuilder<ResourceServerRow> {
  return knexOf(tx)<ResourceServerRow>("resource_servers").whereNull("removed_at");
}

/** Active servers with every column and their audiences. */
function withAudiences(tx: Tx) {
  return active(tx).select<RowWithAudiences[]>("resource_servers.*", knexOf(tx).raw(audiences(tx)));
}

/** json_agg comes back parsed from pg; a driver that hands JSON as text is read too. */
function audiencesOf(row: RowWithAudiences): string[] {
  return typeof row.audiences === "string" ? (JSON.parse(row.audiences) as string[]) : row.audiences;
}

function toListing(row: RowWithAudiences): ResourceServerListing {
  return {
    clientId: row.client_id,
    name: row.name,
    audiences: audiencesOf(row),
    createdAt: new Date(row.created_at),
    createdBy: row.created_by,
    rotatedAt: row.rotated_at ? new Date(row.rotated_at) : undefined,
    keyIds: row.public_keys ? registeredKeyIds(parsedJson<JSONWebKeySet>(row.public_keys)) : [],
    ...(row.jwks_uri !== null ? { jwksUri: row.jwks_uri } : {}),
  };
}

function toResourceServer(row: RowWithAudiences): ResourceServer {
  return {
    clientId: row.client_id,
    name: row.name,
    audiences: audiencesOf(row),
    secretHash: row.secret_hash,
    credentialGeneration: row.credential_generation,
    ...(row.public_keys ? { publicKeys: parsedJson<JSONWebKeySet>(row.public_keys) } : {}),
    ...(row.jwks_uri !== null ? { jwksUri: row.jwks_uri } : {}),
  };
}
