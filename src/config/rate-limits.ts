import type { Budget, RateLimits } from "../domain/rate-limit/model.js";
import { ConfigError } from "./config-error.js";

export const DEFAULT_RATE_LIMITS: RateLimits = Object.freeze({
  perClient: Object.freeze({ points: 60, durationSeconds: 60 }),
  perAddress: Object.freeze({ points: 300, durationSeconds: 60 }),
  failures: Object.freeze({ points: 10, durationSeconds: 900 }),
});

const MAX_POINTS = 1_000_000;
const MAX_SECONDS = 86_400;

export function budgetFrom(env: NodeJS.ProcessEnv, name: string, fallback: Budget): Budget {
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
 * "points/seconds" (e.g. "60/60"); unset or empty keeps the default. Throws ConfigError naming
 * the variable for anything else.
 */
export function rateLimitsFromEnv(env: NodeJS.ProcessEnv): RateLimits {
  return {
    perClient: budgetFrom(env, "TOKEN_RATE_LIMIT_PER_CLIENT", DEFAULT_RATE_LIMITS.perClient),
    perAddress: budgetFrom(env, "TOKEN_RATE_LIMIT_PER_ADDRESS", DEFAULT_RATE_LIMITS.perAddress),
    failures: budgetFrom(env, "TOKEN_FAILURE_LIMIT", DEFAULT_RATE_LIMITS.failures),
  };
}

/** A resource server's default: 1 000 introspection calls a second, far above an API user's token requests. */
export const DEFAULT_RESOURCE_SERVER_RATE_LIMIT = Object.freeze({ points: 60_000, durationSeconds: 60 });

/**
 * The budgets of resource servers at introspection: RESOURCE_SERVER_RATE_LIMIT ("points/seconds")
 * per resource server and per source address (a gateway introspects from a few addresses, at a
 * rate no API user asks for tokens), and TOKEN_FAILURE_LIMIT for failed authentications, as for
 * API users. Counted apart from API users' budgets.
 */
export function resourceServerRateLimitsFromEnv(env: NodeJS.ProcessEnv): RateLimits {
  const budget = budgetFrom(env, "RESOURCE_SERVER_RATE_LIMIT", DEFAULT_RESOURCE_SERVER_RATE_LIMIT);
  return { perClient: budget, perAddress: budget, failures: rateLimitsFromEnv(env).failures };
}
