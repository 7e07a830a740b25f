/**
 * An adaptive limit of how many calls one instance runs at once, in the manner of Netflix's
 * concurrency-limits `Gradient2Limit` (Envoy's adaptive concurrency filter is the same idea): the
 * limit follows the ratio of a long-term latency to the latest latency. While latency holds, it
 * grows by a small queue allowance; when latency grows past `tolerance` × its long-term value, it
 * is cut (at most by half a sample, smoothed), so load is shed before latency runs away. It does
 * not grow while the instance uses less than half of it (nothing was learnt about a higher limit).
 *
 * No npm package offers this for Node (concurrency-limits is Java; `@fastify/under-pressure`
 * sheds on event-loop delay or heap for the whole process, not by concurrency or by party), so it
 * is written here: the arithmetic of Gradient2 with its defaults.
 */
export interface AdaptiveLimitOptions {
  readonly initial: number;
  readonly min: number;
  readonly max: number;
  /** Latency growth tolerated before the limit is cut (Gradient2's default 1.5). */
  readonly tolerance?: number;
  /** Samples the long-term latency averages over (Gradient2's 600). */
  readonly longWindow?: number;
  /** Samples the short-term latency averages over (Gradient2 takes one window of samples; 10 here). */
  readonly shortWindow?: number;
}

export class AdaptiveLimit {
  #limit: number;
  #longRtt = 0;
  #shortRtt = 0;
  #samples = 0;
  readonly #tolerance: number;
  readonly #longWindow: number;
  readonly #shortWindow: number;

  constructor(private readonly options: AdaptiveLimitOptions) {
    this.#limit = options.initial;
    this.#tolerance = options.tolerance ?? 1.5;
    this.#longWindow = options.longWindow ?? 600;
    this.#shortWindow = options.shortWindow ?? 10;
  }

  /** The current limit (whole calls). */
  get current(): number {
    return Math.floor(this.#limit);
  }

  /** One completed call: how long it ran and how many calls were running when it started. */
  sample(rttMs: number, inFlight: number): void {
    const rtt = Math.max(rttMs, 0.01);
    this.#samples++;
    this.#shortRtt = ema(this.#shortRtt, rtt, Math.min(this.#samples, this.#shortWindow));
    this.#longRtt = ema(this.#longRtt, rtt, Math.min(this.#samples, this.#longWindow));
    // After a burst of slow calls, the long-term latency comes back down faster than its average would.
    if (this.#longRtt / this.#shortRtt > 2) this.#longRtt *= 0.95;
    const { min, max } = this.options;
    // Application-limited: using less than half the limit teaches nothing about raising it.
    if (inFlight < this.#limit / 2 && this.#shortRtt <= this.#longRtt * this.#tolerance) return;
    const gradient = Math.max(0.5, Math.min(1, (this.#tolerance * this.#longRtt) / this.#shortRtt));
    const queueAllowance = Math.sqrt(this.#limit);
    const next = this.#limit * gradient + queueAllowance;
    this.#limit = Math.min(max, Math.max(min, this.#limit * 0.8 + next * 0.2));
  }
}

/** An exponential moving average over about `window` samples (the first samples average plainly). */
function ema(previous: number, value: number, window: number): number {
  return previous + (value - previous) / window;
}
