import type { Knex } from "knex";
import type { AuditEventRow } from "./tables.js";

/** One entry of the audit trail. Never holds a secret or a token. */
export interface AuditEvent {
  action: string;
  outcome: "SUCCESS" | "FAILURE" | "DENIED" | "RATE_LIMITED";
  actor: string | null;
  tmcId: string | null;
  targetClientId: string | null;
  debugIdentifier: string | null;
  details?: Record<string, string | number | boolean>;
  occurredAt?: Date;
}

export async function insertAuditEvents(db: Knex, events: readonly AuditEvent[]): Promise<void> {
  if (events.length === 0) return;
  await db<AuditEventRow>("audit_events").insert(
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
}

export async function listAuditEvents(db: Knex, tmcId: string, limit: number): Promise<AuditEventRow[]> {
  return db<AuditEventRow>("audit_events").where({ tmc_id: tmcId }).orderBy("id", "desc").limit(limit);
}
