import type { Clock } from "../shared/clock.js";
import type { Counter, LabelledCounter, Logger } from "../shared/observability.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { AuditConfig, AuditEvent, AuditSink } from "./model.js";
import { AuditRecordRejected, type AuditRepository } from "./ports.js";

export interface AuditLogMetrics {
  /** Events written, per tenant (tmc_id "" for events of no tenant): one tenant's surge must be visible as its own. */
  readonly written: LabelledCounter<"tmc_id">;
  /** Batch writes that failed and will be retried (the database was unreachable). */
  readonly writeFailures: Counter;
  /** Events lost: buffer overflow, or shutdown with the database down. */
  readonly dropped: Counter;
  /** Events the database refused outright, set aside so they cannot block the trail. */
  readonly rejected: Counter;
}

/** Longest text kept in any field of an audit event. */
const MAX_TEXT = 256;

/** Waits between the last attempts to write buffered audit events at shutdown. */
const CLOSE_RETRY_DELAYS_MS: readonly number[] = [200, 400, 600, 800];

export interface AuditLogOptions extends Pick<AuditConfig, "batchSize" | "maxBuffered"> {
  /** Waits between the final flush attempts of `close` (tests shorten them). */
  readonly closeRetryDelaysMs?: readonly number[];
}

/** What AuditLog is built from. */
export interface AuditLogDeps {
  readonly uow: UnitOfWork;
  readonly events: AuditRepository;
  readonly logger: Logger;
  readonly metrics: AuditLogMetrics;
  readonly clock: Clock;
}

/**
 * Audit events from the hottest path (token issued, refused, rate limited) are written in
 * batches off the request path: a background job calls `flush` on an interval, and a full batch
 * flushes at once. A failed write keeps the batch for the next attempt (visible in metrics and
 * the log); `close` flushes what is left, so a graceful shutdown loses nothing.
 */
export class AuditLog implements AuditSink {
  private buffer: AuditEvent[] = [];
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly deps: AuditLogDeps,
    private readonly options: AuditLogOptions,
  ) {}

  /** Events recorded and not written yet. */
  get pending(): number {
    return this.buffer.length;
  }

  record(event: AuditEvent): void {
    this.buffer.push(sanitized({ ...event, occurredAt: event.occurredAt ?? this.deps.clock() }));
    if (this.buffer.length > this.options.maxBuffered) {
      const excess = this.buffer.length - this.options.maxBuffered;
      this.buffer.splice(0, excess);
      this.deps.metrics.dropped.inc(excess);
      this.deps.logger.error({ dropped: excess }, "audit buffer full: oldest events dropped");
    }
    if (this.buffer.length >= this.options.batchSize) void this.flush();
  }

  /** Writes everything buffered so far (one flush at a time). */
  flush(): Promise<void> {
    this.flushing ??= this.writeAll().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  /** Writes what is left, retrying a few times before giving up loudly. */
  async close(): Promise<void> {
    for (const delayMs of [0, ...(this.options.closeRetryDelaysMs ?? CLOSE_RETRY_DELAYS_MS)]) {
      if (this.buffer.length === 0 && !this.flushing) break;
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      await this.flush();
    }
    if (this.buffer.length > 0) {
      this.deps.metrics.dropped.inc(this.buffer.length);
      this.deps.logger.error({ lost: this.buffer.length }, "audit events could not be written before shutdown");
    }
  }

  private async writeAll(): Promise<void> {
    while (this.buffer.length > 0) {
      const batch = this.buffer.slice(0, this.options.batchSize);
      try {
        await this.deps.events.append(this.deps.uow.direct, batch);
        this.countWritten(batch);
      } catch (error) {
        if (!(error instanceof AuditRecordRejected)) {
          this.deps.metrics.writeFailures.inc();
          this.deps.logger.error(
            { err: { message: (error as Error).message }, pending: this.buffer.length },
            "audit write failed; will retry",
          );
          return;
        }
        // A poisoned event must not hold back the trail: write the batch one event at a time
        // and set aside only what the database refuses.
        if (!(await this.writeOneByOne(batch))) return;
      }
      this.buffer.splice(0, batch.length);
    }
  }

  private countWritten(events: readonly AuditEvent[]): void {
    const perTenant = new Map<string, number>();
    for (const { tmcId } of events) perTenant.set(tmcId ?? "", (perTenant.get(tmcId ?? "") ?? 0) + 1);
    for (const [tmc_id, count] of perTenant) this.deps.metrics.written.inc({ tmc_id }, count);
  }

  /** False when the database became unreachable meanwhile (the batch stays for the next attempt). */
  private async writeOneByOne(batch: readonly AuditEvent[]): Promise<boolean> {
    const written: AuditEvent[] = [];
    for (const event of batch) {
      try {
        await this.deps.events.append(this.deps.uow.direct, [event]);
        written.push(event);
        this.countWritten([event]);
      } catch (error) {
        if (!(error instanceof AuditRecordRejected)) {
          // Keep only what is not written yet, in order.
          this.buffer.splice(0, batch.length, ...batch.filter((e) => !written.includes(e)));
          this.deps.metrics.writeFailures.inc();
          return false;
        }
        this.deps.metrics.rejected.inc();
        this.deps.logger.error(
          {
            err: { message: (error.cause as Error)?.message },
            action: event.action,
            debugIdentifier: event.debugIdentifier,
          },
          "audit event refused by the database; set aside",
        );
      }
    }
    return true;
  }
}

/** No control characters and no unbounded text reach the trail, whatever a caller sent. */
function sanitized(event: AuditEvent): AuditEvent {
  return {
    ...event,
    action: clean(event.action)!,
    actor: clean(event.actor),
    tmcId: clean(event.tmcId),
    targetClientId: clean(event.targetClientId),
    debugIdentifier: clean(event.debugIdentifier),
    ...(event.details
      ? {
          details: Object.fromEntries(
            Object.entries(event.details).map(([k, v]) => [clean(k)!, typeof v === "string" ? clean(v)! : v]),
          ),
        }
      : {}),
  };
}

function clean(text: string | null): string | null {
  if (text === null) return null;
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001F\u007F]|[\uD800-\uDFFF]/g, "\uFFFD").slice(0, MAX_TEXT);
}
