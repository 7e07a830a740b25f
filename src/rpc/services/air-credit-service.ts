import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  AirCreditService,
  type ListCompanyTransferableUnusedCreditsRequest,
  type MigrateCompanyCreditsRequest,
} from "../../../gen/travel/aircredit/v3/air_credit_pb.js";
import type { AirCreditCaller, AirCreditListing } from "../../domain/air-credits/air-credit-listing.js";
import type { AirCreditMigration } from "../../domain/air-credits/air-credit-migration.js";
import type { Principal } from "../../domain/tokens/model.js";
import { callerOf } from "../caller.js";
import { creditFilter, listResponse, migrateResponse } from "../mappers/air-credit-mappers.js";
import { requestInfoOf } from "../request-context.js";
import { defineArea } from "../area.js";

export interface AirCreditDomain {
  readonly listing: AirCreditListing;
  readonly migration: AirCreditMigration;
}

/** Translates AirCreditService RPCs to the domain; the interceptor has checked token, scope and the request's rules. */
export class AirCreditServiceHandler implements ServiceImpl<typeof AirCreditService> {
  constructor(private readonly domain: AirCreditDomain) {}

  async listCompanyTransferableUnusedCredits(req: ListCompanyTransferableUnusedCreditsRequest, ctx: HandlerContext) {
    const listing = await this.domain.listing.list(airCreditCaller(callerOf(ctx)), {
      companyId: (req.companyId?.id ?? "").toLowerCase(),
      filter: creditFilter(req.companyCreditFilter),
      offset: req.offset,
    });
    return listResponse(listing);
  }

  async migrateCompanyCredits(req: MigrateCompanyCreditsRequest, ctx: HandlerContext) {
    const outcomes = await this.domain.migration.migrate(
      airCreditCaller(callerOf(ctx)),
      req.paymentSourceIds,
      req.updateCreditUsageTypeTo,
      requestInfoOf(ctx.values).requestId,
    );
    return migrateResponse(outcomes);
  }
}

/** The air-credit area: AirCreditService on the public face. */
export const airCreditArea = defineArea({
  service: AirCreditService,
  face: "public",
  handler: (domain: { readonly airCredits: AirCreditDomain }) => new AirCreditServiceHandler(domain.airCredits),
});

function airCreditCaller(principal: Principal): AirCreditCaller {
  return { clientId: principal.clientId, tmcId: principal.tmcId, orgId: principal.orgId, role: principal.role };
}
