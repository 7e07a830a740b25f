import crypto from "node:crypto";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { RedisClientType } from "redis";
import { ConfigError } from "../../config/config.js";

/**
 * Rate limiting of the OAuth token endpoints (POST /v2/auth/oauth2-token and the legacy
 * /get-auth-token): a budget per client_id, one per source address, and a budget of failed
 * client authentications per client_id and per address that, once spent, refuses further token
 * requests until its window ends.
 *
 * Budgets are fixed windows (rate-limiter-flexible's counters): the first point consumed opens a
 * window of `durationSeconds`; calls refused inside it do not extend it.
 */

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

export const DEFAULT_RATE_LIMITS: RateLimits = Object.freeze({
  perClient: Object.freeze({ points: 60, durationSeconds: 60 }),
  perAddress: Object.freeze({ points: 300, durationSeconds: 60 }),
  failures: Object.freeze({ points: 10, durationSeconds: 900 }),
});

const MAX_POINTS = 1_000_000;
const MAX_SECONDS = 86_400;

function budgetFrom(env: NodeJS.ProcessEnv, name: string, fallback: Budget): Budget {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const match = /^\s*(\d+)\s*\/\s*(\d+)\s*$/.exec(raw);
  const points = match ? Number(match[1]) : NaN;
  const durationSeconds = match ? Number(match[2]) : NaN;
  if (!(points >= 1 && points <= MAX_POINTS && durationSeconds >= 1 && durationSeconds <= MAX_SECONDS)) {
    throw new ConfigError(
      `${name} must be "<points>/<seconds>" with points 1..${MAX_POINTS} and seconds 1..${MAX_SECONDS} ` +
        `(e.g. "${fallback.points}/${fallback.durationSeconds}"), got "${raw}"`,
    );
  }
  return { points, durationSeconds };
}

/**
 * Reads TOKEN_RATE_LIMIT_PER_CLIENT, TOKEN_RATE_LIMIT_PER_ADDRESS and TOKEN_FAILURE_LIMIT, each
 * "points/seconds" (e.g. "60/60"); unset or empty keeps the default. Throws ConfigError (an Error)
 * naming the variable for anything else.
 */
export function rateLimitsFromEnv(env: NodeJS.ProcessEnv): RateLimits {
  return {
    perClient: budgetFrom(env, "TOKEN_RATE_LIMIT_PER_CLIENT", DEFAULT_RATE_LIMITS.perClient),
    perAddress: budgetFrom(env, "TOKEN_RATE_LIMIT_PER_ADDRESS", DEFAULT_RATE_LIMITS.perAddress),
    failures: budgetFrom(env, "TOKEN_FAILURE_LIMIT", DEFAULT_RATE_LIMITS.failures),
  };
}

export type ExhaustedBudget = "client" | "address" | "client-failures" | "address-failures";

export interface RateLimitDecision {
  allowed: boolean;
  /** The tightest budget that applied: its limit, remaining points and seconds until it resets. */
  limit: number;
  remaining: number;
  resetSeconds: number;
  /**
   * The policy of that budget as one RateLimit-Policy list item of
   * draft-ietf-httpapi-ratelimit-headers-11, e.g. `"default";q=60;w=60`.
   */
  policy: string;
  /** Whole seconds (rounded up, >= 1) when not allowed. */
  retryAfterSeconds: number | undefined;
  /** Which budget denied: "client" | "address" | "client-failures" | "address-failures" | undefined */
  exhausted: string | undefined;
}

export interface TokenRateLimiterOptions {
  /** node-redis client shared by all instances; undefined (embedded default): per-process memory only. */
  redis: RedisClientType | undefined;
  /** Prepended verbatim to every Redis key (e.g. "auth:"). */
  keyPrefix: string;
  limits: RateLimits;
  /**
   * Called each time Redis failed and the in-memory insurance limiter answered instead (so the
   * limit is per instance until Redis is back). May be called several times per request and very
   * often during an outage: log with care, count in a metric.
   */
  onFallback: (error: unknown) => void;
}

