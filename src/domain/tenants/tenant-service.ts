import type { Knex } from "knex";
import { notFound } from "../errors.js";
import { findCompany, findTmc, insertCompany, insertTmc, insertUser, updateTmcLimit } from "../../store/tenant-store.js";
import type { CompanyRow, TmcRow, UserRow } from "../../store/tables.js";

/** Spec section 8: five active API users per TMC unless the operator raises it. */
export const DEFAULT_MAX_API_USERS = 5;

/** Tenants as the platform operator manages them: TMCs, their companies and users. */
export class TenantService {
  constructor(private readonly db: Knex) {}

  createTmc(name: string, maxApiUsers = DEFAULT_MAX_API_USERS): Promise<TmcRow> {
    return insertTmc(this.db, name, maxApiUsers);
  }

  async setApiUserLimit(tmcId: string, maxApiUsers: number): Promise<TmcRow> {
    const tmc = await updateTmcLimit(this.db, tmcId, maxApiUsers);
    if (!tmc) throw notFound("TMC", [{ name: "tmcId", value: tmcId }]);
    return tmc;
  }

  async createCompany(tmcId: string, name: string): Promise<CompanyRow> {
    if (!(await findTmc(this.db, tmcId))) throw notFound("TMC", [{ name: "tmcId", value: tmcId }]);
    return insertCompany(this.db, tmcId, name);
  }

  async createUser(input: { orgId: string; email: string; givenName: string; familyName: string; isActive: boolean }): Promise<UserRow> {
    const company = await findCompany(this.db, input.orgId);
    if (!company) throw notFound("Company", [{ name: "orgId", value: input.orgId }]);
    return insertUser(this.db, {
      companyId: company.id,
      tmcId: company.tmc_id,
      email: input.email,
      givenName: input.givenName,
      familyName: input.familyName,
      isActive: input.isActive,
    });
  }
}
