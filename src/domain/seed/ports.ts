import type { CreateApiUserCommand, CreatedApiUser } from "../api-users/model.js";
import type { Company, Tmc, User } from "../tenants/model.js";

/** The tenant operations the seed needs (the tenants area's TenantService). */
export interface SeedTenants {
  createTmc(name: string): Promise<Tmc>;
  createCompany(tmcId: string, name: string): Promise<Company>;
  createUser(input: {
    orgId: string;
    email: string;
    givenName: string;
    familyName: string;
    isActive: boolean;
  }): Promise<User>;
}

/** The API-user provisioning the seed needs (the api-users area's ApiUserProvisioning). */
export interface SeedApiUsers {
  create(command: CreateApiUserCommand): Promise<CreatedApiUser>;
}
