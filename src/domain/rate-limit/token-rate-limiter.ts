import crypto from "node:crypto";
import type { Budget, BudgetName, RateLimitDecision, RateLimits } from "./model.js";
import type { BudgetCounter, BudgetCounters } from "./ports.js";

/**
 * Rate limiting of the OAuth token endpoints (POST /v2/auth/oauth2-token, the legacy
 * /get-auth-token and introspection): a budget per client_id, one per source address, and a
 * budget of failed client authentications per client_id and per address that, once spent,
 * refuses further token requests until its window ends.
 *
 * Budgets are fixed windows: the first point consumed opens a window of `durationSeconds`;
 * calls refused inside it do not extend it.
 */
export class TokenRateLimiter {
  readonly #client: LimitedBudget;
  readonly #address: LimitedBudget;
  readonly #clientFailures: LimitedBudget;
  readonly #addressFailures: LimitedBudget;

  constructor(limits: RateLimits, counters: BudgetCounters) {
    const make = (name: BudgetName, budget: Budget): LimitedBudget => ({ name, budget, counter: counters(name, budget) });
    this.#client = make("client", limits.perClient);
    this.#address = make("address", limits.perAddress);
    this.#clientFailures = make("client-failures", limits.failures);
    this.#addressFailures = make("address-failures", limits.failures);
  }

  /**
   * Called once per token request before authentication. Refuses without consuming anything when
   * the failure budget of the client id or the address is spent; otherwise consumes one point of
   * the per-client (when clientId is known) and per-address budgets and refuses when either is
   * empty.
   */
  async consume(clientId: string | undefined, address: string): Promise<RateLimitDecision> {
    const key = clientId === undefined ? undefined : clientKey(clientId);

    const failureChecks = [check(this.#addressFailures, address)];
    if (key !== undefined) failureChecks.unshift(check(this.#clientFailures, key));
    const failures = await Promise.all(failureChecks);
    const lockedOut = failures.filter((state) => !state.allowed);
    if (lockedOut.length > 0) return denied(lockedOut);

    const consumptions = [consume(this.#address, address)];
    if (key !== undefined) consumptions.unshift(consume(this.#client, key));
    const states = await Promise.all(consumptions);
    const refused = states.filter((state) => !state.allowed);
    if (refused.length > 0) return denied(refused);

    // The budget closest to running out; on a tie, the one that takes longest to reset.
    const tightest = states.reduce((a, b) =>
      b.remaining < a.remaining || (b.remaining === a.remaining && b.msBeforeReset > a.msBeforeReset) ? b : a,
    );
    return {
      allowed: true,
      limit: tightest.of.budget.points,
      remaining: tightest.remaining,
      resetSeconds: wholeSeconds(tightest.msBeforeReset),
      windowSeconds: tightest.of.budget.durationSeconds,
      retryAfterSeconds: undefined,
      exhausted: undefined,
    };
  }

  /** Called after a failed client authentication: one point off the failure budgets of the client id (known or not) and the address. */
  async recordFailure(clientId: string | undefined, address: string): Promise<void> {
    const penalties = [this.#addressFailures.counter.penalize(address, 1)];
    if (clientId !== undefined) penalties.push(this.#clientFailures.counter.penalize(clientKey(clientId), 1));
    await Promise.all(penalties);
  }
}

interface LimitedBudget {
  readonly name: BudgetName;
  readonly budget: Budget;
  readonly counter: BudgetCounter;
}

/** Outcome of one budget for one call. */
interface BudgetState {
  readonly of: LimitedBudget;
  readonly allowed: boolean;
  readonly remaining: number;
  readonly msBeforeReset: number;
}

/** Reads a failure budget without consuming it. */
async function check(of: LimitedBudget, key: string): Promise<BudgetState> {
  const { consumed, msBeforeReset } = await of.counter.peek(key);
  return { of, allowed: consumed < of.budget.points, remaining: Math.max(of.budget.points - consumed, 0), msBeforeReset };
}

async function consume(of: LimitedBudget, key: string): Promise<BudgetState> {
  const { allowed, remaining, msBeforeReset } = await of.counter.consume(key, 1);
  return { of, allowed, remaining: allowed ? remaining : 0, msBeforeReset };
}

/** Client ids are client-supplied: only a digest of one goes into a key. */
function clientKey(clientId: string): string {
  return crypto.createHash("sha256").update(clientId, "utf8").digest("hex").slice(0, 32);
}

function wholeSeconds(ms: number): number {
  return ms > 0 ? Math.ceil(ms / 1000) : 0;
}

/** The refusal for the denying budget that frees up last (a retry before then would be refused again). */
function denied(states: readonly BudgetState[]): RateLimitDecision {
  const last = states.reduce((a, b) => (b.msBeforeReset > a.msBeforeReset ? b : a));
  const retryAfterSeconds = Math.max(1, wholeSeconds(last.msBeforeReset));
  return {
    allowed: false,
    limit: last.of.budget.points,
    remaining: 0,
    resetSeconds: retryAfterSeconds,
    windowSeconds: last.of.budget.durationSeconds,
    retryAfterSeconds,
    exhausted: last.of.name,
  };
}
