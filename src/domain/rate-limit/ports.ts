import type { Budget, BudgetName } from "./model.js";

/** One budget's counters: Redis shared by every instance, or in-process memory on the embedded default. */
export interface BudgetCounter {
  /**
   * Takes `points`; `allowed` is false (and nothing more is taken) when the window's budget is
   * spent. `refund` gives the points back to the store that took them (Redis, or the in-process
   * fallback that answered instead), whatever has happened to Redis since.
   */
  consume(
    key: string,
    points: number,
  ): Promise<{ allowed: boolean; remaining: number; msBeforeReset: number; refund: () => Promise<void> }>;
  /** Reads without consuming. */
  peek(key: string): Promise<{ consumed: number; msBeforeReset: number }>;
  /** Forgets the key's count. */
  reset(key: string): Promise<void>;
}

/** Makes the counter of one named budget. */
export type BudgetCounters = (name: BudgetName, budget: Budget) => BudgetCounter;

/** A budget's counter as the admission store reads it. */
export interface BudgetReading {
  readonly consumed: number;
  readonly msBeforeReset: number;
}

/** One budget of an admission: which, under which key, with which limits. */
export interface AdmissionBudget {
  readonly name: BudgetName;
  readonly key: string;
  readonly budget: Budget;
}

/** Everything a token request asks of the shared store, for a client whose record this instance holds. */
export interface AdmissionRequest {
  readonly clientId: string;
  /** The generation of the held record: the store vouches for it only if it is still the current one… */
  readonly generation: number;
  /** …and only if the store has seen every change up to this number. */
  readonly knownChange: number;
  /** Whether the presented secret matched the held record (then the client budget is spent, else a failure point). */
  readonly authenticated: boolean;
  readonly budgets: {
    readonly address: AdmissionBudget;
    readonly failures: AdmissionBudget;
    readonly client: AdmissionBudget;
    /** Spent by a wrong secret while `failures` is spent; while it lasts, a right secret passes the spent `failures`. */
    readonly lockedGuesses: AdmissionBudget;
  };
}

/**
 * - stale: the store cannot vouch for the held record; nothing was spent.
 * - address-limited: the address budget is spent (nothing taken).
 * - locked-out: an address point was spent, the failure budget is spent, and either the secret was
 *   wrong (a locked-guess point was spent) or the locked-guess budget is spent too (not judged).
 * - refused: the secret was wrong; an address point and a failure point were spent.
 * - client-limited: authenticated, but the client's budget is spent (nothing taken from it).
 * - admitted: an address point and a client point were spent.
 * `other` is the failure budget (refused, locked-out) or the client budget (admitted, client-limited).
 */
export interface AdmissionResult {
  readonly kind: "stale" | "admitted" | "refused" | "address-limited" | "locked-out" | "client-limited";
  readonly address: BudgetReading;
  readonly other: BudgetReading | undefined;
}

/**
 * The token request's credential check and budgets in one atomic round trip (Redis). Returns
 * undefined when the store cannot answer; the caller then takes the step-by-step path, which has
 * its own fallbacks.
 */
export interface AdmissionStore {
  admit(request: AdmissionRequest): Promise<AdmissionResult | undefined>;
}
