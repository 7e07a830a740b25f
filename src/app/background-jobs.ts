import { SpanKind, SpanStatusCode, type Tracer } from "@opentelemetry/api";
import type { Knex } from "knex";
import type { Config } from "../config/config.js";
import type { Clock } from "../domain/shared/clock.js";
import type { Logger } from "../domain/shared/observability.js";
import type { Metrics } from "../observability/metrics.js";
import { maintainAuditPartitions } from "../store/postgres/audit-partitions.js";
import type { DomainServices } from "./domain-services.js";

/** A job every instance runs on an interval; its failures are logged, never fatal. */
export interface BackgroundJob {
  readonly name: string;
  readonly intervalMs: number;
  readonly run: () => Promise<unknown>;
  /** True when a run now would have nothing to do: it still runs, but makes no span (an empty audit flush, 4 times a second). */
  readonly idle?: () => boolean;
  /** Runs once as soon as the jobs start, then on the interval (a long interval's first run is not an interval away). */
  readonly runAtStart?: boolean;
}

/**
 * Runs the jobs on their intervals (timers unref'd: they never keep the process alive). A run
 * still in progress is not started again. `stop` clears the timers and waits for runs in flight.
 * With tracing on, each run that has work is a root span `job <name>` (its queries its children).
 */
export function startBackgroundJobs(
  jobs: readonly BackgroundJob[],
  logger: Logger,
  tracer?: Tracer,
): { stop(): Promise<void> } {
  const inFlight = new Set<Promise<unknown>>();
  const timers = jobs.map((job) => {
    let running: Promise<unknown> | undefined;
    const tick = () => {
      if (running) return;
      running = (tracer && !job.idle?.() ? traced(tracer, job) : job.run())
        .catch((err: unknown) =>
          logger.warn({ err: { message: (err as Error).message }, job: job.name }, `${job.name} failed`),
        )
        .finally(() => {
          inFlight.delete(running!);
          running = undefined;
        });
      inFlight.add(running);
    };
    const timer = setInterval(tick, job.intervalMs);
    timer.unref();
    if (job.runAtStart) tick();
    return timer;
  });
  return {
    async stop() {
      timers.forEach(clearInterval);
      await Promise.all(inFlight);
    },
  };
}

/** One run of `job` in a root span of its own (jobs belong to no request's trace). */
function traced(tracer: Tracer, job: BackgroundJob): Promise<unknown> {
  return tracer.startActiveSpan(
    `job ${job.name}`,
    { kind: SpanKind.INTERNAL, root: true, attributes: { "travel.job": job.name } },
    async (span) => {
      try {
        return await job.run();
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : "error" });
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/** The jobs every instance runs over its domain services, on the intervals of the jobs settings. */
export function domainJobs(
  intervals: Config["jobs"],
  domain: Pick<DomainServices, "signingKeys" | "generations" | "auditLog">,
): BackgroundJob[] {
  return [
    {
      name: "signing key reload",
      intervalMs: intervals.signingKeyReloadIntervalMs,
      run: () => domain.signingKeys.reload(),
    },
    {
      name: "credential reconcile",
      intervalMs: intervals.credentialReconcileIntervalMs,
      run: () => domain.generations.reconcile(),
    },
    {
      name: "credential log prune",
      intervalMs: intervals.credentialLogPruneIntervalMs,
      run: () => domain.generations.pruneLog(),
    },
    {
      name: "audit flush",
      intervalMs: intervals.auditFlushIntervalMs,
      run: () => domain.auditLog.flush(),
      idle: () => domain.auditLog.pending === 0,
    },
  ];
}

/** Months of audit partitions created ahead of the current one. */
const AUDIT_MONTHS_AHEAD = 3;

/**
 * The audit trail's partitions (src/store/postgres/audit-partitions.ts): the months ahead
 * created, those past AUDIT_RETENTION_MONTHS dropped whole. Every instance runs it, at start and
 * then every AUDIT_PARTITION_INTERVAL_MS; one at a time acts (an advisory lock), the others find
 * nothing to do. The gauges say how many months are created ahead and when retention last ran,
 * for the alerts (deploy/prometheus-alerts.yml) that a failing job would otherwise never raise.
 */
export function auditPartitionJob(
  config: Pick<Config, "jobs" | "audit">,
  jobsDb: Knex,
  clock: Clock,
  logger: Logger,
  gauges: Pick<Metrics, "auditPartitionsAhead" | "auditPartitionMaintained">,
): BackgroundJob {
  return {
    name: "audit partition maintenance",
    intervalMs: config.jobs.auditPartitionIntervalMs,
    runAtStart: true,
    run: async () => {
      const now = clock();
      const { created, dropped, moved, acted, monthsAhead } = await maintainAuditPartitions(jobsDb, now, {
        monthsAhead: AUDIT_MONTHS_AHEAD,
        retentionMonths: config.audit.retentionMonths,
      });
      gauges.auditPartitionsAhead.set(monthsAhead);
      if (acted) gauges.auditPartitionMaintained.set(now.getTime() / 1000);
      if (moved > 0)
        logger.warn(
          { events: moved, partitions: created },
          "audit events dated ahead were in the default partition: moved into the months created for them",
        );
      if (created.length > 0) logger.info({ partitions: created }, "audit partitions created");
      if (dropped.length > 0)
        logger.warn(
          { partitions: dropped, retentionMonths: config.audit.retentionMonths },
          "audit partitions past retention dropped",
        );
    },
  };
}
