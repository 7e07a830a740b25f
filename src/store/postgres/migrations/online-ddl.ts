import type { Knex } from "knex";

/** The part of Knex's (untyped) client that lends one driver connection out and back. */
type LendingClient = {
  acquireConnection(): Promise<{ query(sql: string): Promise<unknown> }>;
  releaseConnection(connection: unknown): Promise<void>;
};

/**
 * For a migration with `config = { transaction: false }` (CREATE INDEX CONCURRENTLY cannot run in
 * a transaction): runs `statements` in order on ONE connection with `lock_timeout` set for them.
 * There knex.raw may take any pooled connection, so a separate `SET lock_timeout` could land on
 * another one; in a transactional migration, `SET LOCAL lock_timeout` first is enough. The
 * timeout bounds how long a statement queues behind a long transaction (and every query queued
 * behind it): it fails with 55P03 instead, and the job can be run again (use IF NOT EXISTS, and
 * drop an INVALID index a failed CONCURRENTLY build left).
 */
export async function onOneConnection(
  knex: Knex,
  lockTimeout: `${number}${"ms" | "s"}`,
  statements: readonly string[],
) {
  if (!/^\d+(ms|s)$/.test(lockTimeout)) throw new Error(`lock_timeout must be like 5s or 500ms, got ${lockTimeout}`);
  const client = knex.client as LendingClient;
  const connection = await client.acquireConnection();
  try {
    await connection.query(`set lock_timeout = '${lockTimeout}'`);
    for (const sql of statements) await connection.query(sql);
  } finally {
    await connection.query("reset lock_timeout").catch(() => {});
    await client.releaseConnection(connection);
  }
}
