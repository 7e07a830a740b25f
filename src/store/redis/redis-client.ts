import {
  createClient,
  createCluster,
  createSentinel,
  type RedisClientOptions,
  type RedisClientType,
  type RedisClusterType,
  type RedisSentinelType,
} from "redis";
import type { Logger } from "../../domain/shared/observability.js";
import type { RedisSettings } from "../settings.js";
import { withinTimeout } from "./command-timeout.js";

/**
 * The node-redis connection every Redis adapter shares: one server (standalone), a Sentinel-managed
 * primary, or a Redis Cluster (REDIS_MODE). All three take the same commands; in a cluster every
 * multi-key command names keys of one slot (credential-keys.ts).
 */
export type RedisConnection = RedisClientType | RedisClusterType | RedisSentinelType;

/**
 * Opens the connection of REDIS_MODE. Commands fail at once while disconnected (no offline queue),
 * so callers fall back instead of queueing; a down Redis is logged once per distinct failure, not
 * once per command. Not awaited: the service starts (and reports Redis degraded) while Redis is
 * unreachable, and keeps trying.
 */
export function openRedis(options: RedisSettings, logger: Logger): RedisConnection {
  const urls = options.redisUrl.split(",").map((url) => url.trim());
  const nodeOptions = {
    disableOfflineQueue: true,
    // No node-redis per-command timer: every command here is bounded by withinTimeout (our
    // REDIS_COMMAND_TIMEOUT_MS), and node-redis's (5 s by default) guards only commands not yet
    // written, which disableOfflineQueue already fails. Its AbortSignal.timeout per command still
    // fired 5 s later with a DOMException each: ~3 % of gRPC issuance's CPU profile.
    commandOptions: { timeout: 0 },
    socket: {
      connectTimeout: options.redisConnectTimeoutMs,
      reconnectStrategy: (retries: number) => Math.min(100 * 2 ** retries, options.redisReconnectMaxDelayMs),
    },
  } satisfies NodeOptions;
  let lastError = "";
  const onError = (error: Error) => {
    if (error.message !== lastError) logger.warn({ err: { message: error.message } }, "redis error");
    lastError = error.message;
  };
  const onReady = () => {
    if (lastError) logger.info({}, "redis reconnected");
    lastError = "";
  };
  switch (options.redisMode) {
    case "standalone": {
      const client: RedisClientType = createClient({ ...nodeOptions, url: urls[0] });
      client.on("error", onError).on("ready", onReady);
      client.connect().catch(() => {});
      return client;
    }
    case "cluster":
      return openCluster(urls, nodeOptions, options.redisReconnectMaxDelayMs, onError, onReady);
    case "sentinel":
      return openSentinel(urls, nodeOptions, options, onError, onReady);
  }
}

type NodeOptions = Pick<RedisClientOptions, "disableOfflineQueue" | "commandOptions" | "socket">;

function openCluster(
  urls: readonly string[],
  nodeOptions: NodeOptions,
  retryMs: number,
  onError: (error: Error) => void,
  onReady: () => void,
): RedisClusterType {
  // Nodes found through the seeds are opened from `defaults` alone: the credentials go there.
  const cluster: RedisClusterType = createCluster({
    rootNodes: urls.map((url) => ({ url })),
    defaults: { ...nodeOptions, ...credentialsOf(urls[0]!) },
  });
  cluster.on("error", onError).on("node-error", onError).on("node-ready", onReady);
  connectUntilAnswered(() => cluster.connect(), retryMs, onError);
  return cluster;
}

function openSentinel(
  urls: readonly string[],
  nodeOptions: NodeOptions,
  options: RedisSettings,
  onError: (error: Error) => void,
  onReady: () => void,
): RedisSentinelType {
  const sentinel: RedisSentinelType = createSentinel({
    name: options.redisSentinelName!,
    sentinelRootNodes: urls.map(hostPortOf),
    nodeClientOptions: { ...nodeOptions, ...credentialsOf(urls[0]!) },
    sentinelClientOptions: { socket: nodeOptions.socket },
  });
  sentinel.on("error", onError).on("client-error", onError).on("ready", onReady);
  connectUntilAnswered(() => sentinel.connect(), options.redisReconnectMaxDelayMs, onError);
  return sentinel;
}

/** A cluster or Sentinel client whose first connection fails does not retry by itself: try again until it answers. */
function connectUntilAnswered(connect: () => Promise<unknown>, retryMs: number, onError: (error: Error) => void): void {
  connect().catch((error: Error) => {
    onError(error);
    setTimeout(() => connectUntilAnswered(connect, retryMs, onError), retryMs).unref();
  });
}

/** The user and password of a `redis://user:password@host:port` URL (none when absent). */
function credentialsOf(url: string): { username?: string; password?: string } {
  const parsed = new URL(url);
  return {
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
  };
}

function hostPortOf(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port || 26379) };
}

/**
 * True when Redis answers as configured: the server (or Sentinel's primary) answers PING; a
 * cluster says `cluster_state:ok` (every slot served) and every primary answers PING.
 */
export async function pingRedis(redis: RedisConnection, timeoutMs: number): Promise<boolean> {
  if (!redis.isReady) return false;
  try {
    if (!("masters" in redis)) return (await withinTimeout(redis.ping(), timeoutMs)) === "PONG";
    const cluster = redis;
    const checks = await withinTimeout(
      Promise.all([
        cluster
          .sendCommand<string>(undefined, true, ["CLUSTER", "INFO"])
          .then((info) => String(info).includes("cluster_state:ok")),
        ...cluster.masters.map(async (master) => (await cluster.nodeClient(master)).ping().then((r) => r === "PONG")),
      ]),
      timeoutMs,
    );
    return checks.every(Boolean);
  } catch {
    return false;
  }
}

export async function closeRedis(redis: RedisConnection): Promise<void> {
  // destroy() is synchronous on a client, asynchronous on a cluster or Sentinel: awaited either way.
  if (redis.isOpen) await redis.close().catch(async () => redis.destroy());
  else await Promise.resolve(redis.destroy());
}
