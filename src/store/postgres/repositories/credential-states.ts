import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { CredentialState } from "../../../domain/tokens/model.js";
import type { Knex } from "knex";
import { knexOf } from "../unit-of-work.js";

/**
 * The credential state of each known holder among `clientIds`, read from the table that holds
 * those credentials (API users, resource servers): its generation, none once the row is a
 * tombstone (revoked, removed), and the number of the change that made it so. Unknown ids are absent.
 */
export async function credentialStatesIn(
  tx: Tx,
  holders:
    | { readonly table: "api_users"; readonly tombstone: "revoked_at" }
    | { readonly table: "resource_servers"; readonly tombstone: "removed_at" },
  clientIds: readonly string[],
): Promise<Map<string, CredentialState>> {
  const rows = (await knexOf(tx)(holders.table)
    .whereIn("client_id", [...clientIds])
    .select("client_id", "credential_generation", `${holders.tombstone} as tombstone`, "change_seq")) as Array<{
    client_id: string;
    credential_generation: number;
    tombstone: unknown;
    change_seq: number | string;
  }>;
  return new Map(
    rows.map((r) => [
      r.client_id,
      { generation: r.tombstone ? undefined : r.credential_generation, changeSeq: Number(r.change_seq) },
    ]),
  );
}

/** The columns a rotation sets on a holder's row (API user, resource server): the new secret's hash and generation, now. */
export function rotatedCredentialColumns(db: Knex, credential: { secretHash: Buffer; generation: number }) {
  return {
    secret_hash: credential.secretHash,
    credential_generation: credential.generation,
    rotated_at: db.fn.now() as unknown as Date,
    updated_at: db.fn.now() as unknown as Date,
  };
}
