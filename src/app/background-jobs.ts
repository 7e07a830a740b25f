import type { Logger } from "../domain/shared/observability.js";

/** A job every instance runs on an interval; its failures are logged, never fatal. */
export interface BackgroundJob {
  readonly name: string;
  readonly intervalMs: number;
  readonly run: () => Promise<unknown>;
}

/**
 * Runs the jobs on their intervals (timers unref'd: they never keep the process alive). A run
 * still in progress is not started again. `stop` clears the timers and waits for runs in flight.
 */
export function startBackgroundJobs(jobs: readonly BackgroundJob[], logger: Logger): { stop(): Promise<void> } {
  const inFlight = new Set<Promise<unknown>>();
  const timers = jobs.map((job) => {
    let running: Promise<unknown> | undefined;
    const timer = setInterval(() => {
      if (running) return;
      running = job
        .run()
        .catch((err: unknown) =>
          logger.warn({ err: { message: (err as Error).message }, job: job.name }, `${job.name} failed`),
        )
        .finally(() => {
          inFlight.delete(running!);
          running = undefined;
        });
      inFlight.add(running);
    }, job.intervalMs);
    timer.unref();
    return timer;
  });
  return {
    async stop() {
      timers.forEach(clearInterval);
      await Promise.all(inFlight);
    },
  };
}
