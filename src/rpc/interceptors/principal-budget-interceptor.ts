import type { Interceptor } from "@connectrpc/connect";
import type { Budget } from "../../domain/rate-limit/model.js";
import { DomainError } from "../../errors/domain-error.js";
import { principalKey, scimClientKey } from "./authentication-interceptor.js";

/**
 * Per principal (the API user behind an access token, or a SCIM client) and per instance, on
 * every RPC that takes a bearer credential (RPC_*_PER_PRINCIPAL: src/config/config.ts reads them).
 */
export interface PrincipalBudgetConfig {
  /** RPCs of one principal running at once; further ones wait in memory, holding no connection. */
  readonly concurrency: number;
  /** RPCs of one principal waiting for a running slot; beyond it: 429 TOO_MANY_CONCURRENT_REQUESTS. */
  readonly queue: number;
  /** RPCs of one principal per fixed window (in process, per instance): beyond it 429 TOO_MANY_REQUESTS. */
  readonly rate: Budget;
}

export interface PrincipalBudget extends PrincipalBudgetConfig {
  /** Longest wait in the queue (below the request deadline, so the caller hears 429 rather than 504). */
  readonly maxQueueWaitMs: number;
  /** Milliseconds clock (tests move it). */
  readonly now?: () => number;
}

/**
 * Issue 18, finding 2: thirty concurrent calls of one company admin, each waiting on a row lock,
 * held every pooled connection of the instance, and other tenants' reads got 503. Every RPC that
 * a bearer credential authenticated (an access token's API user, a SCIM client) is therefore
 * budgeted per principal and per instance, after authentication, on every face alike (the REST
 * gateway calls through this same chain):
 * - at most `concurrency` run at once; up to `queue` more wait here, in memory, holding no
 *   database connection; beyond that 429 TOO_MANY_CONCURRENT_REQUESTS with Retry-After: 1;
 * - at most `rate.points` per `rate.durationSeconds` (a fixed window); beyond that 429
 *   TOO_MANY_REQUESTS with Retry-After until the window ends.
 * Both are in process, so the hot path gains no Redis round trip; a principal spread over N
 * instances gets N times the budget. The token endpoints have their own limiter (Redis, per
 * client and address); the operator's surface is not budgeted.
 */
export function principalBudgetInterceptor(budget: PrincipalBudget): Interceptor {
  const now = budget.now ?? Date.now;
  const slots = new PrincipalSlots(budget.concurrency, budget.queue);
  const windows = new FixedWindows(budget.rate.points, budget.rate.durationSeconds * 1000, now);
  return (next) => async (req) => {
    const principal = req.contextValues.get(principalKey)?.clientId ?? req.contextValues.get(scimClientKey)?.clientId;
    if (principal === undefined) return next(req);
    const retryAfterSeconds = windows.take(principal);
    if (retryAfterSeconds !== undefined) {
      throw new DomainError("TOO_MANY_REQUESTS", "Rate limit exceeded; retry later with exponential backoff", {
        params: [{ name: "retryAfterSeconds", value: String(retryAfterSeconds) }],
        retryAfterSeconds,
      });
    }
    const release = await slots.acquire(principal, req.signal, budget.maxQueueWaitMs);
    try {
      return await next(req);
    } finally {
      release();
    }
  };
}

const busy = () =>
  new DomainError("TOO_MANY_CONCURRENT_REQUESTS", "Too many requests of this caller are in progress; retry shortly", {
    params: [{ name: "retryAfterSeconds", value: "1" }],
    retryAfterSeconds: 1,
  });

interface Waiter {
  readonly grant: () => void;
}

/** A counting semaphore per principal with a bounded wait list; entries vanish when idle. */
class PrincipalSlots {
  readonly #byPrincipal = new Map<string, { running: number; waiting: Waiter[] }>();

  constructor(
    private readonly concurrency: number,
    private readonly queue: number,
  ) {}

  async acquire(principal: string, signal: AbortSignal, maxWaitMs: number): Promise<() => void> {
    let entry = this.#byPrincipal.get(principal);
    if (!entry) this.#byPrincipal.set(principal, (entry = { running: 0, waiting: [] }));
    const state = entry;
    const release = once(() => this.#release(principal, state));
    if (state.running < this.concurrency) {
      state.running++;
      return release;
    }
    if (state.waiting.length >= this.queue) throw busy();
    await new Promise<void>((resolve, reject) => {
      const giveUp = (error: unknown) => {
        const at = state.waiting.indexOf(waiter);
        if (at < 0) return;
        state.waiting.splice(at, 1);
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        // An aborted call rejects with the signal's own reason, whatever its caller aborted with.
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
        reject(error);
      };
      const onAbort = () => giveUp(signal.reason ?? busy());
      const waiter: Waiter = {
        grant: () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const timer = setTimeout(() => giveUp(busy()), maxWaitMs);
      signal.addEventListener("abort", onAbort, { once: true });
      state.waiting.push(waiter);
    });
    return release;
  }

  #release(principal: string, state: { running: number; waiting: Waiter[] }): void {
    // The slot passes to the first waiter as it is: `running` stays the same.
    const next = state.waiting.shift();
    if (next) return next.grant();
    state.running--;
    if (state.running === 0) this.#byPrincipal.delete(principal);
  }
}

/** `points` per window of `windowMs` per principal; expired windows are swept once a window. */
class FixedWindows {
  readonly #byPrincipal = new Map<string, { startedAt: number; used: number }>();
  #sweptAt: number;

  constructor(
    private readonly points: number,
    private readonly windowMs: number,
    private readonly now: () => number,
  ) {
    this.#sweptAt = now();
  }

  /** Takes a point; undefined when allowed, else the whole seconds until the window ends (at least 1). */
  take(principal: string): number | undefined {
    const now = this.now();
    if (now - this.#sweptAt >= this.windowMs) this.#sweep(now);
    let window = this.#byPrincipal.get(principal);
    if (!window || now - window.startedAt >= this.windowMs)
      this.#byPrincipal.set(principal, (window = { startedAt: now, used: 0 }));
    if (window.used >= this.points) return Math.max(1, Math.ceil((window.startedAt + this.windowMs - now) / 1000));
    window.used++;
    return undefined;
  }

  #sweep(now: number): void {
    this.#sweptAt = now;
    for (const [principal, window] of this.#byPrincipal)
      if (now - window.startedAt >= this.windowMs) this.#byPrincipal.delete(principal);
  }
}

function once(action: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    action();
  };
}
