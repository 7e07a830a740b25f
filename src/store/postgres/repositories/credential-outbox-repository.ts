import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { CredentialOutbox } from "../../../domain/tokens/ports.js";
import type { CredentialOutboxRow } from "../tables.js";
import { knexOf } from "../unit-of-work.js";

export class PostgresCredentialOutbox implements CredentialOutbox {
  async add(tx: Tx, clientId: string, changedAt: Date): Promise<void> {
    await knexOf(tx)("credential_outbox").insert({ client_id: clientId, changed_at: changedAt }).onConflict("client_id").merge();
  }

  async pending(tx: Tx): Promise<Array<{ clientId: string; changedAt: Date }>> {
    const rows = await knexOf(tx)<CredentialOutboxRow>("credential_outbox").select("client_id", "changed_at");
    return rows.map((r) => ({ clientId: r.client_id, changedAt: r.changed_at }));
  }

  async remove(tx: Tx, entry: { clientId: string; changedAt: Date }): Promise<void> {
    await knexOf(tx)("credential_outbox").where({ client_id: entry.clientId, changed_at: entry.changedAt }).delete();
  }
}
