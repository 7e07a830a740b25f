import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { RecordedAuditEvent } from "./model.js";
import type { AuditRepository } from "./ports.js";

/** Reading a tenant's audit trail (the operator's `audit list`). */
export class AuditTrail {
  constructor(
    private readonly uow: UnitOfWork,
    private readonly events: AuditRepository,
  ) {}

  list(tmcId: string, limit: number): Promise<RecordedAuditEvent[]> {
    return this.events.list(this.uow.direct, tenantScope(tmcId), limit);
  }
}
