import { RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { Budget } from "../../domain/rate-limit/model.js";
import type { BudgetCounter, BudgetCounters } from "../../domain/rate-limit/ports.js";

/** The embedded default's budgets: in-process counters (one instance only). */
export function memoryBudgetCounters(keyPrefix: string): BudgetCounters {
  return (name, budget) => asBudgetCounter(new RateLimiterMemory(limiterOptions(keyPrefix, name, budget)));
}

export function limiterOptions(keyPrefix: string, name: string, budget: Budget) {
  return { keyPrefix: budgetKeyPrefix(keyPrefix, name), points: budget.points, duration: budget.durationSeconds };
}

/** Where a budget's counters live; rate-limiter-flexible stores the counter of `key` under `<this>:<key>`. */
export function budgetKeyPrefix(keyPrefix: string, name: string): string {
  return `${keyPrefix}ratelimit:token:${name}`;
}

/** A rate-limiter-flexible limiter (Redis or memory) as one budget's counter. */
export function asBudgetCounter(limiter: RateLimiterAbstract): BudgetCounter {
  return {
    async consume(key, points) {
      try {
        const res = await limiter.consume(key, points);
        const refund = async () => void (await limiter.reward(key, points));
        return { allowed: true, remaining: res.remainingPoints, msBeforeReset: res.msBeforeNext, refund };
      } catch (rejection) {
        // A RateLimiterRes rejection means "budget spent"; anything else is a failure of the store
        // and of its insurance, and must not turn into "unlimited".
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
        // rate-limiter-flexible counts a refused consume too: give it back, so a refusal takes
        // nothing (a refused attempt is not a failure, and a lockout's count stays the failures).
        await limiter.reward(key, points);
        return { allowed: false, remaining: 0, msBeforeReset: rejection.msBeforeNext, refund: async () => {} };
      }
    },
    async peek(key) {
      const res = await limiter.get(key);
      return { consumed: res?.consumedPoints ?? 0, msBeforeReset: res?.msBeforeNext ?? 0 };
    },
    async reset(key) {
      await limiter.delete(key);
    },
  };
}
