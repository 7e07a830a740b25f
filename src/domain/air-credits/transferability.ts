import type { Clock } from "../shared/clock.js";
import type { CreditUsageType, LockedCredit, TransferableOn } from "./model.js";

/**
 * What makes an unused credit transferable (the spec is silent; docs/air-credits.md):
 *  - its status is OPEN (not USED, RESERVED or unknown);
 *  - it has not expired: its expiry date is today or later, today taken in UTC;
 *  - it is not a company credit already (creditUsageType is not COMPANY);
 *  - its airline allows credits to change hands (SUPPORTED_AIRLINES, listed in every answer as
 *    supportedAirlines).
 */
export const SUPPORTED_AIRLINES: ReadonlyArray<{ readonly airlineCode: string; readonly airlineName: string }> = [
  { airlineCode: "AA", airlineName: "American Airlines" },
  { airlineCode: "AC", airlineName: "Air Canada" },
  { airlineCode: "AF", airlineName: "Air France" },
  { airlineCode: "AS", airlineName: "Alaska Airlines" },
  { airlineCode: "B6", airlineName: "JetBlue Airways" },
  { airlineCode: "BA", airlineName: "British Airways" },
  { airlineCode: "DL", airlineName: "Delta Air Lines" },
  { airlineCode: "KL", airlineName: "KLM Royal Dutch Airlines" },
  { airlineCode: "LH", airlineName: "Lufthansa" },
  { airlineCode: "QF", airlineName: "Qantas" },
  { airlineCode: "UA", airlineName: "United Airlines" },
];

const SUPPORTED_CODES = SUPPORTED_AIRLINES.map((a) => a.airlineCode);

export function airlineName(code: string): string | undefined {
  return SUPPORTED_AIRLINES.find((a) => a.airlineCode === code)?.airlineName;
}

/** Today in UTC as YYYY-MM-DD. */
export function utcToday(clock: Clock): string {
  return clock().toISOString().slice(0, 10);
}

/** The transferability rule's parameters for today, as the repository applies them. */
export function transferableOn(clock: Clock): TransferableOn {
  return { today: utcToday(clock), airlineCodes: SUPPORTED_CODES };
}

/** Why one credit of a payment source cannot be migrated, or undefined when it can. */
export type MigrationFailure =
  "PAYMENT_SOURCE_NOT_FOUND" | "CREDIT_NOT_OPEN" | "CREDIT_EXPIRED" | "AIRLINE_NOT_TRANSFERABLE";

/**
 * A migration (either direction) needs every credit of the payment source to be OPEN, unexpired
 * and of a supported airline; the usage type itself may be either.
 */
export function migrationFailure(credits: readonly LockedCredit[], today: string): MigrationFailure | undefined {
  if (credits.length === 0) return "PAYMENT_SOURCE_NOT_FOUND";
  if (credits.some((c) => c.status !== "OPEN")) return "CREDIT_NOT_OPEN";
  if (credits.some((c) => c.expiryDate < today)) return "CREDIT_EXPIRED";
  if (credits.some((c) => !SUPPORTED_CODES.includes(c.airlineCode))) return "AIRLINE_NOT_TRANSFERABLE";
  return undefined;
}

export function isUsageTarget(value: string): value is CreditUsageType {
  return value === "PERSONAL" || value === "COMPANY";
}
