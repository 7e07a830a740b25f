import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/**
 * The suite runs once per backend (test/run.sh): TEST_BACKEND=postgres uses the machine's
 * Postgres and Redis, TEST_BACKEND=embedded uses PGlite and the in-process stand-in.
 */
export type Backend = "postgres" | "embedded";

export const backend: Backend = process.env.TEST_BACKEND === "embedded" ? "embedded" : "postgres";
export const isPostgres = backend === "postgres";

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** Fixed per test process so instances that share a database also share keys, as in production. */
export const TEST_MASTER_KEY = crypto.randomBytes(32).toString("base64");
export const TEST_OPERATOR_TOKEN = crypto.randomBytes(24).toString("base64url");

let counter = 0;

/** A place for one deployment's data: a fresh Postgres schema, or a fresh DATA_DIR. */
export interface Storage {
  readonly env: Record<string, string>;
  readonly dataDir: string;
  readonly schema: string | undefined;
}

export function newStorage(): Storage {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "auth-svc-test-"));
  if (!isPostgres) return { env: { DATA_DIR: dataDir }, dataDir, schema: undefined };
  const schema = `t_${process.pid}_${Date.now().toString(36)}_${counter++}`;
  return {
    env: { DATA_DIR: dataDir, DATABASE_URL: TEST_DATABASE_URL, REDIS_URL: TEST_REDIS_URL, DATABASE_SCHEMA: schema },
    dataDir,
    schema,
  };
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
    // connect-fastify's drain timer is not unref'd: a short one keeps test processes from lingering.
    SHUTDOWN_TIMEOUT_MS: "500",
    // Each storage gets its own Redis keys, so parallel test files never share budgets or state.
    REDIS_KEY_PREFIX: `test:${storage.dataDir.split("/").pop()}:`,
    ...storage.env,
    ...extra,
  };
}
