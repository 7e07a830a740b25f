import type { DemoSeed } from "../../src/domain/seed/demo-seed.js";
import { PassThrough } from "node:stream";
import knexPkg from "knex";
import { createClient } from "redis";
import { createService, type Service } from "../../src/app/compose.js";
import { loadConfig } from "../../src/config/config.js";
import {
  newStorage,
  redisKeyPrefixOf,
  removeTempDir,
  serviceEnv,
  TEST_DATABASE_URL,
  TEST_OPERATOR_TOKEN,
  TEST_REDIS_URL,
  type Storage,
} from "./backend.js";

/** A running instance on a real port, with its log lines captured. */
export interface RunningService {
  readonly service: Service;
  readonly baseUrl: string;
  readonly storage: Storage;
  /** Every JSON log line written so far. */
  logs(): string;
  stop(): Promise<void>;
}

export async function startService(
  options: { storage?: Storage; env?: Record<string, string>; listen?: boolean } = {},
): Promise<RunningService> {
  const storage = options.storage ?? newStorage();
  const config = loadConfig(serviceEnv(storage, options.env));
  const chunks: string[] = [];
  const logStream = new PassThrough();
  logStream.on("data", (chunk: Buffer) => chunks.push(chunk.toString("utf8")));
  const service = await createService(config, { logStream });
  const baseUrl = options.listen === false ? "" : await service.listen();
  return {
    service,
    baseUrl,
    storage,
    logs: () => chunks.join(""),
    stop: () => service.close(),
  };
}

/**
 * Removes everything a test's storage holds once its instances have stopped: the Postgres schema,
 * the Redis keys under its prefix (they would expire, but need not linger) and the data
 * directory in the OS temp dir (the embedded database, generated secrets, the DATA_DIR lock).
 * Idempotent; the directory goes even when dropping the schema fails.
 */
export async function dropStorage(storage: Storage): Promise<void> {
  try {
    if (storage.schema) {
      const db = knexPkg.knex({ client: "pg", connection: TEST_DATABASE_URL });
      try {
        await db.raw(`drop schema if exists "${storage.schema}" cascade`);
      } finally {
        await db.destroy();
      }
      await deleteRedisKeys(redisKeyPrefixOf(storage));
    }
  } finally {
    removeTempDir(storage.dataDir);
  }
}

/** Deletes the keys under one storage's prefix (never anything else: the Redis is shared). */
async function deleteRedisKeys(prefix: string): Promise<void> {
  const redis = createClient({ url: TEST_REDIS_URL, socket: { connectTimeout: 2_000, reconnectStrategy: false } });
  redis.on("error", () => {});
  try {
    await redis.connect();
    for await (const keys of redis.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) {
      if (keys.length > 0) await redis.unlink(keys);
    }
  } catch {
    // Every key has a TTL: one left behind by an unreachable Redis expires on its own.
  } finally {
    if (redis.isOpen) await redis.close().catch(() => redis.destroy());
  }
}

export const operatorHeaders = { authorization: `Bearer ${TEST_OPERATOR_TOKEN}` };

/** Seeds a demo tenant through the operator API (its answer: the domain's DemoSeed, as JSON). */
export function seedDemo(baseUrl: string): Promise<DemoSeed> {
  return operatorCall<DemoSeed>(baseUrl, "Seed", {});
}

/** Calls an OperatorService RPC with the Connect protocol's JSON over HTTP/1.1. */
export async function operatorCall<T = Record<string, unknown>>(
  baseUrl: string,
  method: string,
  body: object,
): Promise<T> {
  const response = await fetch(`${baseUrl}/travel.operator.v1.OperatorService/${method}`, {
    method: "POST",
    headers: { ...operatorHeaders, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as T;
  if (!response.ok) throw new Error(`${method} failed with ${response.status}: ${JSON.stringify(json)}`);
  return json;
}
