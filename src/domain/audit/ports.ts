import type { TenantScope } from "../shared/tenant-scope.js";
import type { Tx } from "../shared/unit-of-work.js";
import type { AuditEvent, RecordedAuditEvent } from "./model.js";

export interface AuditRepository {
  /** Appends events; each carries its own tenant (or none, for unattributable requests). */
  append(tx: Tx, events: readonly AuditEvent[]): Promise<void>;
  /** A tenant's trail, newest first. */
  list(tx: Tx, scope: TenantScope, limit: number): Promise<RecordedAuditEvent[]>;
}
