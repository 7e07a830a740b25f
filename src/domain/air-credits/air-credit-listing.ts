import { invalidArgument, notFound } from "../../errors/domain-error.js";
import type { ApiUserRole } from "../api-users/model.js";
import type { Clock } from "../shared/clock.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { CreditFilter, UnusedCredit } from "./model.js";
import type { UnusedCreditRepository } from "./ports.js";
import { airlineName, SUPPORTED_AIRLINES, transferableOn } from "./transferability.js";

/** Credits per page of the list (the spec does not say; docs/air-credits.md). */
export const CREDIT_PAGE_SIZE = 100;

/** Who calls the air-credit operations: from the verified access token. */
export interface AirCreditCaller {
  readonly clientId: string;
  readonly tmcId: string;
  readonly orgId: string | undefined;
  readonly role: ApiUserRole;
}

export interface ListCreditsQuery {
  readonly companyId: string;
  readonly filter: CreditFilter;
  readonly offset: number;
}

export interface CreditListing {
  readonly credits: readonly UnusedCredit[];
  readonly offset: number;
  readonly totalRecords: number;
  readonly fopLabels: readonly string[];
  readonly pccs: readonly string[];
  readonly legalEntityNames: readonly string[];
  readonly supportedAirlines: typeof SUPPORTED_AIRLINES;
}

const COMPANY_FIELD = "companyId.id";
const RANGE_FIELD = "companyCreditFilter.expiryDateRange";

/** What AirCreditListing is built from. */
export interface AirCreditListingDeps {
  readonly uow: UnitOfWork;
  readonly credits: UnusedCreditRepository;
  readonly clock: Clock;
}

/**
 * Spec 4.7: a company's transferable unused credits. Who may list: a TMC admin of the company's
 * TMC, or a company admin of that very company; for anyone else the company does not exist (404,
 * the same answer as for an unknown company), so no caller learns about another tenant.
 */
export class AirCreditListing {
  constructor(private readonly deps: AirCreditListingDeps) {}

  async list(caller: AirCreditCaller, query: ListCreditsQuery): Promise<CreditListing> {
    checkDateRange(query.filter);
    const companyNotFound = () => notFound("Company", [{ name: COMPANY_FIELD, value: query.companyId }]);
    if (!mayAccessCompany(caller, query.companyId)) throw companyNotFound();
    const scope = tenantScope(caller.tmcId);
    const tx = this.deps.uow.direct;
    if (!(await this.deps.credits.companyExists(tx, scope, query.companyId))) throw companyNotFound();
    const on = transferableOn(this.deps.clock);
    const [page, values] = await Promise.all([
      this.deps.credits.listTransferable(tx, scope, query.companyId, on, query.filter, {
        offset: query.offset,
        limit: CREDIT_PAGE_SIZE,
      }),
      this.deps.credits.transferableValues(tx, scope, query.companyId, on),
    ]);
    // The airline's name is one fact (SUPPORTED_AIRLINES), whatever an import wrote; the
    // reference requires it in every airlineInfo.
    const credits = page.credits.map((c) => ({ ...c, airlineName: airlineName(c.airlineCode) ?? c.airlineName }));
    return {
      credits,
      offset: query.offset,
      totalRecords: page.totalRecords,
      ...values,
      supportedAirlines: SUPPORTED_AIRLINES,
    };
  }
}

/** A TMC admin reaches every company of its TMC (checked by the scoped query); a company admin only its own. */
export function mayAccessCompany(caller: AirCreditCaller, companyId: string): boolean {
  if (caller.role === "TMC_ADMIN") return true;
  return caller.role === "COMPANY_ADMIN" && caller.orgId === companyId;
}

/** YYYY-MM-DD naming a real calendar day. */
export function isCalendarDate(value: string): boolean {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!match) return false;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day); // not Date.UTC, which reads years 0–99 as 1900–1999
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day && year >= 1;
}

function checkDateRange(filter: CreditFilter): void {
  const bad = (which: "expiryDateStart" | "expiryDateEnd", value: string) =>
    invalidArgument(`${RANGE_FIELD}.${which}.iso8601 must be an ISO 8601 date (YYYY-MM-DD) that exists`, [
      { name: `${RANGE_FIELD}.${which}.iso8601`, value },
    ]);
  if (filter.expiryFrom !== undefined && !isCalendarDate(filter.expiryFrom))
    throw bad("expiryDateStart", filter.expiryFrom);
  if (filter.expiryTo !== undefined && !isCalendarDate(filter.expiryTo)) throw bad("expiryDateEnd", filter.expiryTo);
  if (filter.expiryFrom !== undefined && filter.expiryTo !== undefined && filter.expiryFrom > filter.expiryTo) {
    throw invalidArgument(`${RANGE_FIELD}: expiryDateStart must not be after expiryDateEnd`, [
      { name: RANGE_FIELD, value: `${filter.expiryFrom} > ${filter.expiryTo}` },
    ]);
  }
}
