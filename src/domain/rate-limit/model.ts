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
  /** Failed client authentications, counted per client_id and per address. */
  readonly failures: Budget;
}

export type BudgetName = "client" | "address" | "client-failures" | "address-failures";

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
