import type { AirCreditRepository } from "../air-credits/ports.js";
import type { Clock } from "../shared/clock.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { SeedApiUsers, SeedTenants } from "./ports.js";

export interface DemoSeed {
  tmcId: string;
  orgId: string;
  userIds: string[];
  clientId: string;
  clientSecret: string;
  airCreditCount: number;
}

/** Demo data for the README quickstart: each run creates a fresh, independent demo tenant. */
export class DemoSeeder {
  constructor(
    private readonly uow: UnitOfWork,
    private readonly tenants: SeedTenants,
    private readonly apiUsers: SeedApiUsers,
    private readonly airCredits: AirCreditRepository,
    private readonly clock: Clock,
  ) {}

  async seed(requestId: string): Promise<DemoSeed> {
    const tmc = await this.tenants.createTmc("Demo Travel Management");
    const company = await this.tenants.createCompany(tmc.id, "Acme Corporation");
    const users = [
      await this.tenants.createUser({ orgId: company.id, email: "ada.lovelace@acme.example", givenName: "Ada", familyName: "Lovelace", isActive: true }),
      await this.tenants.createUser({ orgId: company.id, email: "alan.turing@acme.example", givenName: "Alan", familyName: "Turing", isActive: true }),
      await this.tenants.createUser({ orgId: company.id, email: "grace.hopper@acme.example", givenName: "Grace", familyName: "Hopper", isActive: false }),
    ];
    const scope = tenantScope(tmc.id);
    const today = this.clock();
    const inMonths = (months: number) => new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() + months, 15)).toISOString().slice(0, 10);
    const airCreditCount = await this.uow.transaction(async (tx) => {
      const corporateCard = await this.airCredits.insertPaymentSource(tx, scope, {
        companyId: company.id,
        fopLabel: "Corporate Amex",
        cardCompany: "AMEX",
        cardLast4: "1005",
        creditUsageType: "PERSONAL",
        transferable: true,
      });
      const credit = (traveler: number, supplier: string, pcc: string, airlineCode: string, ticketNumber: string, sourcePnr: string, amount: string, issued: number, expires: number) => ({
        companyId: company.id,
        paymentSourceId: corporateCard,
        travelerUserId: users[traveler]!.id,
        supplier,
        pcc,
        airlineCode,
        ticketNumber,
        sourcePnr,
        totalFareAmount: amount,
        currencyCode: "USD",
        issueDate: inMonths(issued),
        expiryDate: inMonths(expires),
      });
      return this.airCredits.insertCredits(tx, scope, [
        credit(0, "SABRE", "A1B2", "AA", "0017779139217", "MC5ONS", "412.30", -2, 10),
        credit(1, "SABRE", "A1B2", "UA", "0167779139218", "QX7PLM", "268.00", -1, 11),
        credit(0, "AMADEUS", "NYC1S", "DL", "0067779139219", "ZT3RVW", "159.99", -3, 6),
      ]);
    });
    const admin = await this.apiUsers.create({
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
}
