import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../domain/shared/observability.js";
import { isDatabaseUnavailable } from "../store/postgres/unavailable.js";

/**
 * Waits between attempts of start-up's first database work: about 30 s in all. A database that is
 * still starting, a pool that timed out acquiring its first connection on a starved machine, or a
 * failover in progress gets that long; then the instance gives up and exits non-zero, so an
 * orchestrator's restart policy (with its own backoff) takes over instead of a process that hangs.
 */
export const STARTUP_RETRY_DELAYS_MS: readonly number[] = [250, 500, 1_000, 2_000, 4_000, 8_000, 8_000, 8_000];

/**
 * Runs `work`, retrying it while it fails because the database is unavailable (unreachable,
 * starting up, stalled, out of connections: `isDatabaseUnavailable`). Any other failure (a bad
 * migration, a wrong password, a schema mismatch) is not transient and is thrown at once.
 * `work` must be safe to repeat: each step it is given for is idempotent (migrations, loading keys).
 */
export async function retryWhileDatabaseUnavailable<T>(
  what: string,
  work: () => Promise<T>,
  logger: Logger,
  delaysMs: readonly number[] = STARTUP_RETRY_DELAYS_MS,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      const delayMs = delaysMs[attempt];
      if (delayMs === undefined || !isDatabaseUnavailable(error)) throw error;
      logger.warn(
        { err: error, attempt: attempt + 1, retryInMs: delayMs },
        `start-up: ${what} failed because the database is unavailable; retrying`,
      );
      await sleep(delayMs);
    }
  }
}
