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
  /** ISO 8601 dates (YYYY-MM-DD). */
  readonly issueDate: string;
  readonly expiryDate: string;
}
