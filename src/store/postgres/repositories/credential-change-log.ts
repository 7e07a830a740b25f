import type { Knex } from "knex";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import { credentialHolderOf, jtiOfTokenCredential } from "../../../domain/tokens/model.js";
import type { CredentialChangeLog, NumberedChange } from "../../../domain/tokens/ports.js";
import type { CredentialChangeRow } from "../tables.js";
import { knexOf } from "../unit-of-work.js";

/** Arbitrary constant: the transaction-level advisory lock that numbers credential changes one at a time. */
const NUMBERING_LOCK_KEY = 727_501_114;

/**
 * The numbered credential changes, announced with NOTIFY on `channel` (delivered when the
 * transaction commits, never for one that rolls back). A transaction-level advisory lock, held
 * from numbering until commit, makes numbers commit in order across every instance: credential
 * changes are rare, and in-order numbers are what let a watermark mean "every change up to here".
 */
export class PostgresCredentialChangeLog implements CredentialChangeLog {
  constructor(private readonly channel: string) {}

  async record(tx: Tx, clientId: string): Promise<NumberedChange> {
    const db = knexOf(tx);
    await db.raw("select pg_advisory_xact_lock(?)", [NUMBERING_LOCK_KEY]);
    const previous = await this.latest(tx);
    const [row] = await db<CredentialChangeRow>("credential_changes").insert({ client_id: clientId }).returning("seq");
    const seq = Number(row!.seq);
    // The changed credential carries its number, in its holder's row.
    await stampedRow(db, clientId).update({ change_seq: seq });
    await db.raw("select pg_notify(?, ?)", [this.channel, String(seq)]);
    return { seq, previous };
  }

  async latest(tx: Tx): Promise<number> {
    const row = await knexOf(tx)("credential_changes").max({ seq: "seq" }).first();
    return Number(row?.seq ?? 0);
  }

  async since(
    tx: Tx,
    after: number,
    limit: number,
  ): Promise<Array<{ seq: number; clientId: string; changedAt: Date }>> {
    const rows = await knexOf(tx)<CredentialChangeRow>("credential_changes")
      .where("seq", ">", after)
      .orderBy("seq")
      .limit(limit);
    return rows.map((r) => ({ seq: Number(r.seq), clientId: r.client_id, changedAt: new Date(r.changed_at) }));
  }

  /** Keeps the newest change whatever its age: `latest()` must never go back. */
  async prune(tx: Tx, before: Date): Promise<number> {
    const db = knexOf(tx);
    // RETURNING: the embedded driver does not report a row count for DELETE (it returned its raw result).
    const deleted = await db("credential_changes")
      .where("changed_at", "<", before)
      .where("seq", "<", db("credential_changes").max("seq"))
      .delete()
      .returning("seq");
    return deleted.length;
  }
}

/** The row that holds a credential id's state: an API user, a resource server, or a revoked access token (`jti:<jti>`). */
function stampedRow(db: Knex, id: string): Knex.QueryBuilder {
  const holder = credentialHolderOf(id);
  switch (holder) {
    case "API_USER":
      return db("api_users").where({ client_id: id });
    case "RESOURCE_SERVER":
      return db("resource_servers").where({ client_id: id });
    case "ACCESS_TOKEN":
      return db("revoked_access_tokens").where({ jti: jtiOfTokenCredential(id) });
  }
}

/** The NOTIFY channel of one deployment's schema (schemas keep test runs and deployments apart). */
export function credentialChangeChannel(schema: string): string {
  return `auth_credential_changes_${schema}`.slice(0, 63);
}
