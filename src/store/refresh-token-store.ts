import type { Knex } from "knex";

export interface RefreshTokenRow {
  id: string;
  token_hash: Buffer;
  family_id: string;
  client_id: string;
  tmc_id: string;
  subject: string;
  subject_kind: "CLIENT" | "USER";
  scope: string;
  audience: string;
  bound_credentials: Array<[string, number]>;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
  revoked_at: Date | null;
}

export async function insertRefreshToken(db: Knex, row: Omit<RefreshTokenRow, "created_at" | "used_at" | "revoked_at">): Promise<void> {
  await db("refresh_tokens").insert({ ...row, bound_credentials: JSON.stringify(row.bound_credentials) });
}

/** Locks the token's row for the rest of the transaction: two concurrent uses cannot both win. */
export async function lockRefreshToken(trx: Knex.Transaction, tokenHash: Buffer): Promise<RefreshTokenRow | undefined> {
  return trx<RefreshTokenRow>("refresh_tokens").where({ token_hash: tokenHash }).forUpdate().first();
}

export async function markRefreshTokenUsed(db: Knex, id: string, now: Date): Promise<void> {
  await db("refresh_tokens").where({ id }).update({ used_at: now });
}

export async function revokeRefreshTokenFamily(db: Knex, familyId: string, now: Date): Promise<number> {
  return db("refresh_tokens").where({ family_id: familyId }).whereNull("revoked_at").update({ revoked_at: now });
}
