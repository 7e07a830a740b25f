/** The actor the audit trail names for every change the platform operator makes. */
export const OPERATOR_ACTOR = "operator";

/** One entry of the audit trail. Never holds a secret or a token. */
export interface AuditEvent {
  readonly action: string;
  readonly outcome: "SUCCESS" | "FAILURE" | "DENIED" | "RATE_LIMITED";
  /** clientId of the caller, "operator", or a claimed (unauthenticated) client id. */
  readonly actor: string | null;
  /** The tenant the event belongs to; null for requests no tenant can be named for. */
  readonly tmcId: string | null;
  readonly targetClientId: string | null;
  readonly debugIdentifier: string | null;
  readonly details?: Readonly<Record<string, string | number | boolean>>;
  readonly occurredAt?: Date;
}

/** An event as read back. */
export interface RecordedAuditEvent extends AuditEvent {
  readonly occurredAt: Date;
}

/** Where the hot path hands its events: recorded off the request path. */
export interface AuditSink {
  record(event: AuditEvent): void;
}

/** The audit trail's buffer (AUDIT_BATCH_SIZE, AUDIT_MAX_BUFFERED). */
export interface AuditConfig {
  readonly batchSize: number;
  /** Events kept while the database is down; beyond it the oldest are dropped and counted. */
  readonly maxBuffered: number;
  /**
   * Whole months of the trail kept before the current one; older monthly partitions are dropped
   * (docs/operations.md: archive them first). 0 keeps everything.
   */
  readonly retentionMonths: number;
}
