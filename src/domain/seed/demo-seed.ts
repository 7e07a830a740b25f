import type { Knex } from "knex";
import type { ApiUserProvisioning } from "../api-users/api-user-provisioning.js";
import type { TenantService } from "../tenants/tenant-service.js";
import { insertAirCredits, insertPaymentSource } from "../../store/air-credit-store.js";

export interface DemoSeed {
  tmcId: string;
  orgId: string;
  userIds: string[];
  clientId: string;
  clientSecret: string;
  airCreditCount: number;
}

/** Demo data for the README quickstart: each run creates a fresh, independent demo tenant. */
export async function seedDemo(
  db: Knex,
  tenants: TenantService,
  provisioning: ApiUserProvisioning,
  requestId: string,
): Promise<DemoSeed> {
  const tmc = await tenants.createTmc("Demo Travel Management");
  const company = await tenants.createCompany(tmc.id, "Acme Corporation");
  const users = [
    await tenants.createUser({ orgId: company.id, email: "ada.lovelace@acme.example", givenName: "Ada", familyName: "Lovelace", isActive: true }),
    await tenants.createUser({ orgId: company.id, email: "alan.turing@acme.example", givenName: "Alan", familyName: "Turing", isActive: true }),
    await tenants.createUser({ orgId: company.id, email: "grace.hopper@acme.example", givenName: "Grace", familyName: "Hopper", isActive: false }),
  ];
  const corporateCard = await insertPaymentSource(db, {
    company_id: company.id,
    fop_label: "Corporate Amex",
    card_company: "AMEX",
    card_last4: "1005",
    credit_usage_type: "PERSONAL",
    transferable: true,
  });
  const today = new Date();
  const inMonths = (months: number) => new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() + months, 15)).toISOString().slice(0, 10);
  const airCreditCount = await insertAirCredits(db, [
    { company_id: company.id, payment_source_id: corporateCard.id, traveler_user_id: users[0]!.id, supplier: "SABRE", pcc: "A1B2", airline_code: "AA", ticket_number: "0017779139217", source_pnr: "MC5ONS", total_fare_amount: "412.30", currency_code: "USD", issue_date: inMonths(-2), expiry_date: inMonths(10) },
    { company_id: company.id, payment_source_id: corporateCard.id, traveler_user_id: users[1]!.id, supplier: "SABRE", pcc: "A1B2", airline_code: "UA", ticket_number: "0167779139218", source_pnr: "QX7PLM", total_fare_amount: "268.00", currency_code: "USD", issue_date: inMonths(-1), expiry_date: inMonths(11) },
    { company_id: company.id, payment_source_id: corporateCard.id, traveler_user_id: users[0]!.id, supplier: "AMADEUS", pcc: "NYC1S", airline_code: "DL", ticket_number: "0067779139219", source_pnr: "ZT3RVW", total_fare_amount: "159.99", currency_code: "USD", issue_date: inMonths(-3), expiry_date: inMonths(6) },
  ]);
  const admin = await provisioning.create({
    tmcId: tmc.id,
    orgId: undefined,
    role: "TMC_ADMIN",
    credentialType: "CLIENT_CREDENTIALS",
    actor: "operator",
    requestId,
  });
  return {
    tmcId: tmc.id,
    orgId: company.id,
    userIds: users.map((u) => u.id),
    clientId: admin.clientId,
    clientSecret: admin.clientSecret!,
    airCreditCount,
  };
}