type LimiterOptions = ConstructorParameters<typeof RateLimiterMemory>[0];
type LimiterCallOptions = { [key: string]: any };

/**
 * The insurance limiter of a Redis budget. rate-limiter-flexible calls the insurance limiter (through
 * its public methods) only after a Redis command failed, and says so nowhere else; this subclass
 * reports every call it serves.
 */
class ObservedInsuranceLimiter extends RateLimiterMemory {
  readonly #served: () => void;

  constructor(options: LimiterOptions, served: () => void) {
    super(options);
    this.#served = served;
  }

  override consume(key: string | number, points?: number, options?: LimiterCallOptions): Promise<RateLimiterRes> {
    this.#served();
    return super.consume(key, points, options);
  }

  override penalty(key: string | number, points?: number, options?: LimiterCallOptions): Promise<RateLimiterRes> {
    this.#served();
    return super.penalty(key, points, options);
  }

  override reward(key: string | number, points?: number, options?: LimiterCallOptions): Promise<RateLimiterRes> {
    this.#served();
    return super.reward(key, points, options);
  }

  override get(key: string | number, options?: LimiterCallOptions): Promise<RateLimiterRes | null> {
    this.#served();
    return super.get(key, options);
  }

  override set(key: string | number, points: number, secDuration: number, options?: LimiterCallOptions): Promise<RateLimiterRes> {
    this.#served();
    return super.set(key, points, secDuration, options);
  }

  override block(key: string | number, secDuration: number, options?: LimiterCallOptions): Promise<RateLimiterRes> {
    this.#served();
    return super.block(key, secDuration, options);
  }

  override delete(key: string | number, options?: LimiterCallOptions): Promise<boolean> {
    this.#served();
    return super.delete(key, options);
  }
}

type ErrorHandler = (error: unknown, ...rest: unknown[]) => unknown;

/**
 * The Redis limiter of a budget, remembering the last store error so onFallback can report the
 * cause. rate-limiter-flexible 11.x passes every failure through `_handleError` right before it
 * asks the insurance limiter; should that internal method ever be renamed, only the cause is lost
 * (onFallback then gets a generic error), not the detection, which rests on the insurance limiter.
 */
class ObservedRedisLimiter extends RateLimiterRedis {
  lastStoreError: unknown = undefined;

  _handleError(error: unknown, ...rest: unknown[]): unknown {
    if (!(error instanceof RateLimiterRes)) this.lastStoreError = error;
    const base = (RateLimiterRedis.prototype as unknown as { _handleError: ErrorHandler })._handleError;
    return base.call(this, error, ...rest);
  }
}

type BudgetName = ExhaustedBudget;

interface LimitedBudget {
  readonly name: BudgetName;
  readonly budget: Budget;
  readonly limiter: RateLimiterAbstract;
}

/** Outcome of one budget for one call. */
interface BudgetState {
  readonly of: LimitedBudget;
  readonly allowed: boolean;
  readonly remaining: number;
  readonly msBeforeReset: number;
}

/** Client ids are client-supplied: only a digest of one goes into a key. */
function clientKey(clientId: string): string {
  return crypto.createHash("sha256").update(clientId, "utf8").digest("hex").slice(0, 32);
}

function policyItem(budget: Budget): string {
  return `"default";q=${budget.points};w=${budget.durationSeconds}`;
}

function wholeSeconds(ms: number): number {
  return ms > 0 ? Math.ceil(ms / 1000) : 0;
}

export class TokenRateLimiter {
  readonly #client: LimitedBudget;
  readonly #address: LimitedBudget;
  readonly #clientFailures: LimitedBudget;
  readonly #addressFailures: LimitedBudget;

