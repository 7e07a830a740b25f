import type { Database } from "../store/postgres/database.js";
import type { SharedState } from "../store/shared-state.js";

export type DependencyStatus = "up" | "degraded" | "down";

/**
 * Whether this instance can serve, answered within `timeoutMs` whatever its dependencies do:
 * Postgres unreachable is "down" (nothing can be served truthfully); Redis unreachable is
 * "degraded" (Postgres answers credential checks and rate limits are per instance), which must
 * not take the instance out of a load balancer.
 */
export function readinessOf(database: Database, shared: SharedState, timeoutMs: number): () => Promise<Record<string, DependencyStatus>> {
  return async () => {
    const [databaseUp, redis] = await Promise.all([
      within(database.ping(), timeoutMs, false),
      within(shared.status(), timeoutMs, "degraded" as const),
    ]);
    return { database: databaseUp ? "up" : "down", redis };
  };
}

function within<T>(work: Promise<T>, timeoutMs: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), timeoutMs);
    timer.unref();
  });
  return Promise.race([work.catch(() => fallback), timeout]).finally(() => clearTimeout(timer));
}
