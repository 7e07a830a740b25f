import { createClient, type RedisClientType } from "redis";
import type { Logger } from "../../domain/shared/observability.js";
import type { RedisSettings } from "../settings.js";
import { withinTimeout } from "./command-timeout.js";

/**
 * The node-redis client every Redis adapter shares. Commands fail at once while disconnected
 * (no offline queue), so callers fall back instead of queueing; a down Redis is logged once per
 * distinct failure, not once per command.
 */
export function openRedis(options: RedisSettings, logger: Logger): RedisClientType {
  const client: RedisClientType = createClient({
    url: options.redisUrl,
    disableOfflineQueue: true,
    // No node-redis per-command timer: every command here is bounded by withinTimeout (our
    // REDIS_COMMAND_TIMEOUT_MS), and node-redis's (5 s by default) guards only commands not yet
    // written, which disableOfflineQueue already fails. Its AbortSignal.timeout per command still
    // fired 5 s later with a DOMException each: ~3 % of gRPC issuance's CPU profile.
    commandOptions: { timeout: 0 },
    socket: {
      connectTimeout: options.redisConnectTimeoutMs,
      reconnectStrategy: (retries) => Math.min(100 * 2 ** retries, options.redisReconnectMaxDelayMs),
    },
  });
  let lastError = "";
  client.on("error", (error: Error) => {
    if (error.message !== lastError) logger.warn({ err: { message: error.message } }, "redis error");
    lastError = error.message;
  });
  client.on("ready", () => {
    if (lastError) logger.info({}, "redis reconnected");
    lastError = "";
  });
  // Not awaited: the service starts (and reports not ready) while Redis is unreachable.
  client.connect().catch(() => {});
  return client;
}

export async function pingRedis(client: RedisClientType, timeoutMs: number): Promise<boolean> {
  if (!client.isReady) return false;
  try {
    return (await withinTimeout(client.ping(), timeoutMs)) === "PONG";
  } catch {
    return false;
  }
}

export async function closeRedis(client: RedisClientType): Promise<void> {
  if (client.isOpen) await client.close().catch(() => client.destroy());
  else client.destroy();
}
