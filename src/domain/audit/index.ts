import type { Clock } from "../shared/clock.js";
import type { Logger } from "../shared/observability.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import { AuditLog, type AuditLogMetrics } from "./audit-log.js";
import type { AuditConfig } from "./model.js";
import type { AuditRepository } from "./ports.js";

/** What the audit area is built from: the unit of work its writes run on, its repository, the log, counters and clock. */
export interface AuditAreaDeps {
  readonly uow: UnitOfWork;
  readonly repositories: { readonly audit: AuditRepository };
  readonly logger: Logger;
  readonly metrics: AuditLogMetrics;
  readonly clock: Clock;
}

/** The audit area: the trail, buffered off the request path and written by the audit flush job. */
export function createAuditArea({ repositories, ...deps }: AuditAreaDeps, config: AuditConfig) {
  return { auditLog: new AuditLog({ ...deps, events: repositories.audit }, config) };
}
