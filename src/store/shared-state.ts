import type { Logger } from "../domain/shared/observability.js";
import type { AdmissionStore, BudgetCounters } from "../domain/rate-limit/ports.js";
import type { ReplayCache, ReplayCacheBirths } from "../domain/replay/ports.js";
import type { GenerationCache } from "../domain/tokens/ports.js";
import { memoryBudgetCounters } from "./memory/budget-counters.js";
import { MemoryGenerationCache } from "./memory/generation-cache.js";
import { redisBudgetCounters } from "./redis/budget-counters.js";
import { RedisGenerationCache } from "./redis/generation-cache.js";
import { RedisReplayCache } from "./redis/replay-cache.js";
import { RedisTokenAdmission } from "./redis/token-admission.js";
import { CircuitBreaker } from "./redis/circuit-breaker.js";
import { closeRedis, openRedis, pingRedis } from "./redis/redis-client.js";
import type { StorageConfig } from "./settings.js";

/**
 * The state instances share besides Postgres: Redis, or on the embedded default its explicit
 * in-process twins (one instance only). Token revocation and rate limiting build on this.
 */
export interface SharedState {
  readonly kind: "redis" | "memory";
  readonly generationCache: GenerationCache;
  readonly budgetCounters: BudgetCounters;
  /** Redis only: a token request's credential check and budgets in one round trip (the in-process twins need no trip). */
  readonly admission: AdmissionStore | undefined;
  /** Ids presented once only: in Redis, or on the embedded default the database's (options.replay.database). */
  readonly replayCache: ReplayCache;
  /**
   * "up", or "degraded" when Redis does not answer (or the breaker is open): the instance still
   * serves, reading credential states from Postgres and limiting rates in process.
   */
  status(): Promise<"up" | "degraded">;
  close(): Promise<void>;
}

export interface SharedStateOptions {
  readonly credentialCacheSeconds: number;
  /** Told every time a rate-limit decision falls back to the in-process insurance limiter. */
  readonly onRateLimitFallback: (error: unknown) => void;
  /** Told when the Redis circuit breaker opens (true) or closes (false). */
  readonly onBreakerChange?: (open: boolean) => void;
  readonly replay: {
    /** The database's replay cache: the one an instance without Redis uses. */
    readonly database: ReplayCache;
    /** Where a Redis replay cache records its first start (a flush cannot erase it). */
    readonly births: ReplayCacheBirths;
  };
}

/** Redis when the storage settings name one (REDIS_URL), else the in-process twins. */
export function openSharedState(storage: StorageConfig, options: SharedStateOptions, logger: Logger): SharedState {
  const keyPrefix = storage.redisKeyPrefix;
  if (!storage.redisUrl) {
    return {
      kind: "memory",
      generationCache: new MemoryGenerationCache(),
      budgetCounters: memoryBudgetCounters(keyPrefix),
      admission: undefined,
      replayCache: options.replay.database,
      status: async () => "up",
      close: async () => {},
    };
  }
  const redis = openRedis({ ...storage, redisUrl: storage.redisUrl }, logger);
  const commandTimeoutMs = storage.redisCommandTimeoutMs;
  const breaker = new CircuitBreaker({
    failureThreshold: storage.redisBreakerFailures,
    openMs: storage.redisBreakerOpenMs,
    onChange: (open) => {
      options.onBreakerChange?.(open);
      if (open)
        logger.warn({}, "redis circuit breaker open: Postgres answers credential checks, rate limits are per instance");
      else logger.info({}, "redis circuit breaker closed");
    },
  });
  return {
    kind: "redis",
    generationCache: new RedisGenerationCache(
      redis,
      keyPrefix,
      options.credentialCacheSeconds,
      breaker,
      commandTimeoutMs,
    ),
    budgetCounters: redisBudgetCounters(redis, keyPrefix, options.onRateLimitFallback, breaker, commandTimeoutMs),
    // One script over several slots: a cluster takes the step-by-step path (token-admission.ts).
    admission:
      storage.redisMode === "cluster"
        ? undefined
        : new RedisTokenAdmission(redis, keyPrefix, breaker, commandTimeoutMs),
    replayCache: new RedisReplayCache(redis, keyPrefix, breaker, commandTimeoutMs, options.replay.births, (namespace) =>
      logger.warn(
        { namespace },
        "replay cache found emptied (Redis flushed or restarted without its data): ids it could have seen are refused for the next 5 minutes",
      ),
    ),
    status: async () => (!breaker.tripped && (await pingRedis(redis, commandTimeoutMs)) ? "up" : "degraded"),
    close: () => closeRedis(redis),
  };
}
