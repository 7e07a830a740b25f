import type { AuditEvent, AuditSink } from "../../src/domain/audit/model.js";
import type { Counter, LabelledCounter, Logger } from "../../src/domain/shared/observability.js";

/** A Counter that remembers its total. */
export class RecordingCounter implements Counter {
  value = 0;
  inc(value = 1): void {
    this.value += value;
  }
}

/** A LabelledCounter that remembers every increment with its labels. */
export class RecordingLabelledCounter<L extends string> implements LabelledCounter<L> {
  readonly increments: Array<Partial<Record<L, string>>> = [];
  inc(labels: Partial<Record<L, string>>, value = 1): void {
    for (let i = 0; i < value; i++) this.increments.push({ ...labels });
  }
  count(labels: Partial<Record<L, string>>): number {
    return this.increments.filter((seen) => Object.entries(labels).every(([k, v]) => seen[k as L] === v)).length;
  }
}

/** A Logger that keeps what it was told. */
export class RecordingLogger implements Logger {
  readonly lines: Array<{ level: "info" | "warn" | "error" | "debug"; object: object; message: string }> = [];
  info(object: object, message: string): void {
    this.lines.push({ level: "info", object, message });
  }
  warn(object: object, message: string): void {
    this.lines.push({ level: "warn", object, message });
  }
  error(object: object, message: string): void {
    this.lines.push({ level: "error", object, message });
  }
  debug(object: object, message: string): void {
    this.lines.push({ level: "debug", object, message });
  }
  messages(level: "info" | "warn" | "error" | "debug"): string[] {
    return this.lines.filter((l) => l.level === level).map((l) => l.message);
  }
}

/** The hot path's AuditSink, keeping events in memory instead of batching them to the database. */
export class RecordingAuditSink implements AuditSink {
  readonly events: AuditEvent[] = [];
  record(event: AuditEvent): void {
    this.events.push(event);
  }
}
