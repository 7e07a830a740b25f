import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../domain/shared/observability.js";
import type { StorageConfig } from "../store/settings.js";
import { databaseFailureCause, isDatabaseUnavailable } from "../store/postgres/unavailable.js";

/** The longest wait between two attempts of start-up's first database work. */
const MAX_RETRY_DELAY_MS = 8_000;

/**
 * Waits between attempts of start-up's first database work, doubling from 250 ms up to 8 s, that
 * add up to `budgetMs` (DATABASE_STARTUP_WAIT_MS, about 30 s). A database that is still starting,
 * a pool that timed out acquiring its first connection on a starved machine, or a failover in
 * progress gets that long; then the instance gives up and exits non-zero, so an orchestrator's
 * restart policy (with its own backoff) takes over instead of a process that hangs.
 */
export function startupRetryDelays(budgetMs: number): number[] {
  const delays: number[] = [];
  let total = 0;
  for (let delay = 250; total < budgetMs; delay = Math.min(delay * 2, MAX_RETRY_DELAY_MS)) {
    const next = Math.min(delay, budgetMs - total);
    delays.push(next);
    total += next;
  }
  return delays;
}

/**
 * How start-up ended when the database never answered: the last line an operator reads names the
 * server (host and port only: DATABASE_URL may hold a password) and why, not the pool's symptom.
 */
export class DatabaseUnreachableError extends Error {
  constructor(what: string, target: string | undefined, cause: unknown, attempts: number, waitedMs: number) {
    super(
      `${target ? `Postgres at ${target}` : "the database"} did not answer (${databaseFailureCause(cause)}) ` +
        `while ${what}: ${attempts} attempt(s) over ${Math.round(waitedMs / 1000)} s; ` +
        "check that it runs and is reachable from here (DATABASE_STARTUP_WAIT_MS bounds the wait)",
      { cause },
    );
    this.name = "DatabaseUnreachableError";
  }
}

export interface StartupRetry {
  readonly logger: Logger;
  /** The waits between attempts (startupRetryDelays). */
  readonly delaysMs: readonly number[];
  /** "host:port" of the database, for the message when it never answers. */
  readonly target?: string;
}

/** The start-up retry of a storage: its wait (DATABASE_STARTUP_WAIT_MS), and its server named by host and port only. */
export function startupRetryOf(
  storage: Pick<StorageConfig, "databaseUrl" | "databaseStartupWaitMs">,
  logger: Logger,
): StartupRetry {
  return {
    logger,
    delaysMs: startupRetryDelays(storage.databaseStartupWaitMs),
    target: hostAndPort(storage.databaseUrl),
  };
}

/** "host:port" of a connection string, nothing else of it (it may hold a password). */
function hostAndPort(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    const { hostname, port } = new URL(url);
    return `${hostname || "localhost"}:${port || "5432"}`;
  } catch {
    return undefined;
  }
}

/**
 * Runs `work`, retrying it while it fails because the database is unavailable (unreachable,
 * starting up, stalled, out of connections: `isDatabaseUnavailable`). Any other failure (a bad
 * migration, a wrong password, a schema mismatch) is not transient and is thrown at once; an
 * unavailable database after the last wait is a DatabaseUnreachableError.
 * `work` must be safe to repeat: each step it is given for is idempotent (migrations, loading keys).
 */
export async function retryWhileDatabaseUnavailable<T>(
  what: string,
  work: () => Promise<T>,
  { logger, delaysMs, target }: StartupRetry,
): Promise<T> {
  const started = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (!isDatabaseUnavailable(error)) throw error;
      const delayMs = delaysMs[attempt];
      if (delayMs === undefined)
        throw new DatabaseUnreachableError(what, target, error, attempt + 1, Date.now() - started);
      logger.warn(
        { err: error, attempt: attempt + 1, retryInMs: delayMs },
        `start-up: ${what} failed because the database is unavailable; retrying`,
      );
      await sleep(delayMs);
    }
  }
}