  constructor(options: TokenRateLimiterOptions) {
    const { redis, keyPrefix, limits, onFallback } = options;
    const make = (name: BudgetName, budget: Budget): LimitedBudget => {
      const base: LimiterOptions = {
        keyPrefix: `${keyPrefix}ratelimit:token:${name}`,
        points: budget.points,
        duration: budget.durationSeconds,
      };
      if (!redis) return { name, budget, limiter: new RateLimiterMemory(base) };
      let redisLimiter: ObservedRedisLimiter | undefined;
      const insurance = new ObservedInsuranceLimiter(base, () => {
        const cause = redisLimiter?.lastStoreError;
        onFallback(cause ?? new Error(`Redis rate limit store failed; in-memory limit applied to ${name}`));
      });
      redisLimiter = new ObservedRedisLimiter({
        ...base,
        storeClient: redis,
        // node-redis 4+ API (eval with { keys, arguments }); without it every call fails.
        useRedisPackage: true,
        insuranceLimiter: insurance,
      });
      return { name, budget, limiter: redisLimiter };
    };
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

    const failureChecks = [this.#check(this.#addressFailures, address)];
    if (key !== undefined) failureChecks.unshift(this.#check(this.#clientFailures, key));
    const failures = await Promise.all(failureChecks);
    const lockedOut = failures.filter((state) => !state.allowed);
    if (lockedOut.length > 0) return denied(lockedOut);

    const consumptions = [this.#consume(this.#address, address)];
    if (key !== undefined) consumptions.unshift(this.#consume(this.#client, key));
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
      policy: policyItem(tightest.of.budget),
      retryAfterSeconds: undefined,
      exhausted: undefined,
    };
  }

  /** Called after a failed client authentication: one point off the failure budgets of the client id (known or not) and the address. */
  async recordFailure(clientId: string | undefined, address: string): Promise<void> {
    const penalties = [this.#addressFailures.limiter.penalty(address, 1)];
    if (clientId !== undefined) penalties.push(this.#clientFailures.limiter.penalty(clientKey(clientId), 1));
    await Promise.all(penalties);
  }

  /** Reads a failure budget without consuming it. */
  async #check(of: LimitedBudget, key: string): Promise<BudgetState> {
    const res = await of.limiter.get(key);
    const consumed = res?.consumedPoints ?? 0;
    return {
      of,
      allowed: consumed < of.budget.points,
      remaining: Math.max(of.budget.points - consumed, 0),
      msBeforeReset: res?.msBeforeNext ?? 0,
    };
  }

  async #consume(of: LimitedBudget, key: string): Promise<BudgetState> {
    try {
      const res = await of.limiter.consume(key, 1);
      return { of, allowed: true, remaining: res.remainingPoints, msBeforeReset: res.msBeforeNext };
    } catch (rejection) {
      // A RateLimiterRes rejection means "budget spent"; anything else is a failure of the store
      // and of its insurance, and must not turn into "unlimited".
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      return { of, allowed: false, remaining: 0, msBeforeReset: rejection.msBeforeNext };
    }
  }
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
    policy: policyItem(last.of.budget),
    retryAfterSeconds,
    exhausted: last.of.name,
  };
}

/**
 * Response headers for a decision, following draft-ietf-httpapi-ratelimit-headers-11 (May 2026):
 * structured-field Lists of one item named "default" —
 *   RateLimit-Policy: "default";q=<limit>;w=<window seconds>
 *   RateLimit: "default";r=<remaining>;t=<seconds until reset>
 * plus `Retry-After: <seconds>` (RFC 9110) when refused. The draft asks that Retry-After not point
 * before the end of the effective window, so on a refusal t equals Retry-After.
 */
export function rateLimitHeaders(decision: RateLimitDecision): Record<string, string> {
  const headers: Record<string, string> = {
    "RateLimit-Policy": decision.policy,
    RateLimit: `"default";r=${decision.remaining};t=${decision.resetSeconds}`,
  };
  if (!decision.allowed) {
    headers["Retry-After"] = String(Math.max(1, decision.retryAfterSeconds ?? decision.resetSeconds));
  }
  return headers;
}
