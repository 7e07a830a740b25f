/**
 * Stops waiting on a dependency that keeps failing: after `failureThreshold` failures in a row
 * the breaker opens and callers take their fallback at once for `openMs`; then one trial call
 * goes through (half-open), and its outcome closes or reopens the breaker.
 */
export class CircuitBreaker {
  private consecutiveFailures = 0;
  private openUntil = 0;
  private trialInFlight = false;

  constructor(
    private readonly options: {
      readonly failureThreshold: number;
      readonly openMs: number;
      readonly onChange?: (open: boolean) => void;
    },
    private readonly now: () => number = Date.now,
  ) {}

  /** True while callers should not try the dependency (and no trial is due). */
  get isOpen(): boolean {
    if (this.openUntil === 0) return false;
    if (this.now() < this.openUntil) return true;
    // Half-open: let exactly one trial through.
    if (this.trialInFlight) return true;
    this.trialInFlight = true;
    return false;
  }

  /** True from the first failure past the threshold until a success. */
  get tripped(): boolean {
    return this.openUntil !== 0;
  }

  success(): void {
    this.trialInFlight = false;
    this.consecutiveFailures = 0;
    if (this.openUntil !== 0) {
      this.openUntil = 0;
      this.options.onChange?.(false);
    }
  }

  failure(): void {
    this.trialInFlight = false;
    this.consecutiveFailures++;
    if (this.consecutiveFailures >= this.options.failureThreshold) {
      const wasClosed = this.openUntil === 0;
      this.openUntil = this.now() + this.options.openMs;
      if (wasClosed) this.options.onChange?.(true);
    }
  }

  /** Runs `call` through the breaker; throws BreakerOpen without calling when open. */
  async run<T>(call: () => Promise<T>): Promise<T> {
    if (this.isOpen) throw new BreakerOpen();
    try {
      const result = await call();
      this.success();
      return result;
    } catch (error) {
      this.failure();
      throw error;
    }
  }
}

export class BreakerOpen extends Error {
  constructor() {
    super("Redis is not answering; the circuit breaker is open");
    this.name = "BreakerOpen";
  }
}
