import { DomainError } from "../../errors/domain-error.js";

/** The refusal of a decision that spent a budget (a second when it names none); the edge adds Retry-After. */
export const tooManyRequests = (decision: Pick<RateLimitDecision, "retryAfterSeconds">) =>
  new DomainError("TOO_MANY_REQUESTS", "Rate limit exceeded; retry later with exponential backoff", {
    params: [{ name: "retryAfterSeconds", value: String(decision.retryAfterSeconds ?? 1) }],
  });

/** A fixed window: `points` requests per `durationSeconds`. */
export interface Budget {
  readonly points: number;
  readonly durationSeconds: number;
}

export interface RateLimits {
  /** Token requests per client_id. */
  readonly perClient: Budget;
  /** Token requests per source address (across clients, e.g. one host guessing client ids). */
  readonly perAddress: Budget;
  /**
   * Failed client authentications: per (client id, address) for a client that exists, and per
   * address for client ids that do not.
   */
  readonly failures: Budget;
}

/** The budgets of the token endpoints; resource servers' are the same five, counted apart (their own sizes). */
export type BudgetName = `${BudgetNamespace}${
  "client" | "address" | "client-at-address-failures" | "unknown-client-failures" | "client-locked-guesses"}`;

/** Whose budgets: API users' (none), or resource servers' at introspection. */
export type BudgetNamespace = "" | "resource-server-";

export interface RateLimitDecision {
  readonly allowed: boolean;
  /** The tightest budget that applied: its limit, remaining points and seconds until it resets. */
  readonly limit: number;
  readonly remaining: number;
  readonly resetSeconds: number;
  /** The budget's window in seconds (RateLimit-Policy w=). */
  readonly windowSeconds: number;
  /** Whole seconds (rounded up, >= 1) when not allowed. */
  readonly retryAfterSeconds: number | undefined;
  /** Which budget denied. */
  readonly exhausted: BudgetName | undefined;
}

/** The decision to report of two budgets that both applied: a refusal, else the one closest to running out. */
export function tighterOf(a: RateLimitDecision, b: RateLimitDecision): RateLimitDecision {
  if (!a.allowed || !b.allowed) return a.allowed ? b : a;
  return b.remaining < a.remaining || (b.remaining === a.remaining && b.resetSeconds > a.resetSeconds) ? b : a;
}

/** The failed-authentication count behind a lockout, as the operator sees it. */
export interface Lockout {
  readonly failures: number;
  readonly limit: number;
  readonly lockedOut: boolean;
  /** Seconds until the window resets (0 when nothing is counted). */
  readonly resetSeconds: number;
}
