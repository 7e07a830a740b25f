import type { RateLimitDecision } from "../domain/rate-limit/model.js";

/** The RateLimit-Policy list item of a decision's budget: `"default";q=<limit>;w=<window seconds>`. */
export function rateLimitPolicy(decision: RateLimitDecision): string {
  return `"default";q=${decision.limit};w=${decision.windowSeconds}`;
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
    "RateLimit-Policy": rateLimitPolicy(decision),
    RateLimit: `"default";r=${decision.remaining};t=${decision.resetSeconds}`,
  };
  if (!decision.allowed) {
    headers["Retry-After"] = String(Math.max(1, decision.retryAfterSeconds ?? decision.resetSeconds));
  }
  return headers;
}
