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

/** The partitions of audit_events with their upper bounds, oldest first. */
export async function auditPartitions(db: Knex): Promise<AuditPartition[]> {
  const { rows } = (await db.raw(
    `select c.relname as name,
            (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']+)''\\)'))[1]::timestamptz as upper
       from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = ?::regclass
      order by 2 nulls last`,
    [tableIn(db, "audit_events")],
  )) as { rows: Array<{ name: string; upper: Date | string | null }> };
  return rows.map((r) => ({ name: r.name, upper: r.upper === null ? undefined : new Date(r.upper) }));
}

/**
 * Creates the month starting at `start` as a plain table, then attaches it: CREATE TABLE ...
 * PARTITION OF would take an ACCESS EXCLUSIVE lock on audit_events (every insert and search
 * waits), ATTACH only a SHARE UPDATE EXCLUSIVE one. The parent's indexes are built on the empty
 * table as it is attached. Idempotent.
 */
export async function createMonthPartition(trx: Knex.Transaction, start: Date): Promise<boolean> {
  const name = monthPartitionName(start);
  const [table, parent] = [tableIn(trx, name), tableIn(trx, "audit_events")];
  const exists = (await trx.raw("select to_regclass(?) as found", [table])) as { rows: Array<{ found: unknown }> };
  if (exists.rows[0]?.found) return false;
  await trx.raw(`create table ${table} (like ${parent} including defaults)`);
  await trx.raw(
    `alter table ${parent} attach partition ${table} for values from ('${start.toISOString()}') to ('${monthStart(start, 1).toISOString()}')`,
  );
  return true;
}

export interface PartitionMaintenance {
  readonly created: string[];
  readonly dropped: string[];
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
  return inLockedTransaction(db, async (trx) => {
    const created: string[] = [];
    const dropped: string[] = [];
    const { rows } = (await trx.raw("select pg_try_advisory_xact_lock(?) as locked", [MAINTENANCE_LOCK_KEY])) as {
      rows: Array<{ locked: boolean }>;
    };
    if (!rows[0]!.locked) return { created, dropped };
    const partitions = await auditPartitions(trx);
    const legacy = partitions.find((p) => p.name === LEGACY_PARTITION);
    for (let month = 0; month <= options.monthsAhead; month++) {
      const start = monthStart(now, month);
      // Months below the legacy partition's bound are in it already.
      if (legacy?.upper !== undefined && legacy.upper > start) continue;
      if (await createMonthPartition(trx, start)) created.push(monthPartitionName(start));
    }
    if (options.retentionMonths > 0) {
      const cutoff = monthStart(now, -options.retentionMonths);
      for (const partition of partitions) {
        if (partition.upper === undefined || partition.upper > cutoff) continue;
        const table = tableIn(trx, partition.name);
        await trx.raw(`alter table ${tableIn(trx, "audit_events")} detach partition ${table}`);
        await trx.raw(`drop table ${table}`);
        dropped.push(partition.name);
      }
    }
    return { created, dropped };
  });
}
