import type { TenantScope } from "../shared/tenant-scope.js";
import type { Tx } from "../shared/unit-of-work.js";
import type { AuditEvent, RecordedAuditEvent } from "./model.js";

/**
 * Thrown by `append` when the database refused the events themselves (a value it cannot store),
 * as opposed to being unreachable: retrying the same events can never succeed.
 */
export class AuditRecordRejected extends Error {
  constructor(cause: unknown) {
    super("the database refused an audit record", { cause });
    this.name = "AuditRecordRejected";
  }
}

export interface AuditRepository {
  /** Appends events; each carries its own tenant (or none, for unattributable requests). */
  append(tx: Tx, events: readonly AuditEvent[]): Promise<void>;
  /** A tenant's trail, newest first. */
  list(tx: Tx, scope: TenantScope, limit: number): Promise<RecordedAuditEvent[]>;
}
