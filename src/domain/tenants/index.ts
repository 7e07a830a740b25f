import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { TenantRepository } from "./ports.js";
import { TenantService } from "./tenant-service.js";

/** What the tenants area is built from: the unit of work and its repository, by the store's name. */
export interface TenantAreaDeps {
  readonly uow: UnitOfWork;
  readonly repositories: { readonly tenants: TenantRepository };
}

/** The tenants area: TMCs, their companies and users, as the operator and the seed create them. */
export function createTenantArea({ uow, repositories }: TenantAreaDeps) {
  return { tenants: new TenantService({ uow, tenants: repositories.tenants }) };
}
