import type { Database } from "../store/postgres/database.js";
import type { DependencyStatus } from "../observability/metrics.js";
import type { SharedState } from "../store/shared-state.js";

export type { DependencyStatus };

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
  // pool connection: a flood of /readyz (HTTP/2 streams reset as soon as sent, whose
  // handlers ran on regardless) queued hundreds of pings ahead of real requests, which then
  // timed out waiting for a connection (503).
  let inFlight: Promise<Record<string, DependencyStatus>> | undefined;
  return () =>
    (inFlight ??= check().finally(() => {
      inFlight = undefined;
    }));
}

/** Readiness as the probes read it: the latest check's result, and whether the instance is draining. */
export interface Readiness {
  /** Each dependency's status as of the latest check. */
  readonly checks: () => Promise<Record<string, DependencyStatus>>;
  /** Runs the first check, then refreshes the state in the background. */
  start(): Promise<void>;
  /** True from the start of a shutdown's drain: the instance still serves but asks to be taken out. */
  readonly draining: () => boolean;
  drain(): void;
  stop(): void;
}

/**
 * Answers from the state a background check refreshes every `intervalMs`, instead of checking per
 * probe: under CPU load a probe's own ping waited behind the request queue (over 1 s),
 * and HAProxy marked busy but healthy servers DOWN. A dependency that dies is seen within
 * `intervalMs` plus the check's timeout.
 */
export function cachedReadiness(check: () => Promise<Record<string, DependencyStatus>>, intervalMs: number): Readiness {
  let latest: Promise<Record<string, DependencyStatus>> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let draining = false;
  return {
    // Checked on demand until started (an instance that does not listen).
    checks: () => latest ?? check(),
    async start() {
      latest = check();
      await latest;
      timer ??= setInterval(() => {
        const next = check();
        // The previous result stands until the next one is in.
        void next.then(() => (latest = next));
      }, intervalMs);
      timer.unref();
    },
    draining: () => draining,
    drain: () => {
      draining = true;
    },
    stop: () => clearInterval(timer),
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
