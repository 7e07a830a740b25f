import type { Logger } from "./observability.js";

/** How long one cause's warning is held back after it was logged, by default. */
export const REPEATED_WARNING_INTERVAL_MS = 10_000;

/**
 * Warnings that one cause repeats for every request (a dependency down, a breaker open) logged
 * once per cause per interval: the first at once, the repeats counted, and the next one logged
 * after the interval carries `suppressed`, the count of those held back since the previous line.
 * One 834 ms event-loop stall opened the Redis breaker and logged 823 identical lines in 8 s, one
 * per request; the metrics count every occurrence, the log says that it happens and how often.
 */
export class RepeatedWarnings {
  readonly #causes = new Map<string, { loggedAt: number; suppressed: number }>();

  constructor(
    private readonly intervalMs = REPEATED_WARNING_INTERVAL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Logs `message` at warn unless `cause` was logged less than the interval ago (then counts it). */
  warn(logger: Logger, cause: string, object: object, message: string): void {
    const at = this.now();
    const seen = this.#causes.get(cause);
    if (seen && at - seen.loggedAt < this.intervalMs) {
      seen.suppressed++;
      return;
    }
    logger.warn(seen && seen.suppressed > 0 ? { ...object, suppressed: seen.suppressed } : object, message);
    this.#causes.set(cause, { loggedAt: at, suppressed: 0 });
    // Causes are few (an operation and an error message), but an error message may carry a varying
    // detail: forget the quiet ones rather than grow without bound.
    if (this.#causes.size > 100)
      for (const [key, entry] of this.#causes) if (at - entry.loggedAt >= this.intervalMs) this.#causes.delete(key);
  }
}
