import type { Knex } from "knex";
import { inLockedTransaction } from "./online-ddl.js";
import { tableIn } from "./unit-of-work.js";

/**
 * audit_events is partitioned by month of occurred_at (UTC): retention drops whole partitions
 * (no DELETE, no bloat, no vacuum debt), and a time filter reads only the months it names.
 * Partitions: `audit_events_legacy` (the table as it was before partitioning, everything before
 * its bound), one `audit_events_pYYYYMM` per month, and `audit_events_default` for an event
 * dated past the months created ahead (a skewed clock), so no event is ever refused.
 */
export const AUDIT_PARTITION_PREFIX = "audit_events_p";
export const LEGACY_PARTITION = "audit_events_legacy";
export const DEFAULT_PARTITION = "audit_events_default";

/** The start (UTC) of the month `add` months after the one `at` falls in. */
export function monthStart(at: Date, add = 0): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + add, 1));
}

export function monthPartitionName(start: Date): string {
  return `${AUDIT_PARTITION_PREFIX}${start.getUTCFullYear()}${String(start.getUTCMonth() + 1).padStart(2, "0")}`;
}

export interface AuditPartition {
  readonly name: string;
  /** Exclusive upper bound; undefined for the default partition. */
  readonly upper: Date | undefined;
}

/**
 * The partitions of audit_events with their upper bounds, oldest first. pg_get_expr opens each
 * partition under a lock: the maintenance job passes its own timeout so that wait ends at the lock
 * timeout, not at the pool's query timeout.
 */
export async function auditPartitions(
  db: Knex,
  options: { readonly query_timeout?: number } = {},
): Promise<AuditPartition[]> {
  const { rows } = (await db
    .raw(
      `select c.relname as name,
            (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']+)''\\)'))[1]::timestamptz as upper
       from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = ?::regclass
      order by 2 nulls last`,
      [tableIn(db, "audit_events")],
    )
    .options(options)) as { rows: Array<{ name: string; upper: Date | string | null }> };
  return rows.map((r) => ({ name: r.name, upper: r.upper === null ? undefined : new Date(r.upper) }));
}

/**
 * Creates the month starting at `start` as a plain table, then attaches it: CREATE TABLE ...
 * PARTITION OF would take an ACCESS EXCLUSIVE lock on audit_events (every insert and search
 * waits), ATTACH only a SHARE UPDATE EXCLUSIVE one. The parent's indexes are built on the empty
 * table as it is attached. Idempotent.
 */
export async function createMonthPartition(
  trx: Knex.Transaction,
  start: Date,
  options: { readonly query_timeout?: number } = {},
): Promise<{ created: boolean; moved: number }> {
  const name = monthPartitionName(start);
  const [table, parent, fallback] = [tableIn(trx, name), tableIn(trx, "audit_events"), tableIn(trx, DEFAULT_PARTITION)];
  const [from, to] = [start.toISOString(), monthStart(start, 1).toISOString()];
  const found = async (relation: string) =>
    ((await trx.raw("select to_regclass(?) as found", [relation])) as { rows: Array<{ found: unknown }> }).rows[0]
      ?.found;
  if (await found(table)) return { created: false, moved: 0 };
  // LIKE reads the parent under a lock: its wait too ends at the lock timeout, not the pool's query timeout.
  await trx.raw(`create table ${table} (like ${parent} including defaults)`).options(options);
  // Events of this month already in the default partition (dated ahead by a skewed clock) would make
  // ATTACH fail ("updated partition constraint for default partition would be violated"), and with
  // it every later run: they move to the new month first, in the same transaction.
  let moved = 0;
  if (await found(fallback)) {
    const result = (await trx
      .raw(
        `with stray as (delete from ${fallback} where occurred_at >= ? and occurred_at < ? returning *)
         insert into ${table} select * from stray`,
        [from, to],
      )
      .options(options)) as { rowCount?: number | null };
    moved = result.rowCount ?? 0;
  }
  await trx
    .raw(`alter table ${parent} attach partition ${table} for values from ('${from}') to ('${to}')`)
    .options(options);
  return { created: true, moved };
}

