import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { BudgetCounter, BudgetCounters } from "../../domain/rate-limit/ports.js";
import { asBudgetCounter, limiterOptions } from "../memory/budget-counters.js";
import type { CircuitBreaker } from "./circuit-breaker.js";
import { withinTimeout } from "./command-timeout.js";
import type { RedisConnection } from "./redis-client.js";
import { redisSpan } from "./redis-spans.js";

/**
 * Budgets shared by every instance, in Redis (rate-limiter-flexible's atomic counters). While
 * Redis fails, each budget falls back to an in-process insurance limiter — a per-instance limit,
 * never "unlimited" — and `onFallback` is told every time (count it in a metric). Failures feed
 * the circuit breaker; while it is open the insurance answers at once, without waiting on Redis.
 */
export function redisBudgetCounters(
  redis: RedisConnection,
  keyPrefix: string,
  onFallback: (error: unknown) => void,
  breaker: CircuitBreaker,
  commandTimeoutMs: number,
): BudgetCounters {
  return (name, budget) => {
    const options = limiterOptions(keyPrefix, name, budget);
    let redisLimiter: ObservedRedisLimiter | undefined;
    let fallbacks = 0;
    const insurance = new ObservedInsuranceLimiter(options, () => {
      fallbacks++;
      const cause = redisLimiter?.lastStoreError;
      onFallback(cause ?? new Error(`Redis rate limit store failed; in-memory limit applied to ${name}`));
    });
    redisLimiter = new ObservedRedisLimiter({
      ...options,
      storeClient: redis,
      // node-redis 4+ API (eval with { keys, arguments }); without it every call fails. Each call
      // names one key, so a cluster routes it to that key's slot (its MULTI by the first key).
      useRedisPackage: true,
      insuranceLimiter: insurance,
    });
    const viaRedis = asBudgetCounter(redisLimiter as RateLimiterAbstract);
    const viaInsurance = asBudgetCounter(insurance);
    /**
     * Redis unless the breaker is open; a call the insurance had to answer, or one Redis did not
     * answer in time (then the insurance answers it), counts as a failure.
     */
    const guarded =
      <A extends unknown[], R>(command: string, call: (counter: BudgetCounter, ...args: A) => Promise<R>) =>
      async (...args: A): Promise<R> => {
        if (breaker.isOpen) return call(viaInsurance, ...args);
        const before = fallbacks;
        let result: R;
        try {
          result = await redisSpan(command, withinTimeout(call(viaRedis, ...args), commandTimeoutMs), "rate-limit");
        } catch (error) {
          breaker.failure();
          onFallback(error);
          return call(viaInsurance, ...args);
        }
        if (fallbacks === before) breaker.success();
        else breaker.failure();
        return result;
      };
    return {
      consume: guarded("EVAL", async (counter, key: string, points: number) => {
        const taken = await counter.consume(key, points);
        if (counter !== viaRedis) return taken;
        // A refund to Redis is sent without waiting: a stalled Redis applies it when it resumes
        // (the command is already on the connection), instead of a timeout losing it and leaving a
        // failure point that was never a failure.
        return { ...taken, refund: async () => void taken.refund().catch(() => {}) };
      }),
      peek: guarded("MULTI", (counter, key: string) => counter.peek(key)),
      reset: guarded("DEL", (counter, key: string) => counter.reset(key)),
    };
  };
}

type LimiterOptions = ConstructorParameters<typeof RateLimiterMemory>[0];
type LimiterCallOptions = { [key: string]: unknown };

/**
 * The insurance limiter of a Redis budget. rate-limiter-flexible calls the insurance limiter (through
 * its public methods) only after a Redis command failed, and says so nowhere else; this subclass
 * reports every call it serves.
 */
class ObservedInsuranceLimiter extends RateLimiterMemory {
  readonly #served: () => void;

  constructor(options: LimiterOptions, served: () => void) {
    super(options);
    this.#served = served;
  }

  override consume(key: string | number, points?: number, options?: LimiterCallOptions): Promise<RateLimiterRes> {
    this.#served();
    return super.consume(key, points, options);
  }

  override penalty(key: string | number, points?: number, options?: LimiterCallOptions): Promise<RateLimiterRes> {
    this.#served();
    return super.penalty(key, points, options);
  }

  override reward(key: string | number, points?: number, options?: LimiterCallOptions): Promise<RateLimiterRes> {
    this.#served();
    return super.reward(key, points, options);
  }

  override get(key: string | number, options?: LimiterCallOptions): Promise<RateLimiterRes | null> {
    this.#served();
    return super.get(key, options);
  }

  override set(
    key: string | number,
    points: number,
    secDuration: number,
    options?: LimiterCallOptions,
  ): Promise<RateLimiterRes> {
    this.#served();
    return super.set(key, points, secDuration, options);
  }

  override block(key: string | number, secDuration: number, options?: LimiterCallOptions): Promise<RateLimiterRes> {
    this.#served();
    return super.block(key, secDuration, options);
  }

  override delete(key: string | number, options?: LimiterCallOptions): Promise<boolean> {
    this.#served();
    return super.delete(key, options);
  }
}

type ErrorHandler = (error: unknown, ...rest: unknown[]) => unknown;

/**
 * The Redis limiter of a budget, remembering the last store error so onFallback can report the
 * cause. rate-limiter-flexible 11.x passes every failure through `_handleError` right before it
 * asks the insurance limiter; should that internal method ever be renamed, only the cause is lost
 * (onFallback then gets a generic error), not the detection, which rests on the insurance limiter.
 */
class ObservedRedisLimiter extends RateLimiterRedis {
  lastStoreError: unknown = undefined;

  _handleError(error: unknown, ...rest: unknown[]): unknown {
    if (!(error instanceof RateLimiterRes)) this.lastStoreError = error;
    const base = (RateLimiterRedis.prototype as unknown as { _handleError: ErrorHandler })._handleError;
    return base.call(this, error, ...rest);
  }
}
