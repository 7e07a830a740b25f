import crypto from "node:crypto";
import type { Knex } from "knex";
import { rethrowDbError } from "./db-errors.js";
import type { CompanyRow, TmcRow, UserRow } from "./tables.js";

/** TMCs, their companies and the user profiles under them. Functions take the query runner first. */
export async function insertTmc(db: Knex, name: string, maxApiUsers: number): Promise<TmcRow> {
  const [row] = await db<TmcRow>("tmcs")
    .insert({ id: crypto.randomUUID(), name, max_api_users: maxApiUsers })
    .returning("*");
  return row!;
}

export async function findTmc(db: Knex, tmcId: string): Promise<TmcRow | undefined> {
  return db<TmcRow>("tmcs").where({ id: tmcId }).first();
}

/** Locks the TMC row for the rest of the transaction: serialises limit checks per tenant. */
export async function lockTmc(trx: Knex.Transaction, tmcId: string): Promise<TmcRow | undefined> {
  return trx<TmcRow>("tmcs").where({ id: tmcId }).forUpdate().first();
}

export async function updateTmcLimit(db: Knex, tmcId: string, maxApiUsers: number): Promise<TmcRow | undefined> {
  const [row] = await db<TmcRow>("tmcs")
    .where({ id: tmcId })
    .update({ max_api_users: maxApiUsers, updated_at: db.fn.now() as unknown as Date })
    .returning("*");
  return row;
}

export async function insertCompany(db: Knex, tmcId: string, name: string): Promise<CompanyRow> {
  try {
    const [row] = await db<CompanyRow>("companies").insert({ id: crypto.randomUUID(), tmc_id: tmcId, name }).returning("*");
    return row!;
  } catch (error) {
    rethrowDbError(error);
  }
}

export async function findCompany(db: Knex, orgId: string): Promise<CompanyRow | undefined> {
  return db<CompanyRow>("companies").where({ id: orgId }).first();
}

export interface NewUser {
  companyId: string;
  tmcId: string;
  email: string;
  givenName: string;
  familyName: string;
  isActive: boolean;
}

export async function insertUser(db: Knex, user: NewUser): Promise<UserRow> {
  try {
    const [row] = await db<UserRow>("users")
      .insert({
        id: crypto.randomUUID(),
        company_id: user.companyId,
        tmc_id: user.tmcId,
        email: user.email,
        email_normalized: user.email.toLowerCase(),
        given_name: user.givenName,
        family_name: user.familyName,
        is_active: user.isActive,
      })
      .returning("*");
    return row!;
  } catch (error) {
    rethrowDbError(error, "A user with this email already exists in the TMC");
  }
}
