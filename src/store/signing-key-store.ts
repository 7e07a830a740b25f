import type { Knex } from "knex";

export interface SigningKeyRow {
  kid: string;
  alg: string;
  public_jwk: Record<string, unknown>;
  private_jwk_ciphertext: string;
  created_at: Date;
  retired_at: Date | null;
  not_after: Date | null;
}

/** Keys that may still have valid tokens: newest first. */
export async function listPublishedSigningKeys(db: Knex, now: Date): Promise<SigningKeyRow[]> {
  return db<SigningKeyRow>("signing_keys")
    .where((q) => q.whereNull("not_after").orWhere("not_after", ">", now))
    .orderBy("created_at", "desc")
    .orderBy("kid", "desc");
}

export async function insertSigningKey(db: Knex, row: Omit<SigningKeyRow, "created_at" | "retired_at" | "not_after">): Promise<void> {
  await db("signing_keys").insert(row);
}

/** Stops every current key from signing; each keeps verifying until notAfter. */
export async function retireSigningKeys(db: Knex, now: Date, notAfter: Date): Promise<void> {
  await db("signing_keys").whereNull("retired_at").update({ retired_at: now, not_after: notAfter });
}
