import assert from "node:assert/strict";
import { test } from "node:test";
import type { BudgetCounters } from "../../../src/domain/rate-limit/ports.js";
import { TokenRateLimiter } from "../../../src/domain/rate-limit/token-rate-limiter.js";

/**
 * Counters whose windows all end at the same moment: what an in-memory limiter reports when a
 * client's failures and its locked guesses began within the same millisecond (a fast machine).
 */
const sameWindowCounters: BudgetCounters = (_name, budget) => {
  const counts = new Map<string, number>();
  return {
    async consume(key, points) {
      const used = counts.get(key) ?? 0;
      const allowed = used + points <= budget.points;
      if (allowed) counts.set(key, used + points);
      const remaining = budget.points - (counts.get(key) ?? 0);
      return { allowed, remaining, msBeforeReset: budget.durationSeconds * 1000, refund: async () => {} };
    },
    async peek(key) {
      return { consumed: counts.get(key) ?? 0, msBeforeReset: budget.durationSeconds * 1000 };
    },
    async reset(key) {
      counts.delete(key);
    },
  };
};

test("a guess refused unevaluated names the locked-guess budget, even when its window ends with the failures' (it was flaky on a tie)", async () => {
  const limiter = new TokenRateLimiter(
    {
      perClient: { points: 1000, durationSeconds: 60 },
      perAddress: { points: 1000, durationSeconds: 60 },
      failures: { points: 1, durationSeconds: 900 },
    },
    sameWindowCounters,
  );
  assert.equal((await limiter.reserveAttempt("c1", true, "a")).evaluate, true, "the failure point");
  for (let i = 0; i < 10; i++) {
    const locked = await limiter.reserveAttempt("c1", true, "a");
    assert.equal(locked.decision.exhausted, "client-at-address-failures", `locked guess ${i + 1}: evaluated`);
    assert.equal(locked.evaluate, true);
  }
  const spent = await limiter.reserveAttempt("c1", true, "a");
  assert.equal(spent.evaluate, false);
  assert.equal(spent.decision.exhausted, "client-locked-guesses");
});
