import type { Knex } from "knex";
import type { Logger } from "pino";
import type { Counter } from "prom-client";
import { insertAuditEvents, type AuditEvent } from "../../store/audit-store.js";

export interface AuditLogMetrics {
  readonly written: Counter;
  readonly writeFailures: Counter;
  readonly dropped: Counter;
}

/**
 * Audit events from the hottest path (token issued, refused, rate limited) are written in
 * batches off the request path. A failed write keeps the batch for the next attempt (visible
 * in metrics and the log); `close` flushes what is left, so a graceful shutdown loses nothing.
 * Only if the buffer outgrows `maxBuffered` while the database is down are the oldest events
 * dropped, and counted.
 */
export class AuditLog {
  private buffer: AuditEvent[] = [];
  private flushing: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly db: Knex,
    private readonly logger: Logger,
    private readonly metrics: AuditLogMetrics,
    private readonly options: { flushIntervalMs: number; batchSize: number; maxBuffered: number } = {
      flushIntervalMs: 250,
      batchSize: 500,
      maxBuffered: 100_000,
    },
  ) {
    this.timer = setInterval(() => void this.flush(), options.flushIntervalMs);
    this.timer.unref();
  }

  record(event: AuditEvent): void {
    this.buffer.push({ ...event, occurredAt: event.occurredAt ?? new Date() });
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

  /** Stops the timer and writes what is left, retrying a few times before giving up loudly. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    for (let attempt = 0; attempt < 5 && (this.buffer.length > 0 || this.flushing); attempt++) {
      await this.flush();
      if (this.buffer.length > 0) await new Promise((r) => setTimeout(r, 200 * (attempt + 1)));
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
        await insertAuditEvents(this.db, batch);
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
