import crypto from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../../domain/shared/observability.js";

/** One driver connection lent by Knex's client (pg's): queries run on it and nowhere else. */
export interface LockConnection {
  query(sql: string): Promise<unknown>;
}

export interface MigrationLockOptions {
  /** How long to wait for another instance's migration before giving up. */
  readonly timeoutMs: number;
  readonly logger: Logger;
  /** Pause between two attempts at the lock. */
  readonly retryMs?: number;
  /** Least time between two "waiting" log lines (the first is logged at once). */
  readonly logEveryMs?: number;
}

/** The first key of every migration lock (an arbitrary constant: this service's class of advisory locks). */
const LOCK_CLASS = 727_501_113;

/** Thrown when another instance's migration held the lock for longer than the bound. */
export class MigrationLockTimeoutError extends Error {
  constructor(schema: string, waitedMs: number) {
    super(
      `gave up waiting for another instance's migration of schema "${schema}" after ${waitedMs} ms ` +
        `(MIGRATION_LOCK_TIMEOUT_MS): the holder is still migrating or hung; see pg_locks for the advisory lock ` +
        `(${LOCK_CLASS}, ${schemaLockKey(schema)})`,
    );
    this.name = "MigrationLockTimeoutError";
  }
}

/**
 * The second key: one lock per schema, so deployments that share a Postgres server under
 * different DATABASE_SCHEMAs migrate independently. A signed 32-bit integer, as Postgres wants.
 */
export function schemaLockKey(schema: string): number {
  return crypto.createHash("sha256").update(schema).digest().readInt32BE(0);
}

/**
 * Runs `work` while this process holds the schema's migration lock, and only then. The lock is
 * TRANSACTION-scoped (`pg_try_advisory_xact_lock` in a transaction opened on `connection`): it
 * ends with that transaction's commit or rollback, or with the connection's death, so it can
 * never outlive us on a connection a pooler hands to someone else (a session lock could).
 *
 * CREATE INDEX CONCURRENTLY in a migration waits for every transaction that holds a snapshot when
 * it starts, to its end. So neither side may keep one: the holder's transaction is read-committed
 * and idle after its one statement (no snapshot), and a waiter is in no transaction between
 * attempts (each failed attempt rolls back at once), where a waiter blocked in pg_advisory_lock
 * would hold one and the holder's index build would wait for it forever.
 * `work` must run on other connections: this one only holds the lock.
 */
export async function withMigrationLock<T>(
  connection: LockConnection,
  schema: string,
  options: MigrationLockOptions,
  work: () => Promise<T>,
): Promise<T> {
  await acquire(connection, schema, options);
  try {
    const result = await work();
    await connection.query("commit");
    return result;
  } catch (error) {
    // A dead connection has ended the transaction (and the lock) already.
    await connection.query("rollback").catch(() => {});
    throw error;
  }
}

/** Returns inside the transaction that holds the lock. */
async function acquire(connection: LockConnection, schema: string, options: MigrationLockOptions): Promise<void> {
  const { timeoutMs, logger, retryMs = 250, logEveryMs = 5_000 } = options;
  const key = schemaLockKey(schema);
  const started = Date.now();
  let loggedAt: number | undefined;
  for (;;) {
    if (await tryLock(connection, key)) {
      if (loggedAt !== undefined) logger.info({ schema, waitedMs: Date.now() - started }, "migration lock acquired");
      return;
    }
    const waitedMs = Date.now() - started;
    if (waitedMs >= timeoutMs) throw new MigrationLockTimeoutError(schema, waitedMs);
    if (loggedAt === undefined || Date.now() - loggedAt >= logEveryMs) {
      loggedAt = Date.now();
      logger.warn(
        { schema, waitedMs, timeoutMs },
        `waiting for another instance's migration (${Math.round(waitedMs / 1000)} s so far)`,
      );
    }
    await sleep(Math.min(retryMs, Math.max(timeoutMs - waitedMs, 1)));
  }
}

/** One attempt: true inside the transaction that now holds the lock; false (and no transaction) when it is taken. */
async function tryLock(connection: LockConnection, key: number): Promise<boolean> {
  await connection.query("begin isolation level read committed");
  try {
    // The simple query protocol, on purpose: a statement with bind parameters leaves its unnamed
    // portal, and with it a snapshot, open until the next statement (migration-lock.test.ts
    // shows the index build waiting for it). Both keys are integers.
    const result = (await connection.query(`select pg_try_advisory_xact_lock(${LOCK_CLASS}, ${key}) as locked`)) as {
      rows: Array<{ locked: boolean }>;
    };
    if (result.rows[0]?.locked) {
      // The transaction idles while the migrations run elsewhere: a server-wide idle timeout
      // must not end it (and the lock) half-way.
      await connection.query("set local idle_in_transaction_session_timeout = 0");
      return true;
    }
  } catch (error) {
    await connection.query("rollback").catch(() => {});
    throw error;
  }
  await connection.query("rollback");
  return false;
}
