import type { UnusedCreditRepository } from "../air-credits/ports.js";
import type { Clock } from "../shared/clock.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import { DemoSeeder } from "./demo-seed.js";
import type { SeedApiUsers, SeedTenants } from "./ports.js";

/** What the seed area is built from: the tenants' and API users' services, the credits' repository, the clock. */
export interface SeedAreaDeps {
  readonly uow: UnitOfWork;
  readonly repositories: { readonly airCredits: UnusedCreditRepository };
  readonly tenants: SeedTenants;
  /** API-user provisioning. */
  readonly provisioning: SeedApiUsers;
  readonly clock: Clock;
}

/** The seed area: the demo data set the operator's `seed` creates. */
export function createSeedArea({ uow, repositories, tenants, provisioning, clock }: SeedAreaDeps) {
  return {
    seeder: new DemoSeeder({ uow, tenants, apiUsers: provisioning, airCredits: repositories.airCredits, clock }),
  };
}
