import { notFound } from "../../errors/domain-error.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import { DEFAULT_MAX_API_USERS, type Company, type Tmc, type User } from "./model.js";
import type { TenantRepository } from "./ports.js";

/** What TenantService is built from. */
export interface TenantServiceDeps {
  readonly uow: UnitOfWork;
  readonly tenants: TenantRepository;
}

/** Tenants as the platform operator manages them: TMCs, their companies and users. */
export class TenantService {
  constructor(private readonly deps: TenantServiceDeps) {}

  createTmc(name: string, maxApiUsers = DEFAULT_MAX_API_USERS): Promise<Tmc> {
    return this.deps.tenants.createTmc(this.deps.uow.direct, name, maxApiUsers);
  }

  async setApiUserLimit(tmcId: string, maxApiUsers: number): Promise<Tmc> {
    const tmc = await this.deps.tenants.setApiUserLimit(this.deps.uow.direct, tenantScope(tmcId), maxApiUsers);
    if (!tmc) throw notFound("TMC", [{ name: "tmcId", value: tmcId }]);
    return tmc;
  }

  async createCompany(tmcId: string, name: string): Promise<Company> {
    const scope = tenantScope(tmcId);
    return this.deps.uow.transaction(async (tx) => {
      if (!(await this.deps.tenants.findTmc(tx, scope))) throw notFound("TMC", [{ name: "tmcId", value: tmcId }]);
      return this.deps.tenants.createCompany(tx, scope, name);
    });
  }

  async createUser(input: {
    orgId: string;
    email: string;
    givenName: string;
    familyName: string;
    isActive: boolean;
  }): Promise<User> {
    return this.deps.uow.transaction(async (tx) => {
      const scope = await this.deps.tenants.tenantOfCompany(tx, input.orgId);
      if (!scope) throw notFound("Company", [{ name: "orgId", value: input.orgId }]);
      const { orgId, ...user } = input;
      return this.deps.tenants.createUser(tx, scope, orgId, user);
    });
  }
}
