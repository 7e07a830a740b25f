import type { Knex } from "knex";

export interface TrustedIssuerRow {
  tmc_id: string;
  issuer: string;
  jwks_uri: string | null;
  jwks: { keys: unknown[] } | null;
  audience: string | null;
}

export async function upsertTrustedIssuer(db: Knex, row: TrustedIssuerRow): Promise<void> {
  await db("trusted_issuers")
    .insert({ ...row, jwks: row.jwks ? JSON.stringify(row.jwks) : null })
    .onConflict(["tmc_id", "issuer"])
    .merge();
}

export async function findTrustedIssuer(db: Knex, tmcId: string, issuer: string): Promise<TrustedIssuerRow | undefined> {
  return db<TrustedIssuerRow>("trusted_issuers").where({ tmc_id: tmcId, issuer }).first();
}
