import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { SecurityEventPositions } from "../../../domain/tokens/ports.js";
import type { SsfAcknowledgedSetRow, SsfPollPositionRow } from "../tables.js";
import { knexOf } from "../unit-of-work.js";

/** Resource servers' SET delivery positions (ssf_poll_positions, ssf_acknowledged_sets). */
export class PostgresSecurityEventPositions implements SecurityEventPositions {
  /**
   * NOWAIT: a poll that meets the row locked (a poll of the same receiver on another instance)
   * fails at once (55P03) instead of parking its pooled connection; the unit of work retries it
   * outside the transaction. The row is created only when missing, so an existing one is never
   * waited on by the insert either.
   */
  async lock(
    tx: Tx,
    receiverId: string,
    initial: number,
  ): Promise<{ readonly through: number; readonly acknowledged: ReadonlySet<number> }> {
    const db = knexOf(tx);
    const locked = () =>
      db<SsfPollPositionRow>("ssf_poll_positions")
        .where({ resource_server_id: receiverId })
        .forUpdate()
        .noWait()
        .first();
    let row = await locked();
    if (!row) {
      await db<SsfPollPositionRow>("ssf_poll_positions")
        .insert({ resource_server_id: receiverId, acknowledged_through: initial })
        .onConflict("resource_server_id")
        .ignore();
      row = await locked();
    }
    const acknowledged = await db<SsfAcknowledgedSetRow>("ssf_acknowledged_sets")
      .where({ resource_server_id: receiverId })
      .select("seq");
    return {
      through: Number(row!.acknowledged_through),
      acknowledged: new Set(acknowledged.map((r) => Number(r.seq))),
    };
  }

  async acknowledge(tx: Tx, receiverId: string, seqs: readonly number[]): Promise<void> {
    if (seqs.length === 0) return;
    await knexOf(tx)<SsfAcknowledgedSetRow>("ssf_acknowledged_sets")
      .insert(seqs.map((seq) => ({ resource_server_id: receiverId, seq })))
      .onConflict(["resource_server_id", "seq"])
      .ignore();
  }

  async advance(tx: Tx, receiverId: string, through: number): Promise<void> {
    const db = knexOf(tx);
    await db<SsfPollPositionRow>("ssf_poll_positions")
      .where({ resource_server_id: receiverId })
      .update({ acknowledged_through: through, updated_at: db.fn.now() });
    await db<SsfAcknowledgedSetRow>("ssf_acknowledged_sets")
      .where({ resource_server_id: receiverId })
      .where("seq", "<=", through)
      .delete();
  }
}
