import type { Logger } from "../domain/shared/observability.js";
import type { BudgetCounters } from "../domain/rate-limit/ports.js";
import type { GenerationCache } from "../domain/tokens/ports.js";
import { memoryBudgetCounters } from "./memory/budget-counters.js";
import { MemoryGenerationCache } from "./memory/generation-cache.js";
import { redisBudgetCounters } from "./redis/budget-counters.js";
import { RedisGenerationCache } from "./redis/generation-cache.js";
import { closeRedis, openRedis, pingRedis, type RedisOptions } from "./redis/redis-client.js";

/**
 * The state instances share besides Postgres: Redis, or on the embedded default its explicit
 * in-process twins (one instance only). Token revocation and rate limiting build on this.
 */
export interface SharedState {
  readonly kind: "redis" | "memory";
  readonly generationCache: GenerationCache;
  readonly budgetCounters: BudgetCounters;
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

export interface SharedStateOptions {
  /** Absent: the in-process twins. */
  readonly redis: RedisOptions | undefined;
  readonly keyPrefix: string;
  readonly credentialCacheSeconds: number;
  /** Told every time a rate-limit decision falls back to the in-process insurance limiter. */
  readonly onRateLimitFallback: (error: unknown) => void;
}

export function openSharedState(options: SharedStateOptions, logger: Logger): SharedState {
  if (!options.redis) {
    return {
      kind: "memory",
      generationCache: new MemoryGenerationCache(),
      budgetCounters: memoryBudgetCounters(options.keyPrefix),
      ping: async () => true,
      close: async () => {},
    };
  }
  const redis = openRedis(options.redis, logger);
  return {
    kind: "redis",
    generationCache: new RedisGenerationCache(redis, options.keyPrefix, options.credentialCacheSeconds),
    budgetCounters: redisBudgetCounters(redis, options.keyPrefix, options.onRateLimitFallback),
    ping: () => pingRedis(redis),
    close: () => closeRedis(redis),
  };
}
