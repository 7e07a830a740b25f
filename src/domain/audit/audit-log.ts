import type { Clock } from "../shared/clock.js";
import type { Counter, Logger } from "../shared/observability.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { AuditEvent, AuditSink } from "./model.js";
import type { AuditRepository } from "./ports.js";

export interface AuditLogMetrics {
  readonly written: Counter;
  readonly writeFailures: Counter;
  readonly dropped: Counter;
}

export interface AuditLogOptions {
  readonly batchSize: number;
  /** Events kept while the database is down; beyond it the oldest are dropped and counted. */
  readonly maxBuffered: number;
  /** Waits between the final flush attempts of `close`. */
  readonly closeRetryDelaysMs: readonly number[];
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
    private readonly uow: UnitOfWork,
    private readonly events: AuditRepository,
    private readonly logger: Logger,
    private readonly metrics: AuditLogMetrics,
    private readonly clock: Clock,
    private readonly options: AuditLogOptions,
  ) {}

  record(event: AuditEvent): void {
    this.buffer.push({ ...event, occurredAt: event.occurredAt ?? this.clock() });
    if (this.buffer.length > this.options.maxBuffered) {
      const excess = this.buffer.length - this.options.maxBuffered;
      this.buffer.splice(0, excess);
      this.metrics.dropped.inc(excess);
      this.logger.error({ dropped: excess }, "audit buffer full: oldest events dropped");
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
    for (const delayMs of [0, ...this.options.closeRetryDelaysMs]) {
      if (this.buffer.length === 0 && !this.flushing) break;
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      await this.flush();
    }
    if (this.buffer.length > 0) {
      this.metrics.dropped.inc(this.buffer.length);
      this.logger.error({ lost: this.buffer.length }, "audit events could not be written before shutdown");
    }
  }

  private async writeAll(): Promise<void> {
    while (this.buffer.length > 0) {
      const batch = this.buffer.slice(0, this.options.batchSize);
      try {
        await this.events.append(this.uow.direct, batch);
      } catch (error) {
        this.metrics.writeFailures.inc();
        this.logger.error({ err: { message: (error as Error).message }, pending: this.buffer.length }, "audit write failed; will retry");
        return;
      }
      this.buffer.splice(0, batch.length);
      this.metrics.written.inc(batch.length);
    }
  }
}
