import type { Knex } from "knex";
import type { AuditEvent, RecordedAuditEvent } from "../../../domain/audit/model.js";
import {
  AuditRecordRejected,
  type AuditFilter,
  type AuditRepository,
  type NumberedAuditEvent,
} from "../../../domain/audit/ports.js";
import type { TenantScope } from "../../../domain/shared/tenant-scope.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { AuditEventRow } from "../tables.js";
import { knexOf, tableIn } from "../unit-of-work.js";

/**
 * A batch of events as one JSON parameter, rows in array order. A multi-row VALUES insert takes
 * eight parameters per row, each bound and sent on its own, and a statement text per batch size;
 * this one is the same text for every batch and one string to send. Measured per row against the
 * multi-row insert: 0.4-0.7x the client CPU on Postgres for batches of 100-500 (about
 * 0.9x at 10), 0.7-0.9x on PGlite.
 *
 * The same statement raises each API user's last-token time to its newest TOKEN_ISSUED event of
 * the batch, so the operator's api-user list reads a row per user instead of scanning
 * the trail: one statement, so a retried batch never half-applies. Only users of the event's own
 * tenant; rows upserted in client_id order, so two instances flushing at once cannot deadlock.
 */
const insertBatch = (tx: Tx) => `with batch as (
  select * from json_to_recordset(?::json) as r(occurred_at timestamptz, action text, outcome text, actor text,
    tmc_id uuid, target_client_id text, debug_identifier text, details jsonb)
), inserted as (
  insert into ${tableIn(tx, "audit_events")} (occurred_at, action, outcome, actor, tmc_id, target_client_id, debug_identifier, details)
  select occurred_at, action, outcome, actor, tmc_id, target_client_id, debug_identifier, details from batch
), issued as (
  select tmc_id, target_client_id, max(occurred_at) as at from batch
   where action = 'TOKEN_ISSUED' and tmc_id is not null and target_client_id is not null
   group by tmc_id, target_client_id
)
insert into ${tableIn(tx, "api_user_token_activity")} (client_id, tmc_id, last_token_issued_at)
select u.client_id, u.tmc_id, issued.at
  from issued join ${tableIn(tx, "api_users")} u on u.client_id = issued.target_client_id and u.tmc_id = issued.tmc_id
 order by u.client_id
on conflict (client_id) do update
  set last_token_issued_at = greatest(api_user_token_activity.last_token_issued_at, excluded.last_token_issued_at)`;

export class PostgresAuditRepository implements AuditRepository {
  async append(tx: Tx, events: readonly AuditEvent[]): Promise<void> {
    if (events.length === 0) return;
    const rows = events.map(toRow);
    try {
      // For a single event other than a token (the transactional appends of operator and admin
      // calls, the one-by-one retry of a refused batch) the plain insert measured cheaper.
      if (rows.length === 1 && rows[0]!.action !== "TOKEN_ISSUED")
        await knexOf(tx)<AuditEventRow>("audit_events").insert(rows[0]!);
      else await knexOf(tx).raw(insertBatch(tx), [JSON.stringify(rows)]);
    } catch (error) {
      // SQLSTATE classes 22 (data exception) and 23 (integrity): the rows themselves are refused.
      if (/^2[23]/.test(String((error as { code?: string }).code ?? ""))) throw new AuditRecordRejected(error);
      throw error;
    }
  }

  async list(tx: Tx, scope: TenantScope, limit: number): Promise<RecordedAuditEvent[]> {
    const rows = await knexOf(tx)<AuditEventRow>("audit_events")
      .where({ tmc_id: scope.tmcId })
      .orderBy("id", "desc")
      .limit(limit);
    return rows.map(toEvent);
  }

  search(tx: Tx, scope: TenantScope, filter: AuditFilter, limit: number): Promise<NumberedAuditEvent[]> {
    return searched(tx, (q) => q.where({ tmc_id: scope.tmcId }), filter, limit);
  }

