import crypto from "node:crypto";
import { notFound } from "../../../errors/domain-error.js";
import type { TenantScope } from "../../../domain/shared/tenant-scope.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { Company, NewUser, Tmc, User } from "../../../domain/tenants/model.js";
import type { EmailLookup, TenantRepository, TmcWithUsage } from "../../../domain/tenants/ports.js";
import { pageWithTotal } from "../paging.js";
import { toCount, type CompanyRow, type TmcRow, type UserRow } from "../tables.js";
import { knexOf, rethrowDbError, tableIn } from "../unit-of-work.js";

export class PostgresTenantRepository implements TenantRepository {
  async createTmc(tx: Tx, name: string, maxApiUsers: number): Promise<Tmc> {
    const [row] = await knexOf(tx)<TmcRow>("tmcs")
      .insert({ id: crypto.randomUUID(), name, max_api_users: maxApiUsers })
      .returning("*");
    return toTmc(row!);
  }

  async listTmcs(tx: Tx, page: { limit: number; offset: number }): Promise<{ tmcs: TmcWithUsage[]; total: number }> {
    const db = knexOf(tx);
    // Byte order (C collation) of the name, the same on every database's default collation.
    const { rows, total } = await pageWithTotal<TmcRow & { active_api_users: unknown }>(db, {
      count: db("tmcs"),
      page: db("tmcs as t")
        .select(
          "t.*",
          db.raw(
            `(select count(*) from ${tableIn(tx, "api_users")} a where a.tmc_id = t.id and a.revoked_at is null) as active_api_users`,
          ),
        )
        .orderByRaw('t.name collate "C", t.id')
        .limit(page.limit)
        .offset(page.offset),
      order: 'page.name collate "C", page.id',
      present: "id",
    });
    return { tmcs: rows.map((r) => ({ ...toTmc(r), activeApiUsers: toCount(r.active_api_users) })), total };
  }

  async findTmc(tx: Tx, scope: TenantScope): Promise<Tmc | undefined> {
    const row = await knexOf(tx)<TmcRow>("tmcs").where({ id: scope.tmcId }).first();
    return row && toTmc(row);
  }

  async lockTmc(tx: Tx, scope: TenantScope): Promise<Tmc | undefined> {
    const row = await knexOf(tx)<TmcRow>("tmcs").where({ id: scope.tmcId }).forUpdate().noWait().first();
    return row && toTmc(row);
  }

  async setApiUserLimit(tx: Tx, scope: TenantScope, maxApiUsers: number): Promise<Tmc | undefined> {
    const db = knexOf(tx);
    const [row] = await db<TmcRow>("tmcs")
      .where({ id: scope.tmcId })
      .update({ max_api_users: maxApiUsers, updated_at: db.fn.now() as unknown as Date })
      .returning("*");
    return row && toTmc(row);
  }

  async createCompany(tx: Tx, scope: TenantScope, name: string): Promise<Company> {
    try {
      const [row] = await knexOf(tx)<CompanyRow>("companies")
        .insert({ id: crypto.randomUUID(), tmc_id: scope.tmcId, name })
        .returning("*");
      return toCompany(row!);
    } catch (error) {
      rethrowDbError(error);
    }
  }

  async findCompany(tx: Tx, scope: TenantScope, companyId: string): Promise<Company | undefined> {
    const row = await knexOf(tx)<CompanyRow>("companies").where({ id: companyId, tmc_id: scope.tmcId }).first();
    return row && toCompany(row);
  }

  async tenantOfCompany(tx: Tx, companyId: string): Promise<TenantScope | undefined> {
    const row = await knexOf(tx)<CompanyRow>("companies").where({ id: companyId }).first("tmc_id");
    return row && { tmcId: row.tmc_id };
  }

  async createUser(tx: Tx, scope: TenantScope, companyId: string, user: NewUser): Promise<User> {
    const db = knexOf(tx);
    const company = await db<CompanyRow>("companies").where({ id: companyId, tmc_id: scope.tmcId }).first("id");
    if (!company) throw notFound("Company", [{ name: "orgId", value: companyId }]);
    try {
      const [row] = await db<UserRow>("users")
        .insert({
          id: crypto.randomUUID(),
          company_id: companyId,
          tmc_id: scope.tmcId,
          email: user.email,
          email_normalized: user.email.toLowerCase(),
          given_name: user.givenName,
          family_name: user.familyName,
          is_active: user.isActive,
        })
        .returning("*");
      return toUser(row!);
    } catch (error) {
      rethrowDbError(error, "A user with this email already exists in the company");
    }
  }

  async findActiveUser(tx: Tx, scope: TenantScope, userId: string): Promise<User | undefined> {
    const row = await knexOf(tx)<UserRow>("users").where({ tmc_id: scope.tmcId, id: userId, is_active: true }).first();
    return row && toUser(row);
  }

  async findActiveUsersByEmail(tx: Tx, scope: TenantScope, email: string, options: EmailLookup): Promise<User[]> {
    // userName is unique per company (users_scim migration), so one email may name users of several companies of the TMC.
    const query = knexOf(tx)<UserRow>("users").where({
      tmc_id: scope.tmcId,
      email_normalized: email.toLowerCase(),
      is_active: true,
    });
    // The company's own user is never cut off by the limit, however many companies share the email.
    if (options.companyFirst !== undefined) query.orderByRaw("(company_id = ?) desc", [options.companyFirst]);
    const rows = await query.orderBy("id").limit(options.limit);
    return rows.map(toUser);
  }
}

function toTmc(row: TmcRow): Tmc {
  return { id: row.id, name: row.name, maxApiUsers: row.max_api_users };
}

function toCompany(row: CompanyRow): Company {
  return { id: row.id, tmcId: row.tmc_id, name: row.name };
}

function toUser(row: UserRow): User {
  return {
    id: row.id,
    companyId: row.company_id,
    tmcId: row.tmc_id,
    email: row.email,
    givenName: row.given_name,
    familyName: row.family_name,
    isActive: row.is_active,
  };
}
