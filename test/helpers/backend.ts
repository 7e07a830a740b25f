import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../../src/config/config.js";
import { embeddedDatabaseDirectory } from "../../src/store/postgres/database.js";
import { copyEmptyEmbeddedDatabase } from "./pglite-template.js";
import { startPrivatePgbouncer } from "./private-pgbouncer.js";

/**
 * The suite runs once per backend (test/run.sh): TEST_BACKEND=postgres uses the machine's
 * Postgres and Redis, TEST_BACKEND=embedded uses PGlite and the in-process stand-in.
 */
export type Backend = "postgres" | "embedded";

export const backend: Backend = process.env.TEST_BACKEND === "embedded" ? "embedded" : "postgres";
export const isPostgres = backend === "postgres";

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
/** The service's default bound on waiting for another instance's migration, for the tests that open a Database. */
export const DEFAULT_MIGRATION_LOCK_TIMEOUT_MS = loadConfig({}).storage.migrationLockTimeoutMs;
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/**
 * TEST_PGBOUNCER=1 (with the postgres backend; test/run.sh's PgBouncer tier): every deployment's
 * pool goes through a PgBouncer in transaction mode this process starts (stopped when it exits),
 * as an operator's fleet would: DATABASE_URL the pooler, DATABASE_DIRECT_URL the server itself
 * (migrations, LISTEN), DATABASE_POOL_MODE=transaction, and the fresh non-public schema.
 */
export const throughPgbouncer = isPostgres && process.env.TEST_PGBOUNCER === "1";
const pooler = throughPgbouncer ? await startPrivatePgbouncer(TEST_DATABASE_URL) : undefined;

/** Fixed per test process so instances that share a database also share keys, as in production. */
export const TEST_MASTER_KEY = crypto.randomBytes(32).toString("base64");
export const TEST_OPERATOR_TOKEN = crypto.randomBytes(24).toString("base64url");

let counter = 0;

/** The prefix of every temporary directory the test helpers create in the OS temp dir. */
export const TEMP_DIR_PREFIX = "auth-svc-test-";

/**
 * Temporary directories this process created and has not removed yet. `removeTempDir` (called
 * by dropStorage) removes one as soon as its storage is dropped; whatever is left when the
 * process exits (a test that failed before its `after`, a suite skipped after its storage was
 * made) is swept then, so no test run leaves its data directories behind.
 */
const ownTempDirs = new Set<string>();
function sweepTempDirs(): void {
  for (const dir of ownTempDirs) fs.rmSync(dir, { recursive: true, force: true });
  ownTempDirs.clear();
}
process.on("exit", sweepTempDirs);
// A process ended by a signal (a runner's timeout, Ctrl-C) runs no "exit" handlers: sweep, then
// end of that same signal, unless someone else handles it.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    sweepTempDirs();
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  });
}

/** A fresh directory under the OS temp dir, removed by `removeTempDir` or at the latest when this process exits. */
export function newTempDir(prefix = TEMP_DIR_PREFIX): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  ownTempDirs.add(dir);
  return dir;
}

/** Removes a directory made by `newTempDir` (idempotent). */
export function removeTempDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
  ownTempDirs.delete(dir);
}

/** A place for one deployment's data: a fresh Postgres schema, or a fresh DATA_DIR. */
export interface Storage {
  readonly env: Record<string, string>;
  readonly dataDir: string;
  readonly schema: string | undefined;
}

/**
 * A fresh place for one deployment. On the embedded backend its DATA_DIR already holds an empty
 * database (pglite-template.ts), unless `emptyDataDir` asks for the first start from nothing.
 */
export function newStorage(options: { emptyDataDir?: boolean } = {}): Storage {
  const dataDir = newTempDir();
  if (!isPostgres) {
    if (!options.emptyDataDir) copyEmptyEmbeddedDatabase(embeddedDatabaseDirectory(dataDir));
    return { env: { DATA_DIR: dataDir }, dataDir, schema: undefined };
  }
  const schema = `t_${process.pid}_${Date.now().toString(36)}_${counter++}`;
  const database: Record<string, string> = pooler
    ? { DATABASE_URL: pooler.url, DATABASE_DIRECT_URL: TEST_DATABASE_URL, DATABASE_POOL_MODE: "transaction" }
    : { DATABASE_URL: TEST_DATABASE_URL };
  return {
    env: { DATA_DIR: dataDir, ...database, REDIS_URL: TEST_REDIS_URL, DATABASE_SCHEMA: schema },
    dataDir,
    schema,
  };
}

/** The Redis key prefix of the instances on a storage (dropStorage deletes its keys). */
export function redisKeyPrefixOf(storage: Storage): string {
  return `test:${path.basename(storage.dataDir)}:`;
}

/** The environment of one service instance on the given storage. */
export function serviceEnv(storage: Storage, extra: Record<string, string> = {}): Record<string, string> {
  return {
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: "info",
    MASTER_KEY: TEST_MASTER_KEY,
    OPERATOR_TOKEN: TEST_OPERATOR_TOKEN,
    TOKEN_ISSUER: "http://auth.test",
    // A short drain: a stop() with a stream still open (HTTP/2 sessions are destroyed after it) ends quickly.
    SHUTDOWN_TIMEOUT_MS: "500",
    // No balancer to drain from: SIGTERM closes at once (the drain's own tests set it).
    SHUTDOWN_DRAIN_MS: "0",
    // Each storage gets its own Redis keys, so parallel test files never share budgets or state.
    REDIS_KEY_PREFIX: redisKeyPrefixOf(storage),
    // Production fails fast (500 ms, then 503) when no pooled connection comes; on a test machine whose
    // cores are saturated, opening one can take longer than that. Functional tests are not about that
    // budget; the tests of failing fast pin the production default (PRODUCTION_DATABASE_TIMEOUTS).
    DATABASE_ACQUIRE_TIMEOUT_MS: "10000",
    ...storage.env,
    ...extra,
  };
}

/** The service's own default database timeouts, for the tests of what happens when they pass. */
export const PRODUCTION_DATABASE_TIMEOUTS: Record<string, string> = {
  DATABASE_ACQUIRE_TIMEOUT_MS: String(loadConfig({}).storage.databaseAcquireTimeoutMs),
};
