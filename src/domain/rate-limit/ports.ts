import type { Budget, BudgetName } from "./model.js";

/** One budget's counters: Redis shared by every instance, or in-process memory on the embedded default. */
export interface BudgetCounter {
  /**
   * Takes `points`; `allowed` is false (and nothing more is taken) when the window's budget is
   * spent. `refund` gives the points back to the store that took them (Redis, or the in-process
   * fallback that answered instead), whatever has happened to Redis since.
   */
  consume(key: string, points: number): Promise<{ allowed: boolean; remaining: number; msBeforeReset: number; refund(): Promise<void> }>;
  /** Reads without consuming. */
  peek(key: string): Promise<{ consumed: number; msBeforeReset: number }>;
  /** Forgets the key's count. */
  reset(key: string): Promise<void>;
}

/** Makes the counter of one named budget. */
export type BudgetCounters = (name: BudgetName, budget: Budget) => BudgetCounter;
