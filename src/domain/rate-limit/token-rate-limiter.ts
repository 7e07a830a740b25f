import crypto from "node:crypto";
import {
  tighterOf,
  type Budget,
  type BudgetName,
  type BudgetNamespace,
  type Lockout,
  type RateLimitDecision,
  type RateLimits,
} from "./model.js";
import type { AdmissionStore, BudgetCounter, BudgetCounters, BudgetReading } from "./ports.js";

/** A failed-authentication point reserved for one attempt; released when the attempt succeeds. */
export interface AttemptReservation {
  /** Allowed: evaluate the secret. Refused: the answer for a wrong secret (and, unless `evaluate`, for any). */
  readonly decision: RateLimitDecision;
  /**
   * The (client, address) is locked out but the client's locked-guess budget lasts: the secret is
   * evaluated all the same, a right one passes and a wrong one gets `decision` (429).
   */
  readonly evaluate: boolean;
  /** Gives the point back: only failures count. */
  release(): Promise<void>;
}

/**
 * How many guesses a client's locked-out addresses may have evaluated in all, per failure window,
 * as a multiple of the failure limit (10 × 10 per 15 min by default): the bound on guessing once
 * the (client, address) lockouts no longer refuse a right secret.
 */
export const LOCKED_GUESSES_PER_FAILURE_POINT = 10;

/** A one-round-trip admission's outcome: `unknown` means take the step-by-step path (nothing was spent). */
export type HeldClientAdmission =
  | { readonly kind: "unknown" }
  | { readonly kind: "admitted" | "refused" | "limited" | "client-limited"; readonly decision: RateLimitDecision };

/**
 * Rate limiting of the OAuth token endpoints (POST /v2/auth/oauth2-token, the legacy
 * /get-auth-token and introspection), following RFC 6819 4.3.2 and OWASP's guidance that a
 * lockout must not become a weapon:
 * - a request budget per source address, spent by every request (a flood is slowed, whoever
 *   sends it), and one per client, spent only once the client has authenticated, so nobody
 *   without its secret can exhaust it;
 * - failed authentications counted per (client id, address) for a client that exists, so
 *   guessing a client's secret from one address never locks that client out elsewhere, and per
 *   address for client ids that do not exist, so guessing ids never locks out real clients, even
 *   behind the same NAT or load balancer;
 * - each attempt reserves its failure point atomically before the secret is checked and gives it
 *   back on success, so concurrent guesses can never overshoot the budget;
 * - a spent (client, address) failure budget refuses wrong secrets (429), not the right one: a
 *   stranger sharing the client's address (a NAT, or a balancer when TRUSTED_PROXIES is unset)
 *   cannot lock it out with ten wrong secrets. To keep guessing bounded, every attempt
 *   evaluated at a locked-out address spends a point of the client's locked-guess budget (all
 *   addresses together, LOCKED_GUESSES_PER_FAILURE_POINT × the failure limit per window), given
 *   back when the secret was right; once that is spent, locked-out addresses are refused unevaluated.
 *
 * Budgets are fixed windows: the first point consumed opens a window of `durationSeconds`;
 * calls refused inside it do not extend it.
 */
export class TokenRateLimiter {
  readonly #client: LimitedBudget;
  readonly #address: LimitedBudget;
  readonly #clientAtAddressFailures: LimitedBudget;
  readonly #unknownClientFailures: LimitedBudget;
  readonly #lockedGuesses: LimitedBudget;

