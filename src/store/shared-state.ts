import { createClient, type RedisClientType } from "redis";
import type { Logger } from "pino";

/**
 * The state instances share besides Postgres: Redis, or on the embedded default an in-process
 * stand-in (one instance only). Token revocation and rate limiting build on this.
 */
export interface SharedState {
  readonly kind: "redis" | "memory";
  /** The node-redis client when kind is "redis". */
  readonly redis: RedisClientType | undefined;
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

export function openSharedState(redisUrl: string | undefined, logger: Logger): SharedState {
  if (!redisUrl) {
    return { kind: "memory", redis: undefined, ping: async () => true, close: async () => {} };
  }
  const client: RedisClientType = createClient({
    url: redisUrl,
    // Fail commands at once while disconnected, so callers fall back instead of queueing.
    disableOfflineQueue: true,
    socket: { connectTimeout: 2_000, reconnectStrategy: (retries) => Math.min(100 * 2 ** retries, 2_000) },
  });
  let lastError = "";
  client.on("error", (error: Error) => {
    // Logged once per distinct failure: a down Redis must not flood the log.
    if (error.message !== lastError) logger.warn({ err: { message: error.message } }, "redis error");
    lastError = error.message;
  });
  client.on("ready", () => {
    if (lastError) logger.info("redis reconnected");
    lastError = "";
  });
  // Not awaited: the service starts (and reports not ready) while Redis is unreachable.
  client.connect().catch(() => {});
  return {
    kind: "redis",
    redis: client,
    async ping() {
      if (!client.isReady) return false;
      try {
        return (await client.ping()) === "PONG";
      } catch {
        return false;
      }
    },
    async close() {
      if (client.isOpen) await client.close().catch(() => client.destroy());
      else client.destroy();
    },
  };
}
