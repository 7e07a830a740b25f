import type { ImportedCredit } from "../air-credits/model.js";
import type { UnusedCreditRepository } from "../air-credits/ports.js";
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

/** What DemoSeeder is built from. */
export interface DemoSeederDeps {
  readonly uow: UnitOfWork;
  readonly tenants: SeedTenants;
  readonly apiUsers: SeedApiUsers;
  readonly airCredits: UnusedCreditRepository;
  readonly clock: Clock;
}

/** Demo data for `cli seed` (README, docs/scim.md and docs/air-credits.md walk-throughs): each run creates a fresh, independent demo tenant. */
export class DemoSeeder {
  constructor(private readonly deps: DemoSeederDeps) {}

  async seed(requestId: string): Promise<DemoSeed> {
    const tmc = await this.deps.tenants.createTmc("Demo Travel Management");
    const company = await this.deps.tenants.createCompany(tmc.id, "Acme Corporation");
    const users = [
      await this.deps.tenants.createUser({
        orgId: company.id,
        email: "ada.lovelace@acme.example",
        givenName: "Ada",
        familyName: "Lovelace",
        isActive: true,
      }),
      await this.deps.tenants.createUser({
        orgId: company.id,
        email: "alan.turing@acme.example",
        givenName: "Alan",
        familyName: "Turing",
        isActive: true,
      }),
      await this.deps.tenants.createUser({
        orgId: company.id,
        email: "grace.hopper@acme.example",
        givenName: "Grace",
        familyName: "Hopper",
        isActive: false,
      }),
    ];
    const scope = tenantScope(tmc.id);
    const today = this.deps.clock();
    const inMonths = (months: number) =>
      new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() + months, 15)).toISOString().slice(0, 10);
    const airCreditCount = await this.deps.uow.transaction(async (tx) => {
      const { created } = await this.deps.airCredits.upsertCredits(tx, scope, company.id, demoCredits(inMonths));
      return created;
    });
    const admin = await this.deps.apiUsers.create({
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

/**
 * A realistic demo portfolio for the air-credit operations: several airlines (one, WN, that does
 * not allow transfers), suppliers, PCCs, FOP labels and legal entities, plus credits the list
 * leaves out (expired, used, already a company credit).
 */
function demoCredits(inMonths: (months: number) => string): ImportedCredit[] {
  const row = (
    n: number,
    passenger: [string, string, string],
    airlineCode: string,
    airlineName: string,
    source: string,
    pcc: string,
    amount: string,
    currencyCode: string,
    issued: number,
    expires: number,
    fopLabel: string,
    fopCardAccessType: string,
    legalEntityName: string,
    extra: Partial<ImportedCredit> = {},
  ): ImportedCredit => ({
    paymentSourceId: "",
    ticketNumber: `${["001", "016", "006", "125", "220", "057", "526"][n % 7]}77791392${String(10 + n).padStart(2, "0")}`,
    sourcePnr: `PNR${String(100 + n)}`.slice(0, 6),
    spotnanaPnr: String(2345600 + n),
    airlineCode,
    airlineName,
    totalFare: { amount, currencyCode },
    issueDate: inMonths(issued),
    expiryDate: inMonths(expires),
    usedDate: undefined,
    departureDate: inMonths(issued + 1),
    segmentsAvailable: "ALL_OPEN",
    passengerName: { given: passenger[0], family1: passenger[1] },
    departureCountry: "USA",
    arrivalCountry: airlineCode === "BA" || airlineCode === "LH" || airlineCode === "AF" ? "GBR" : "USA",
    ticketType: "ETICKET",
    pcc,
    status: "OPEN",
    source,
    tripId: String(7000000 + n),
    redeemVia: "REDEEM_VIA_OBT",
    sourceOfTruth: "SPOTNANA",
    owningPcc: pcc,
    creditUsageType: "PERSONAL",
    email: passenger[2],
    fopInfo: {
      paymentMethod: "CREDIT_CARD",
      paymentSourceType: "CARD",
      card: {
        company: fopLabel.includes("Amex") ? "AMEX" : fopLabel.includes("Visa") ? "VISA" : "MASTERCARD",
        number: "****1005",
        label: fopLabel,
      },
    },
    fopLabel,
    previousTicket: undefined,
    fopCardAccessType,
    legalEntityName,
    ...extra,
  });
  const ada: [string, string, string] = ["Ada", "Lovelace", "ada.lovelace@acme.example"];
  const alan: [string, string, string] = ["Alan", "Turing", "alan.turing@acme.example"];
  const grace: [string, string, string] = ["Grace", "Hopper", "grace.hopper@acme.example"];
  const us = "Acme Corporation Inc.";
  const uk = "Acme UK Ltd";
  return [
    row(
      0,
      ada,
      "AA",
      "American Airlines",
      "SABRE",
      "A1B2",
      "412.30",
      "USD",
      -2,
      10,
      "Corporate Amex",
      "CARD_ACCESS_CORPORATE",
      us,
    ),
    row(
      1,
      alan,
      "UA",
      "United Airlines",
      "SABRE",
      "A1B2",
      "268.00",
      "USD",
      -1,
      11,
      "Personal Visa",
      "CARD_ACCESS_PERSONAL",
      us,
    ),
    row(
      2,
      ada,
      "DL",
      "Delta Air Lines",
      "AMADEUS",
      "NYC1S",
      "159.99",
      "USD",
      -3,
      6,
      "Corporate Amex",
      "CARD_ACCESS_CORPORATE",
      us,
    ),
    row(
      3,
      grace,
      "BA",
      "British Airways",
      "AMADEUS",
      "LON2A",
      "845.10",
      "GBP",
      -4,
      8,
      "Central Lodge Card",
      "CARD_ACCESS_CENTRAL",
      uk,
    ),
    row(
      4,
      alan,
      "LH",
      "Lufthansa",
      "NDC",
      "FRA7L",
      "612.45",
      "EUR",
      -2,
      9,
      "Personal Mastercard",
      "CARD_ACCESS_PERSONAL",
      uk,
    ),
    row(
      5,
      ada,
      "AF",
      "Air France",
      "NDC",
      "FRA7L",
      "377.80",
      "EUR",
      -1,
      12,
      "Personal Visa",
      "CARD_ACCESS_PERSONAL",
      uk,
    ),
    row(
      6,
      grace,
      "AA",
      "American Airlines",
      "TRAVEL_FUSION",
      "0K7L",
      "129.00",
      "USD",
      -5,
      3,
      "Central Lodge Card",
      "CARD_ACCESS_CENTRAL",
      us,
    ),
    row(
      7,
      alan,
      "UA",
      "United Airlines",
      "SABRE",
      "NYC1S",
      "1204.50",
      "USD",
      -2,
      14,
      "Corporate Amex",
      "CARD_ACCESS_CORPORATE",
      us,
    ),
    row(
      8,
      ada,
      "DL",
      "Delta Air Lines",
      "SABRE",
      "A1B2",
      "98.40",
      "USD",
      -6,
      2,
      "Personal Mastercard",
      "CARD_ACCESS_PERSONAL",
      us,
    ),
    // Left out of the list: an airline without transfers, an expired, a used and a company credit.
    row(
      9,
      alan,
      "WN",
      "Southwest Airlines",
      "SOUTHWEST",
      "A1B2",
      "210.00",
      "USD",
      -1,
      11,
      "Personal Visa",
      "CARD_ACCESS_PERSONAL",
      us,
    ),
    row(
      10,
      ada,
      "AA",
      "American Airlines",
      "SABRE",
      "A1B2",
      "301.15",
      "USD",
      -14,
      -1,
      "Corporate Amex",
      "CARD_ACCESS_CORPORATE",
      us,
    ),
    row(
      11,
      grace,
      "BA",
      "British Airways",
      "AMADEUS",
      "LON2A",
      "455.00",
      "GBP",
      -3,
      9,
      "Central Lodge Card",
      "CARD_ACCESS_CENTRAL",
      uk,
      { status: "USED", usedDate: inMonths(-1) },
    ),
    row(
      12,
      alan,
      "LH",
      "Lufthansa",
      "NDC",
      "FRA7L",
      "530.25",
      "EUR",
      -2,
      10,
      "Corporate Amex",
      "CARD_ACCESS_CORPORATE",
      uk,
      { creditUsageType: "COMPANY" },
    ),
  ];
}