  constructor(
    limits: RateLimits,
    counters: BudgetCounters,
    /** Redis: every budget of a request for a client this instance holds, in one round trip. */
    private readonly admission?: AdmissionStore,
    /** Whose budgets these are: a namespace keeps resource servers' counters apart from API users'. */
    namespace: BudgetNamespace = "",
  ) {
    const make = (name: BudgetName, budget: Budget): LimitedBudget => ({
      name,
      budget,
      counter: counters(name, budget),
    });
    this.#client = make(`${namespace}client`, limits.perClient);
    this.#address = make(`${namespace}address`, limits.perAddress);
    this.#clientAtAddressFailures = make(`${namespace}client-at-address-failures`, limits.failures);
    this.#unknownClientFailures = make(`${namespace}unknown-client-failures`, limits.failures);
    this.#lockedGuesses = make(`${namespace}client-locked-guesses`, {
      points: limits.failures.points * LOCKED_GUESSES_PER_FAILURE_POINT,
      durationSeconds: limits.failures.durationSeconds,
    });
  }

  get oneRoundTrip(): boolean {
    return this.admission !== undefined;
  }

  /** Called once per token request before anything else: one point of the source address's budget. */
  async consumeAddress(address: string): Promise<RateLimitDecision> {
    const state = await consume(this.#address, address);
    return state.allowed ? allowed(state) : denied([state]);
  }

  /** Called once the client has authenticated: one point of its own budget. */
  async consumeClient(clientId: string): Promise<RateLimitDecision> {
    const state = await consume(this.#client, clientKey(clientId));
    return state.allowed ? allowed(state) : denied([state]);
  }

  /**
   * Reserves the failure point of one authentication attempt before the secret is checked:
   * against (client id, address) when the client exists, against the address for unknown ids.
   * Refused when that budget is spent — the attempt is then not evaluated at all.
   */
  async reserveAttempt(clientId: string, clientExists: boolean, address: string): Promise<AttemptReservation> {
    const { budget, key } = this.#failureBudgetOf(clientExists ? clientId : undefined, address);
    const state = await consume(budget, key);
    // A refund that cannot reach its store leaves one point counted until the window ends: never an error for the caller.
    if (state.allowed)
      return { decision: allowed(state), evaluate: true, release: () => state.refund().catch(() => {}) };
    if (!clientExists) return { decision: denied([state]), evaluate: false, release: async () => {} };
    const guess = await consume(this.#lockedGuesses, clientKey(clientId));
    if (!guess.allowed) return { decision: denied([state, guess]), evaluate: false, release: async () => {} };
    return { decision: denied([state]), evaluate: true, release: () => guess.refund().catch(() => {}) };
  }

  /**
   * The same rules as consumeAddress → reserveAttempt → consumeClient, in one atomic call, for a
   * client whose record this instance holds (`authenticated`: the secret matched that record).
   * The store spends nothing unless the record's generation is still current and it has seen
   * every change up to `knownChange`; otherwise, or without a store, `unknown`.
   */
  async admitHeldClient(
    clientId: string,
    address: string,
    held: { readonly generation: number; readonly knownChange: number; readonly authenticated: boolean },
  ): Promise<HeldClientAdmission> {
    if (!this.admission) return { kind: "unknown" };
    const failures = this.#failureBudgetOf(clientId, address);
    const key = clientKey(clientId);
    const result = await this.admission.admit({
      clientId,
      ...held,
      budgets: {
        address: { name: this.#address.name, key: address, budget: this.#address.budget },
        failures: { name: failures.budget.name, key: failures.key, budget: failures.budget.budget },
        client: { name: this.#client.name, key, budget: this.#client.budget },
        lockedGuesses: { name: this.#lockedGuesses.name, key, budget: this.#lockedGuesses.budget },
      },
    });
    if (!result || result.kind === "stale") return { kind: "unknown" };
    const addressState = read(this.#address, result.address);
    switch (result.kind) {
      case "address-limited":
        return { kind: "limited", decision: denied([addressState]) };
      case "locked-out":
        return { kind: "limited", decision: denied([read(failures.budget, result.other!)]) };
      case "refused":
        return { kind: "refused", decision: allowed(addressState) };
      case "client-limited":
        return { kind: "client-limited", decision: denied([read(this.#client, result.other!)]) };
      case "admitted":
        return {
          kind: "admitted",
          decision: tighterOf(allowed(addressState), allowed(read(this.#client, result.other!))),
        };
    }
  }

  /** The operator's view of one lockout: a client at an address, or unknown client ids from an address. */
  async lockout(clientId: string | undefined, address: string): Promise<Lockout> {
    const { budget, key } = this.#failureBudgetOf(clientId, address);
    const { consumed, msBeforeReset } = await budget.counter.peek(key);
    return {
      failures: consumed,
      limit: budget.budget.points,
      lockedOut: consumed >= budget.budget.points,
      resetSeconds: wholeSeconds(msBeforeReset),
    };
  }

  async resetLockout(clientId: string | undefined, address: string): Promise<void> {
    const { budget, key } = this.#failureBudgetOf(clientId, address);
    await budget.counter.reset(key);
  }

  #failureBudgetOf(clientId: string | undefined, address: string): { budget: LimitedBudget; key: string } {
    return clientId === undefined
      ? { budget: this.#unknownClientFailures, key: address }
      : { budget: this.#clientAtAddressFailures, key: `${clientKey(clientId)}@${address}` };
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
  readonly refund: () => Promise<void>;
}

async function consume(of: LimitedBudget, key: string): Promise<BudgetState> {
  const { allowed, remaining, msBeforeReset, refund } = await of.counter.consume(key, 1);
  return { of, allowed, remaining: allowed ? remaining : 0, msBeforeReset, refund };
}

/** A counter read by the admission store, as the state of one budget. */
function read(of: LimitedBudget, reading: BudgetReading): BudgetState {
  const remaining = Math.max(0, of.budget.points - reading.consumed);
  return { of, allowed: true, remaining, msBeforeReset: reading.msBeforeReset, refund: async () => {} };
}

/** Client ids are client-supplied: only a digest of one goes into a key. */
function clientKey(clientId: string): string {
  return crypto.createHash("sha256").update(clientId, "utf8").digest("hex").slice(0, 32);
}

function wholeSeconds(ms: number): number {
  return ms > 0 ? Math.ceil(ms / 1000) : 0;
}

function allowed(state: BudgetState): RateLimitDecision {
  return {
    allowed: true,
    limit: state.of.budget.points,
    remaining: state.remaining,
    resetSeconds: wholeSeconds(state.msBeforeReset),
    windowSeconds: state.of.budget.durationSeconds,
    retryAfterSeconds: undefined,
    exhausted: undefined,
  };
}

/**
 * The refusal for the denying budget that frees up last (a retry before then would be refused
 * again); of budgets freeing up together, the last listed, which is the one that refused (the
 * locked-guess budget after the failures': windows begun in the same millisecond tie).
 */
function denied(states: readonly BudgetState[]): RateLimitDecision {
  const last = states.reduce((a, b) => (b.msBeforeReset >= a.msBeforeReset ? b : a));
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
