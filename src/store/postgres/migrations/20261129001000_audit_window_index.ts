import type { Knex } from "knex";
import { auditPartitions, LEGACY_PARTITION } from "../audit-partitions.js";
import { inLockedTransaction, isIndexAttached, isInvalidIndex, onOneConnection } from "../online-ddl.js";

/** CREATE INDEX CONCURRENTLY cannot run inside a transaction. */
export const config = { transaction: false };

/**
 * The audit search with a time window (`since`/`until`) reads the window in index order: a search
 * with a past `until` in a busy tenant used to read the tenant's index by id backwards, filtering
 * every event newer than `until` row by row (1 M events: the statement timeout, 503). The window's
 * events now come newest `occurred_at` first from (tmc_id, occurred_at, id), which replaces the
 * former (tmc_id, occurred_at); the platform's trail gets its own partial index.
 *
 * audit_events is partitioned, and CREATE INDEX CONCURRENTLY does not work on a partitioned table:
 * the parent's index is created ON ONLY the parent (invalid, and no partition is touched), each
 * partition's is built CONCURRENTLY (no write blocked) and attached to it; once every partition's
 * is attached the parent's is valid, and partitions created later get theirs as they are attached.
 */
const WINDOW_INDEXES: ReadonlyArray<readonly [string, string]> = [
  ["window", "(tmc_id, occurred_at, id)"],
  ["platform_window", "(occurred_at, id) where tmc_id is null"],
];

const OLD_TIME_INDEX = "audit_events_time_search_idx";

export async function up(knex: Knex): Promise<void> {
  const partitions = await auditPartitions(knex);
  await onOneConnection(knex, async (run) => {
    for (const [name, columns] of WINDOW_INDEXES) {
      await run(`create index if not exists ${parentIndex(name)} on only audit_events ${columns}`);
      for (const partition of partitions) {
        const index = `${partition.name}_${name}_idx`;
        // An interrupted CONCURRENTLY leaves an invalid index that IF NOT EXISTS would keep.
        if (await isInvalidIndex(run, index)) await run(`drop index concurrently ${index}`);
        await run(`create index concurrently if not exists ${index} on ${partition.name} ${columns}`);
        if (!(await isIndexAttached(run, parentIndex(name), index)))
          await run(`alter index ${parentIndex(name)} attach partition ${index}`);
      }
    }
  });
  // Every partition's (tmc_id, occurred_at, id) serves what (tmc_id, occurred_at) did. Dropping an
  // index of a partitioned table cannot be CONCURRENTLY: a short ACCESS EXCLUSIVE under lock_timeout.
  await inLockedTransaction(knex, (trx) => trx.raw(`drop index if exists ${OLD_TIME_INDEX}`));
}

/** The former time index, its legacy partition's under the name the migrations before this one expect. */
export async function down(knex: Knex): Promise<void> {
  await inLockedTransaction(knex, async (trx) => {
    await trx.raw(`create index if not exists ${OLD_TIME_INDEX} on only audit_events (tmc_id, occurred_at)`);
    for (const partition of await auditPartitions(trx)) {
      const index =
        partition.name === LEGACY_PARTITION ? "audit_events_tmc_time_idx" : `${partition.name}_tmc_id_occurred_at_idx`;
      await trx.raw(`create index if not exists ${index} on ${partition.name} (tmc_id, occurred_at)`);
      await trx.raw(`alter index ${OLD_TIME_INDEX} attach partition ${index}`);
    }
    for (const [name] of WINDOW_INDEXES) await trx.raw(`drop index if exists ${parentIndex(name)}`);
  });
}

function parentIndex(name: string): string {
  return `audit_events_${name}_search_idx`;
}
