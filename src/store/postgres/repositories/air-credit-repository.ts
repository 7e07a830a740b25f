import crypto from "node:crypto";
import { notFound } from "../../../errors/domain-error.js";
import type { NewAirCredit, NewPaymentSource } from "../../../domain/air-credits/model.js";
import type { AirCreditRepository } from "../../../domain/air-credits/ports.js";
import type { TenantScope } from "../../../domain/shared/tenant-scope.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { CompanyRow } from "../tables.js";
import { knexOf } from "../unit-of-work.js";

export class PostgresAirCreditRepository implements AirCreditRepository {
  async insertPaymentSource(tx: Tx, scope: TenantScope, source: NewPaymentSource): Promise<string> {
    await assertCompaniesOfTenant(tx, scope, [source.companyId]);
    const id = crypto.randomUUID();
    await knexOf(tx)("payment_sources").insert({
      id,
      company_id: source.companyId,
      fop_label: source.fopLabel,
      card_company: source.cardCompany ?? null,
      card_last4: source.cardLast4 ?? null,
      credit_usage_type: source.creditUsageType,
      transferable: source.transferable,
    });
    return id;
  }

  async insertCredits(tx: Tx, scope: TenantScope, credits: readonly NewAirCredit[]): Promise<number> {
    if (credits.length === 0) return 0;
    await assertCompaniesOfTenant(tx, scope, credits.map((c) => c.companyId));
    await knexOf(tx)("air_credits").insert(
      credits.map((c) => ({
        id: crypto.randomUUID(),
        company_id: c.companyId,
        payment_source_id: c.paymentSourceId,
        traveler_user_id: c.travelerUserId ?? null,
        supplier: c.supplier,
        pcc: c.pcc ?? null,
        airline_code: c.airlineCode,
        ticket_number: c.ticketNumber,
        source_pnr: c.sourcePnr ?? null,
        total_fare_amount: c.totalFareAmount,
        currency_code: c.currencyCode,
        issue_date: c.issueDate,
        expiry_date: c.expiryDate,
      })),
    );
    return credits.length;
  }
}

async function assertCompaniesOfTenant(tx: Tx, scope: TenantScope, companyIds: readonly string[]): Promise<void> {
  const wanted = [...new Set(companyIds)];
  const found = await knexOf(tx)<CompanyRow>("companies").whereIn("id", wanted).where({ tmc_id: scope.tmcId }).select("id");
  if (found.length !== wanted.length) throw notFound("Company");
}
