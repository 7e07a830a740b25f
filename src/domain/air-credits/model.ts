/** A form of payment of a company whose unused air credits may be migrated. */
export interface NewPaymentSource {
  readonly companyId: string;
  readonly fopLabel: string;
  readonly cardCompany: string | undefined;
  readonly cardLast4: string | undefined;
  readonly creditUsageType: "PERSONAL" | "COMPANY";
  readonly transferable: boolean;
}

/** An unused air credit (a ticket paid for and not flown). Amounts are decimal strings, never floats. */
export interface NewAirCredit {
  readonly companyId: string;
  readonly paymentSourceId: string;
  readonly travelerUserId: string | undefined;
  readonly supplier: string;
  readonly pcc: string | undefined;
  readonly airlineCode: string;
  readonly ticketNumber: string;
  readonly sourcePnr: string | undefined;
  readonly totalFareAmount: string;
  readonly currencyCode: string;
  /** ISO 8601 dates (YYYY-MM-DD, midnight UTC) or instants with Z or an offset. */
  readonly issueDate: string;
  readonly expiryDate: string;
}

export type CreditUsageType = "PERSONAL" | "COMPANY";
export type CreditStatus = "OPEN" | "USED" | "RESERVED" | "STATUS_UNKNOWN";

/** Reference Name object of the passenger. */
export interface PassengerName {
  readonly given: string;
  readonly family1: string;
  readonly family2?: string;
  readonly middle?: string;
  readonly suffix?: string;
  readonly preferred?: string;
}

/** An amount as a decimal string ("412.30"), never a float, with its ISO 4217 currency. */
export interface Amount {
  readonly amount: string;
  readonly currencyCode: string;
}

/**
 * An unused credit as the v3 API shows it (reference UnusedCreditInfo). Dates are instants in
 * UTC, ISO 8601 (the reference's DateTimeOffset: 2031-01-01T04:30:00Z; an import's date alone is
 * its midnight UTC); enum-valued fields hold the reference's enum strings.
 */
export interface UnusedCredit {
  readonly paymentSourceId: string;
  readonly companyId: string;
  readonly ticketNumber: string;
  readonly sourcePnr: string | undefined;
  readonly spotnanaPnr: string | undefined;
  readonly airlineCode: string;
  readonly airlineName: string | undefined;
  readonly totalFare: Amount;
  readonly issueDate: string;
  readonly expiryDate: string;
  readonly usedDate: string | undefined;
  readonly departureDate: string | undefined;
  readonly segmentsAvailable: string | undefined;
  readonly passengerName: PassengerName | undefined;
  readonly departureCountry: string | undefined;
  readonly arrivalCountry: string | undefined;
  readonly ticketType: string;
  readonly pcc: string | undefined;
  readonly status: CreditStatus;
  /** ThirdPartySource; the list's `supplier` filter matches it. */
  readonly source: string;
  readonly tripId: string | undefined;
  readonly redeemVia: string | undefined;
  readonly sourceOfTruth: string | undefined;
  readonly owningPcc: string | undefined;
  readonly creditUsageType: CreditUsageType;
  readonly email: string | undefined;
  /** Reference UnusedCreditFop object as imported (card numbers masked). */
  readonly fopInfo: Readonly<Record<string, unknown>> | undefined;
  readonly fopLabel: string | undefined;
  readonly previousTicket: string | undefined;
  readonly fopCardAccessType: string | undefined;
  readonly legalEntityName: string | undefined;
}

/** A credit to import for a company: the traveler is found by `email` among the company's users. */
export type ImportedCredit = Omit<UnusedCredit, "companyId">;

/** The list's filters, normalised: an empty list or undefined means "any". AND-combined. */
export interface CreditFilter {
  readonly suppliers: readonly string[];
  readonly airlineCodes: readonly string[];
  /** Inclusive YYYY-MM-DD bounds, on the expiry instant's calendar day in UTC. */
  readonly expiryFrom: string | undefined;
  readonly expiryTo: string | undefined;
  readonly fopLabels: readonly string[];
  readonly pccs: readonly string[];
  readonly fopCardAccessTypes: readonly string[];
  readonly legalEntityNames: readonly string[];
}

/** What makes a credit transferable on a given day (see transferability.ts). */
export interface TransferableOn {
  /** Today in UTC, YYYY-MM-DD: credits expiring before it are not transferable. */
  readonly today: string;
  readonly airlineCodes: readonly string[];
}

export interface CreditPage {
  readonly credits: readonly UnusedCredit[];
  readonly totalRecords: number;
}

export interface TransferableValues {
  readonly fopLabels: readonly string[];
  readonly pccs: readonly string[];
  readonly legalEntityNames: readonly string[];
}

/** A credit of a payment source as the migration sees it, locked for update. */
export interface LockedCredit {
  readonly companyId: string;
  readonly status: CreditStatus;
  readonly expiryDate: string;
  readonly airlineCode: string;
  readonly creditUsageType: CreditUsageType;
}
