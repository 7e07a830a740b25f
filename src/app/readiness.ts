import type { Database } from "../store/postgres/database.js";
import type { SharedState } from "../store/shared-state.js";

export type DependencyStatus = "up" | "degraded" | "down";

/**
 * Whether this instance can serve, answered within `timeoutMs` whatever its dependencies do:
 * Postgres unreachable is "down" (nothing can be served truthfully); Redis unreachable is
 * "degraded" (Postgres answers credential checks and rate limits are per instance), which must
 * not take the instance out of a load balancer.
 */
export function readinessOf(
  database: Database,
  shared: SharedState,
  timeoutMs: number,
): () => Promise<Record<string, DependencyStatus>> {
  const check = async (): Promise<Record<string, DependencyStatus>> => {
    const [databaseUp, redis] = await Promise.all([
      within(database.ping(), timeoutMs, false),
      within(shared.status(), timeoutMs, "degraded" as const),
    ]);
    return { database: databaseUp ? "up" : "down", redis };
  };
  // One check at a time, shared by every caller that asks meanwhile. Each check used to take a
  // pool connection: a flood of /readyz (issue 18: HTTP/2 streams reset as soon as sent, whose
  // handlers ran on regardless) queued hundreds of pings ahead of real requests, which then
  // timed out waiting for a connection (503).
  let inFlight: Promise<Record<string, DependencyStatus>> | undefined;
  return () =>
    (inFlight ??= check().finally(() => {
      inFlight = undefined;
    }));
}

function within<T>(work: Promise<T>, timeoutMs: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), timeoutMs);
    timer.unref();
  });
  return Promise.race([work.catch(() => fallback), timeout]).finally(() => clearTimeout(timer));
}
