import type { Knex } from "knex";

/** How long a migration or maintenance statement waits for a table lock before it gives up. */
export const DDL_LOCK_TIMEOUT = "5s" as const;

/** One driver connection of a pool, lent out and taken back (Knex's client does not type it). */
type LendingClient = {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<void>;
};

/**
 * Runs `work` on one connection, for statements that cannot run in a transaction (CREATE INDEX
 * CONCURRENTLY), with `lock_timeout` set for its short ALTERs: a session setting only holds on the
 * connection it was made on, and a pool may hand each statement another. A DDL statement queued
 * behind a long transaction would otherwise block every reader and writer queued behind it.
 * CREATE INDEX CONCURRENTLY itself runs with the lock timeout off: its lock (SHARE
 * UPDATE EXCLUSIVE) blocks no reader or writer, but it must wait for every transaction of the
 * database older than it, and a lock timeout would abort it there, leaving an invalid index.
 */
export async function onOneConnection<T>(
  knex: Knex,
  work: (run: (sql: string, bindings?: readonly Knex.RawBinding[]) => Promise<unknown>) => Promise<T>,
  lockTimeout: `${number}${"ms" | "s"}` = DDL_LOCK_TIMEOUT,
): Promise<T> {
  if (!/^\d+(ms|s)$/.test(lockTimeout)) throw new Error(`lock_timeout must be like 5s or 500ms, got ${lockTimeout}`);
  const client = knex.client as LendingClient;
  const connection = await client.acquireConnection();
  const run = async (sql: string, bindings: readonly Knex.RawBinding[] = []) => {
    const concurrently = /\bconcurrently\b/i.test(sql);
    if (concurrently) await knex.raw("set lock_timeout = 0").connection(connection);
    try {
      return (await knex.raw(sql, [...bindings]).connection(connection)) as unknown;
    } finally {
      if (concurrently) await knex.raw(`set lock_timeout = '${lockTimeout}'`).connection(connection);
    }
  };
  try {
    await run(`set lock_timeout = '${lockTimeout}'`);
    return await work(run);
  } finally {
    await run("reset lock_timeout").catch(() => undefined);
    await client.releaseConnection(connection);
  }
}

/** `work` in one transaction whose lock waits end after DDL_LOCK_TIMEOUT (a 55P03 error). */
export function inLockedTransaction<T>(knex: Knex, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  return knex.transaction(async (trx) => {
    await trx.raw(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
    return work(trx);
  });
}

/** Runs one statement on the connection of `onOneConnection` (or anything that runs raw SQL). */
export type RunStatement = (sql: string, bindings?: readonly Knex.RawBinding[]) => Promise<unknown>;

/** An index left invalid by an interrupted CREATE INDEX CONCURRENTLY (IF NOT EXISTS would keep it). */
export async function isInvalidIndex(run: RunStatement, name: string): Promise<boolean> {
  const { rows } = (await run(
    "select not i.indisvalid as invalid from pg_index i where i.indexrelid = to_regclass(?)",
    [name],
  )) as { rows: Array<{ invalid: boolean }> };
  return rows[0]?.invalid === true;
}

/** Whether the index `partition` is attached to the partitioned index `parent`. */
export async function isIndexAttached(run: RunStatement, parent: string, partition: string): Promise<boolean> {
  const { rows } = (await run(
    "select 1 from pg_inherits where inhparent = to_regclass(?) and inhrelid = to_regclass(?)",
    [parent, partition],
  )) as { rows: unknown[] };
  return rows.length === 1;
}
