import { setTimeout as sleep } from "node:timers/promises";

/**
 * Polls `probe` until it returns something other than undefined, false or null, and returns that;
 * throws naming `what` (and the last value seen) once `timeoutMs` has passed. For conditions a
 * test awaits (a background job has run, a connection is back): never a fixed sleep. The default
 * bound is a backstop for a condition that never comes, generous enough for a saturated machine.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  { timeoutMs = 60_000, intervalMs = 25 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    last = await probe();
    if (last !== undefined && last !== null && last !== false) return last as T;
    if (Date.now() >= deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
    await sleep(intervalMs);
  }
}
