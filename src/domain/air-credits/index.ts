import type { AuditRepository } from "../audit/ports.js";
import type { Clock } from "../shared/clock.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import { AirCreditImport } from "./air-credit-import.js";
import { AirCreditListing } from "./air-credit-listing.js";
import { AirCreditMigration } from "./air-credit-migration.js";
import type { CompanyDirectory, UnusedCreditRepository } from "./ports.js";

/** What the air-credit area is built from: the unit of work, its repositories (by the store's names) and the clock. */
export interface AirCreditAreaDeps {
  readonly uow: UnitOfWork;
  readonly repositories: {
    readonly tenants: CompanyDirectory;
    readonly airCredits: UnusedCreditRepository;
    readonly audit: AuditRepository;
  };
  readonly clock: Clock;
}

/** The air-credit area: a company's unused credits listed and migrated, and the operator's import. */
export function createAirCreditArea({ uow, repositories: r, clock }: AirCreditAreaDeps) {
  const credits = r.airCredits;
  return {
    listing: new AirCreditListing({ uow, credits, clock }),
    migration: new AirCreditMigration({ uow, credits, audit: r.audit, clock }),
    import: new AirCreditImport({ uow, companies: r.tenants, credits }),
  };
}
