import crypto from "node:crypto";
import { after, before } from "node:test";
import { createClient, type RedisClientType } from "redis";
import { TEST_REDIS_URL } from "./backend.js";

/**
 * A test file's connection to the machine's Redis, with key prefixes of its own: `uniquePrefix()`
 * gives each limiter or cache a fresh one, and only keys under the file's prefixes are deleted
 * afterwards (the shared Redis is never flushed).
 */
export function useSharedRedis(tag: string): {
  readonly redis: () => RedisClientType;
  readonly uniquePrefix: () => string;
} {
  const runId = `test:${tag}:${process.pid}:${Date.now().toString(36)}:${crypto.randomBytes(3).toString("hex")}:`;
  let prefixes = 0;
  let redis: RedisClientType | undefined;
  before(async () => {
    redis = createClient({ url: TEST_REDIS_URL, disableOfflineQueue: true });
    redis.on("error", () => {});
    await redis.connect();
  });
  after(async () => {
    if (!redis) return;
    for (const key of await redis.keys(`${runId}*`)) await redis.del(key);
    await redis.close();
  });
  return {
    redis: () => {
      if (!redis) throw new Error("Redis is connected in before()");
      return redis;
    },
    uniquePrefix: () => `${runId}${prefixes++}:`,
  };
}