  searchPlatform(tx: Tx, filter: AuditFilter, limit: number): Promise<NumberedAuditEvent[]> {
    return searched(tx, (q) => q.whereNull("tmc_id"), filter, limit);
  }
}

type Trail = (query: Knex.QueryBuilder<AuditEventRow>) => Knex.QueryBuilder<AuditEventRow>;

/**
 * One trail's events narrowed by `filter`, newest first. Every filter has an index ending in id
 * (migration 20261126001000), so a page is a short backwards index read in id order. A time
 * window (`since`, `until`) is read in the order of its own index, (tmc_id, occurred_at, id)
 * (migration 20261129001000): newest `occurred_at` first, then id. Read by id instead, a past
 * `until` in a busy tenant made Postgres walk every newer event of the tenant to skip it (1 M
 * events: past the statement timeout). The two orders differ only for an event written after a
 * later-dated one. A window's page token is still the last event's id: the next page starts below
 * that event's (occurred_at, id). "Actor or target" is two such reads, each limited, merged: an
 * OR would make Postgres combine both indexes into a bitmap and sort every matching event before
 * it could return the newest.
 */
async function searched(tx: Tx, trail: Trail, filter: AuditFilter, limit: number): Promise<NumberedAuditEvent[]> {
  const knex = knexOf(tx);
  const windowed = filter.since !== undefined || filter.until !== undefined;
  const newestFirst = <Q extends Knex.QueryBuilder>(query: Q): Q =>
    (windowed ? query.orderBy("occurred_at", "desc").orderBy("id", "desc") : query.orderBy("id", "desc")) as Q;
  const narrowed = (query: Knex.QueryBuilder<AuditEventRow>) => {
    trail(query);
    if (filter.actions.length > 0) query.whereIn("action", [...filter.actions]);
    if (filter.since) query.where("occurred_at", ">=", filter.since);
    if (filter.until) query.where("occurred_at", "<", filter.until);
    if (filter.beforeId !== undefined) {
      if (windowed) {
        const last = trail(
          knex<AuditEventRow>("audit_events").select("occurred_at", "id").where("id", filter.beforeId),
        );
        query.whereRaw("(occurred_at, id) < (?)", [last]);
      } else query.where("id", "<", filter.beforeId);
    }
    return newestFirst(query).limit(limit);
  };
  const clientId = filter.clientId;
  const query =
    clientId === undefined
      ? narrowed(knex<AuditEventRow>("audit_events"))
      : newestFirst(
          knex
            .select("*")
            .from(
              knex
                .union(
                  [
                    narrowed(knex<AuditEventRow>("audit_events").where("actor", clientId)),
                    narrowed(knex<AuditEventRow>("audit_events").where("target_client_id", clientId)),
                  ],
                  true,
                )
                .as("either"),
            ),
        ).limit(limit);
  const rows = (await query) as AuditEventRow[];
  return rows.map((r) => ({ ...toEvent(r), id: String(r.id) }));
}

/** An event as audit_events stores it (also what tests insert to build a trail by hand). */
export function toRow(e: AuditEvent): Omit<AuditEventRow, "id"> {
  return {
    occurred_at: e.occurredAt ?? new Date(),
    action: e.action,
    outcome: e.outcome,
    actor: e.actor,
    tmc_id: e.tmcId,
    target_client_id: e.targetClientId,
    debug_identifier: e.debugIdentifier,
    details: e.details ?? {},
  };
}

function toEvent(r: AuditEventRow): RecordedAuditEvent {
  return {
    occurredAt: new Date(r.occurred_at),
    action: r.action,
    outcome: r.outcome as AuditEvent["outcome"],
    actor: r.actor,
    tmcId: r.tmc_id,
    targetClientId: r.target_client_id,
    debugIdentifier: r.debug_identifier,
    details: Object.fromEntries(
      Object.entries(r.details ?? {}).map(([k, v]) => [
        k,
        typeof v === "number" || typeof v === "boolean" ? v : String(v),
      ]),
    ),
  };
}
