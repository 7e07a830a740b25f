import type { AuditEvent, RecordedAuditEvent } from "../../../domain/audit/model.js";
import { AuditRecordRejected, type AuditRepository } from "../../../domain/audit/ports.js";
import type { TenantScope } from "../../../domain/shared/tenant-scope.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { AuditEventRow } from "../tables.js";
import { knexOf } from "../unit-of-work.js";

export class PostgresAuditRepository implements AuditRepository {
  async append(tx: Tx, events: readonly AuditEvent[]): Promise<void> {
    if (events.length === 0) return;
    try {
      await knexOf(tx)<AuditEventRow>("audit_events").insert(
      events.map((e) => ({
        occurred_at: e.occurredAt ?? new Date(),
        action: e.action,
        outcome: e.outcome,
        actor: e.actor,
        tmc_id: e.tmcId,
        target_client_id: e.targetClientId,
        debug_identifier: e.debugIdentifier,
        details: e.details ?? {},
      })),
      );
    } catch (error) {
      // SQLSTATE classes 22 (data exception) and 23 (integrity): the rows themselves are refused.
      if (/^2[23]/.test(String((error as { code?: unknown }).code ?? ""))) throw new AuditRecordRejected(error);
      throw error;
    }
  }

  async list(tx: Tx, scope: TenantScope, limit: number): Promise<RecordedAuditEvent[]> {
    const rows = await knexOf(tx)<AuditEventRow>("audit_events").where({ tmc_id: scope.tmcId }).orderBy("id", "desc").limit(limit);
    return rows.map((r) => ({
      occurredAt: new Date(r.occurred_at),
      action: r.action,
      outcome: r.outcome as AuditEvent["outcome"],
      actor: r.actor,
      tmcId: r.tmc_id,
      targetClientId: r.target_client_id,
      debugIdentifier: r.debug_identifier,
      details: Object.fromEntries(Object.entries(r.details ?? {}).map(([k, v]) => [k, typeof v === "number" || typeof v === "boolean" ? v : String(v)])),
    }));
  }
}