export interface PartitionMaintenance {
  readonly created: string[];
  readonly dropped: string[];
  /** Events moved out of the default partition into the month created for them. */
  readonly moved: number;
  /** Whether this instance did the work (false: another held the lock; nothing was checked). */
  readonly acted: boolean;
  /** Consecutive months after the current one that have a partition, as the run left them. */
  readonly monthsAhead: number;
}

/**
 * How long a maintenance statement may run: its lock waits end at DDL_LOCK_TIMEOUT (5 s), as
 * documented, not at the jobs pool's query timeout (DATABASE_QUERY_TIMEOUT_MS, 1 s), which ended
 * them first; the margin is for the work itself (moving stray events, validating the default partition).
 */
const MAINTENANCE_STATEMENT_TIMEOUT_MS = 30_000;

/** Consecutive months after the one `now` falls in that have a partition (the legacy one counts for its months). */
export function monthsCreatedAhead(partitions: readonly AuditPartition[], now: Date): number {
  const months = new Set(partitions.map((p) => p.name));
  const legacy = partitions.find((p) => p.name === LEGACY_PARTITION)?.upper;
  let ahead = 0;
  for (let month = 1; month <= 120; month++) {
    const start = monthStart(now, month);
    if (!months.has(monthPartitionName(start)) && !(legacy !== undefined && legacy > start)) break;
    ahead = month;
  }
  return ahead;
}

/** Arbitrary constant: one instance at a time maintains the partitions. */
const MAINTENANCE_LOCK_KEY = 727_501_124;

/**
 * Makes sure the current month and `monthsAhead` more have partitions, and drops whole
 * partitions that end on or before the start of the month `retentionMonths` back (0: keep
 * everything). The default partition is never dropped. One short transaction under a lock
 * timeout, so a long transaction on the trail makes the job fail and retry later instead of
 * queueing every insert and search behind it; another instance already at it is left to it.
 */
export function maintainAuditPartitions(
  db: Knex,
  now: Date,
  options: { readonly monthsAhead: number; readonly retentionMonths: number },
): Promise<PartitionMaintenance> {
  const timeout = { query_timeout: MAINTENANCE_STATEMENT_TIMEOUT_MS };
  return inLockedTransaction(db, async (trx) => {
    await trx.raw(`set local statement_timeout = ${MAINTENANCE_STATEMENT_TIMEOUT_MS}`);
    const created: string[] = [];
    const dropped: string[] = [];
    let moved = 0;
    // What the run did, with how far ahead the months now reach (read after any change).
    const outcome = async (acted: boolean) => ({
      created,
      dropped,
      moved,
      acted,
      monthsAhead: monthsCreatedAhead(await auditPartitions(trx, timeout), now),
    });
    const { rows } = (await trx.raw("select pg_try_advisory_xact_lock(?) as locked", [MAINTENANCE_LOCK_KEY])) as {
      rows: Array<{ locked: boolean }>;
    };
    if (!rows[0]!.locked) return outcome(false);
    const partitions = await auditPartitions(trx, timeout);
    const legacy = partitions.find((p) => p.name === LEGACY_PARTITION);
    for (let month = 0; month <= options.monthsAhead; month++) {
      const start = monthStart(now, month);
      // Months below the legacy partition's bound are in it already.
      if (legacy?.upper !== undefined && legacy.upper > start) continue;
      const made = await createMonthPartition(trx, start, timeout);
      if (made.created) created.push(monthPartitionName(start));
      moved += made.moved;
    }
    if (options.retentionMonths > 0) {
      const cutoff = monthStart(now, -options.retentionMonths);
      for (const partition of partitions) {
        if (partition.upper === undefined || partition.upper > cutoff) continue;
        const table = tableIn(trx, partition.name);
        await trx.raw(`alter table ${tableIn(trx, "audit_events")} detach partition ${table}`).options(timeout);
        await trx.raw(`drop table ${table}`).options(timeout);
        dropped.push(partition.name);
      }
    }
    return outcome(true);
  });
}
