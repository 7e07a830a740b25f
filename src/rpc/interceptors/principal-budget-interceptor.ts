import type { Interceptor } from "@connectrpc/connect";
import { admitted, type Admission } from "../../domain/shared/admission.js";
import type { Budget } from "../../domain/rate-limit/model.js";
import { DomainError } from "../../errors/domain-error.js";
import { principalKey, scimClientKey } from "./authentication-interceptor.js";

/** Per principal (the API user behind an access token, or a SCIM client) and per instance (RPC_RATE_LIMIT_PER_PRINCIPAL). */
export interface PrincipalBudgetConfig {
  /** RPCs of one principal per fixed window (in process, per instance): beyond it 429 TOO_MANY_REQUESTS. */
  readonly rate: Budget;
}

export interface PrincipalBudget extends PrincipalBudgetConfig {
  /** The instance's fair-share admission (the same one the token endpoints use). */
  readonly admission?: Admission;
  /** Milliseconds clock (tests move it). */
  readonly now?: () => number;
}

/**
 * Every RPC that a bearer credential authenticated (an access token's API user, a SCIM client),
 * after authentication, on every face alike (the REST gateway calls through this same chain):
 * - at most `rate.points` per `rate.durationSeconds` per principal (a fixed window); beyond that
 *   429 TOO_MANY_REQUESTS with Retry-After until the window ends;
 * - then admitted by its TMC's share of the instance (FairAdmission): one company admin's thirty
 *   calls once held every pooled connection, and ten API users of one TMC did the same, so the share is the TMC's, whichever of its principals calls.
 * Both are in process, so the hot path gains no Redis round trip; a TMC spread over N instances
 * gets N times its share. The token endpoints admit their own work (TokenEndpoint); the
 * operator's surface is not budgeted.
 */
export function principalBudgetInterceptor(budget: PrincipalBudget): Interceptor {
  const now = budget.now ?? Date.now;
  const windows = new FixedWindows(budget.rate.points, budget.rate.durationSeconds * 1000, now);
  return (next) => async (req) => {
    const caller = req.contextValues.get(principalKey) ?? req.contextValues.get(scimClientKey);
    if (caller === undefined) return next(req);
    const retryAfterSeconds = windows.take(caller.clientId);
    if (retryAfterSeconds !== undefined) {
      throw new DomainError("TOO_MANY_REQUESTS", "Rate limit exceeded; retry later with exponential backoff", {
        params: [{ name: "retryAfterSeconds", value: String(retryAfterSeconds) }],
        retryAfterSeconds,
      });
    }
    return admitted(budget.admission, { kind: "tmc", id: caller.tmcId }, () => next(req), req.signal);
  };
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
