import type { RateLimits } from "./model.js";
import type { AdmissionStore, BudgetCounters } from "./ports.js";
import { TokenRateLimiter } from "./token-rate-limiter.js";

/** What the rate-limit area is built from: where budgets are counted (the shared state's names). */
export interface RateLimitAreaDeps {
  readonly budgetCounters: BudgetCounters;
  /** Redis: every budget of a request for a client this instance holds, in one round trip. */
  readonly admission: AdmissionStore | undefined;
}

/** The rate-limit area's settings groups: API users' budgets, and resource servers' (their own sizes). */
export interface RateLimitAreaConfig {
  readonly rateLimits: RateLimits;
  readonly resourceServerRateLimits: RateLimits;
}

/** The token endpoints' budgets: API users', and resource servers' (counted apart, under their own namespace). */
export function createRateLimitArea({ budgetCounters, admission }: RateLimitAreaDeps, config: RateLimitAreaConfig) {
  return {
    limiter: new TokenRateLimiter(config.rateLimits, budgetCounters, admission),
    resourceServerLimiter: new TokenRateLimiter(
      config.resourceServerRateLimits,
      budgetCounters,
      admission,
      "resource-server-",
    ),
  };
}
