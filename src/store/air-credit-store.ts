import crypto from "node:crypto";
import type { Knex } from "knex";
import type { AirCreditRow, PaymentSourceRow } from "./tables.js";

export type NewPaymentSource = Omit<PaymentSourceRow, "id">;
export type NewAirCredit = Omit<AirCreditRow, "id" | "status">;

export async function insertPaymentSource(db: Knex, source: NewPaymentSource): Promise<PaymentSourceRow> {
  const [row] = await db<PaymentSourceRow>("payment_sources").insert({ id: crypto.randomUUID(), ...source }).returning("*");
  return row!;
}

export async function insertAirCredits(db: Knex, credits: readonly NewAirCredit[]): Promise<number> {
  if (credits.length === 0) return 0;
  await db("air_credits").insert(credits.map((c) => ({ id: crypto.randomUUID(), ...c })));
  return credits.length;
}
