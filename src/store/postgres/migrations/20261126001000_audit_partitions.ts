import type { Knex } from "knex";
import { createMonthPartition, DEFAULT_PARTITION, LEGACY_PARTITION, monthStart } from "../audit-partitions.js";
import { inLockedTransaction, isIndexAttached, isInvalidIndex, onOneConnection } from "../online-ddl.js";

/** CREATE INDEX CONCURRENTLY cannot run inside a transaction. */
export const config = { transaction: false };

/**
 * The audit trail's search: one index per filter of the operator's audit search, each
 * ending in id so a filter's newest page is an index range read backwards (the keyset order, id
 * desc). `audit_events_tmc_time_idx` (tmc_id, occurred_at) already serves the time range. The
 * platform's own trail (`tmc_id is null`) has partial indexes of its own: Postgres takes only an
 * equality on a leading column as fixing it, so (tmc_id, id) would not give it the order by id.
 */
const SEARCH_INDEXES: ReadonlyArray<readonly [string, string]> = [
  ["tenant", "(tmc_id, id)"],
  ["action", "(tmc_id, action, id)"],
  ["actor", "(tmc_id, actor, id)"],
  ["target", "(tmc_id, target_client_id, id)"],
  ["time", "(tmc_id, occurred_at)"],
  ["platform", "(id) where tmc_id is null"],
  ["platform_action", "(action, id) where tmc_id is null"],
  ["platform_actor", "(actor, id) where tmc_id is null"],
  ["platform_target", "(target_client_id, id) where tmc_id is null"],
];

/**
 * Then monthly partitions by occurred_at, converting the existing table online: its rows stay
 * where they are (no copy, no rewrite). The table gets the search indexes concurrently and a
 * CHECK constraint (added NOT VALID, validated without blocking writes) that proves every row lies
 * below the bound, so ATTACH needs no scan; then, in one short transaction under a lock timeout,
 * it is renamed to audit_events_legacy, a partitioned audit_events takes its place (same columns,
 * same id sequence) and the old table is attached as the partition of everything before the bound,
 * its indexes as the partitions of the parent's.
 */
export async function up(knex: Knex): Promise<void> {
  if (await isPartitioned(knex)) return;
  const now = await databaseNow(knex);
  // A week's margin: events written while this runs must still fall below the bound.
  const bound = monthStart(new Date(now.getTime() + 7 * 86_400_000), 1);
  await onOneConnection(knex, async (run) => {
    for (const [name, columns] of SEARCH_INDEXES) {
      if (name === "time") continue; // exists since the initial schema
      // An interrupted CONCURRENTLY leaves an invalid index that IF NOT EXISTS would keep.
      if (await isInvalidIndex(run, legacyIndex(name))) await run(`drop index concurrently ${legacyIndex(name)}`);
      await run(`create index concurrently if not exists ${legacyIndex(name)} on audit_events ${columns}`);
    }
    await run(
      `alter table audit_events add constraint audit_events_legacy_bound check (occurred_at < '${bound.toISOString()}') not valid`,
    ).catch((error: { code?: string }) => {
      if (error.code !== "42710") throw error; // already there from an interrupted run
    });
    await run("alter table audit_events validate constraint audit_events_legacy_bound");
  });
  await inLockedTransaction(knex, async (trx) => {
    await trx.raw(`alter table audit_events rename to ${LEGACY_PARTITION}`);
    await trx.raw(
      `create table audit_events (like ${LEGACY_PARTITION} including defaults) partition by range (occurred_at)`,
    );
    // Retention drops the legacy table one day: the id sequence must belong to the parent.
    await trx.raw("alter sequence audit_events_id_seq owned by audit_events.id");
    for (const [name, columns] of SEARCH_INDEXES)
      await trx.raw(`create index ${parentIndex(name)} on only audit_events ${columns}`);
    // ATTACH adopts the legacy table's matching indexes (built concurrently above) as partitions
    // of the parent's; the CHECK constraint spares it the scan of the rows.
    await trx.raw(
      `alter table audit_events attach partition ${LEGACY_PARTITION} for values from (minvalue) to ('${bound.toISOString()}')`,
    );
    for (const [name] of SEARCH_INDEXES) await assertIndexAdopted(trx, parentIndex(name), legacyIndex(name));
    // The new tables are empty: their indexes are built as they are created.
    for (let month = 0; month < 3; month++) await createMonthPartition(trx, monthStart(bound, month));
    await trx.raw(`create table ${DEFAULT_PARTITION} partition of audit_events default`);
  });
}

/** Back to one plain table: only possible while nothing but the legacy partition holds events. */
export async function down(knex: Knex): Promise<void> {
  await inLockedTransaction(knex, async (trx) => {
    const { rows } = (await trx.raw(
      `select count(*)::int as n from audit_events where tableoid <> '${LEGACY_PARTITION}'::regclass`,
    )) as { rows: Array<{ n: number }> };
    if (rows[0]!.n > 0)
      throw new Error("audit events were written to monthly partitions: export them before going back");
    await trx.raw(`alter table audit_events detach partition ${LEGACY_PARTITION}`);
    await trx.raw(`alter sequence audit_events_id_seq owned by ${LEGACY_PARTITION}.id`);
    await trx.raw("drop table audit_events");
    await trx.raw(`alter table ${LEGACY_PARTITION} rename to audit_events`);
    await trx.raw("alter table audit_events drop constraint audit_events_legacy_bound");
    for (const [name] of SEARCH_INDEXES) if (name !== "time") await trx.raw(`drop index ${legacyIndex(name)}`);
  });
}

function legacyIndex(name: string): string {
  return name === "time" ? "audit_events_tmc_time_idx" : `audit_events_legacy_${name}_idx`;
}

function parentIndex(name: string): string {
  return `audit_events_${name}_search_idx`;
}

/** An index the parent had to build on the legacy table itself would have blocked writes while it ran. */
async function assertIndexAdopted(trx: Knex.Transaction, parent: string, partition: string): Promise<void> {
  if (!(await isIndexAttached((sql, bindings = []) => trx.raw(sql, [...bindings]), parent, partition)))
    throw new Error(`${partition} was not adopted as a partition of ${parent}`);
}

async function isPartitioned(knex: Knex): Promise<boolean> {
  const { rows } = (await knex.raw("select relkind from pg_class where oid = 'audit_events'::regclass")) as {
    rows: Array<{ relkind: string }>;
  };
  return rows[0]?.relkind === "p";
}

async function databaseNow(knex: Knex): Promise<Date> {
  const { rows } = (await knex.raw("select now() as now")) as { rows: Array<{ now: Date | string }> };
  return new Date(rows[0]!.now);
}
