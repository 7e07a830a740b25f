import type { Budget, BudgetName } from "./model.js";

/** One budget's counters: Redis shared by every instance, or in-process memory on the embedded default. */
export interface BudgetCounter {
  /** Takes `points`; `allowed` is false (and nothing more is taken) when the window's budget is spent. */
  consume(key: string, points: number): Promise<{ allowed: boolean; remaining: number; msBeforeReset: number }>;
  /** Reads without consuming. */
  peek(key: string): Promise<{ consumed: number; msBeforeReset: number }>;
  /** Gives back points taken by `consume`. */
  refund(key: string, points: number): Promise<void>;
  /** Forgets the key's count. */
  reset(key: string): Promise<void>;
}

/** Makes the counter of one named budget. */
export type BudgetCounters = (name: BudgetName, budget: Budget) => BudgetCounter;
