import { invalidArgument, notFound, type ErrorParameter } from "../../errors/domain-error.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { CompanyDirectory } from "./ports.js";
import type { ImportedCredit, PassengerName } from "./model.js";
import type { UnusedCreditRepository } from "./ports.js";
import { isCalendarDate } from "./air-credit-listing.js";

/** Credits per import request (the contract enforces it too). */
export const MAX_IMPORT_CREDITS = 5000;
/** At most this many invalid rows are named in one error. */
const MAX_REPORTED = 100;

const TICKET_TYPES = ["TICKET_TYPE_UNKNOWN", "ETICKET", "MCO", "NON_GDS"];
const STATUSES = ["STATUS_UNKNOWN", "OPEN", "USED", "RESERVED"];
const SEGMENTS = ["UNKNOWN", "ALL_OPEN", "PARTIAL", "OTHER"];
const REDEEM_VIA = ["REDEEM_VIA_OBT", "CONTACT_AGENT"];
const SOURCES_OF_TRUTH = ["SPOTNANA", "MANUAL_FORM"];
const USAGE_TYPES = ["PERSONAL", "COMPANY"];
const CARD_ACCESS = ["CARD_ACCESS_CENTRAL", "CARD_ACCESS_PERSONAL", "CARD_ACCESS_CORPORATE"];
const NAME_SUFFIXES = [
  "NAME_SUFFIX_UNKNOWN",
  "SR",
  "JR",
  "MD",
  "PHD",
  "II",
  "III",
  "IV",
  "DO",
  "ATTY",
  "V",
  "VI",
  "ESQ",
  "DC",
  "DDS",
  "VM",
  "JD",
  "SECOND",
  "THIRD",
];
const THIRD_PARTY_SOURCES = [
  "UNKNOWN_SOURCE",
  "SABRE",
  "TRAVEL_FUSION",
  "AVIA",
  "NDC",
  "TRAINLINE",
  "ATPCO_NDC",
  "FARELOGIX_NDC",
  "OFFLINE",
  "CONNEXUS",
  "ROUTEHAPPY",
  "AMADEUS",
  "GIATA",
  "QBR",
  "BCD",
  "QANTAS_HOTELS",
  "SOUTHWEST",
  "EXPEDIA",
  "HOTEL_HUB",
  "MARRIOTT",
  "CLEARTRIP",
  "KYTE",
  "GROUNDSPAN",
  "SABRE_NDC",
  "BOOKING_COM",
  "CARTRAWLER",
  "PREMIER_INN",
  "TRAVELODGE",
  "ENTERPRISE",
  "HYATT",
  "EUROSTAR",
  "NATIONAL",
  "ALAMO",
  "AVIS",
  "BUDGET",
  "HERTZ",
  "DOLLAR",
  "THRIFTY",
  "FIREFLY",
];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface ImportResult {
  readonly companyId: string;
  readonly created: number;
  readonly updated: number;
}

/**
 * The operator's import of a company's unused credits (`credits import`). Every row is checked
 * first; any invalid row refuses the whole import with 400, naming each bad row by its index and
 * field ("credits[3].expiryDate"). The valid file is then written in one transaction: a ticket
 * number the company already has updates that credit (its payment source id is kept unless the
 * row names one), a new one inserts a credit.
 */
export class AirCreditImport {
  constructor(
    private readonly uow: UnitOfWork,
    private readonly companies: CompanyDirectory,
    private readonly credits: UnusedCreditRepository,
    /** The contract's check of a FOP object (the domain does not know the wire format): why it is not one, or undefined. */
    private readonly fopInfoProblem: FopInfoCheck = () => undefined,
  ) {}

  async import(companyId: string, rows: readonly unknown[]): Promise<ImportResult> {
    const { credits, errors } = parseCredits(rows, this.fopInfoProblem);
    if (errors.length > 0) {
      const rowsWithErrors = new Set(errors.map((e) => /^credits\[(\d+)\]/.exec(e.name)?.[1])).size;
      throw invalidArgument(
        `${rowsWithErrors} of ${rows.length} credits are invalid; nothing was imported`,
        errors.slice(0, MAX_REPORTED),
      );
    }
    const result = await this.uow.transaction(async (tx) => {
      const scope = await this.companies.tenantOfCompany(tx, companyId);
      if (!scope) throw notFound("Company", [{ name: "companyId", value: companyId }]);
      const counts = await this.credits.upsertCredits(tx, scope, companyId, credits);
      return { companyId, ...counts };
    });
    // A bulk import can change the table's shape faster than autovacuum notices: the list's
    // plans depend on fresh statistics.
    await this.credits.refreshStatisticsIfStale(this.uow.direct);
    return result;
  }
}

/** Checks every row; returns the credits, or every problem found (by row index and field). */
export type FopInfoCheck = (value: unknown) => string | undefined;

export function parseCredits(
  rows: readonly unknown[],
  fopInfoProblem: FopInfoCheck = () => undefined,
): { credits: ImportedCredit[]; errors: ErrorParameter[] } {
  const credits: ImportedCredit[] = [];
  const errors: ErrorParameter[] = [];
  const seenTickets = new Map<string, number>();
  const seenSources = new Map<string, number>();
  rows.forEach((row, index) => {
    const r = new RowReader(`credits[${index}]`, row, errors, fopInfoProblem);
    const credit = r.credit();
    if (!credit) return;
    const earlier = seenTickets.get(credit.ticketNumber);
    if (earlier !== undefined) return r.fail("ticketNumber", `repeats the ticket number of credits[${earlier}]`);
    seenTickets.set(credit.ticketNumber, index);
    const earlierSource = credit.paymentSourceId ? seenSources.get(credit.paymentSourceId) : undefined;
    if (earlierSource !== undefined)
      return r.fail("paymentSourceId", `repeats the payment source of credits[${earlierSource}]`);
    if (credit.paymentSourceId) seenSources.set(credit.paymentSourceId, index);
    credits.push(credit);
  });
  return { credits, errors };
}

type Json = Record<string, unknown>;

class RowReader {
  private failed = false;

  constructor(
    private readonly path: string,
    private readonly row: unknown,
    private readonly errors: ErrorParameter[],
    private readonly fopInfoProblem: FopInfoCheck,
  ) {}

  fail(field: string, reason: string): undefined {
    this.failed = true;
    this.errors.push({ name: field ? `${this.path}.${field}` : this.path, value: reason });
    return undefined;
  }

  credit(): ImportedCredit | undefined {
    if (typeof this.row !== "object" || this.row === null || Array.isArray(this.row))
      return this.fail("", "must be an object");
    const o = this.row as Json;
    const ticketNumber = this.text(o, "ticketNumber", {
      required: true,
      pattern: /^[0-9A-Z]{6,20}$/,
      hint: "6 to 20 digits or capital letters",
    });
    const airlineCode = this.airlineCode(o);
    const totalFare = this.money(o);
    const issueDate = this.date(o, "issueDate", true);
    const expiryDate = this.date(o, "expiryDate", true);
    const departureDate = this.date(o, "departureDate", false);
    const usedDate = this.date(o, "usedDate", false);
    const paymentSourceId = this.text(o, "paymentSourceId", { pattern: UUID, hint: "a UUID" })?.toLowerCase();
    const email = this.text(o, "email", { pattern: /^[^\s@]+@[^\s@]+\.[^\s@]+$/, hint: "an email address", max: 320 });
    const passengerName = this.name(o);
    const credit = {
      // Empty: the credit keeps the payment source it has, or gets a new one.
      paymentSourceId: paymentSourceId ?? "",
      ticketNumber: ticketNumber!,
      sourcePnr: this.text(o, "sourcePnr", { max: 32 }),
      spotnanaPnr: this.text(o, "spotnanaPnr", { max: 32 }),
      airlineCode: airlineCode!,
      airlineName: this.airlineName(o),
      totalFare: totalFare!,
      issueDate: issueDate!,
      expiryDate: expiryDate!,
      usedDate,
      departureDate,
      segmentsAvailable: this.choice(o, "segmentsAvailable", SEGMENTS),
      passengerName,
      departureCountry: this.text(o, "departureCountry", { pattern: /^[A-Z]{3}$/, hint: "a 3-letter country code" }),
      arrivalCountry: this.text(o, "arrivalCountry", { pattern: /^[A-Z]{3}$/, hint: "a 3-letter country code" }),
      ticketType: this.choice(o, "ticketType", TICKET_TYPES) ?? "ETICKET",
      pcc: this.text(o, "pcc", { max: 32 }),
      status: (this.choice(o, "status", STATUSES) ?? "OPEN") as ImportedCredit["status"],
      source: this.choice(o, "source", THIRD_PARTY_SOURCES) ?? "SABRE",
      tripId: this.text(o, "tripId", { max: 64 }),
      redeemVia: this.choice(o, "redeemVia", REDEEM_VIA),
      sourceOfTruth: this.choice(o, "sourceOfTruth", SOURCES_OF_TRUTH),
      owningPcc: this.text(o, "owningPcc", { max: 32 }),
      creditUsageType: (this.choice(o, "creditUsageType", USAGE_TYPES) ??
        "PERSONAL") as ImportedCredit["creditUsageType"],
      email: email?.toLowerCase(),
      fopInfo: this.fopInfo(o),
      fopLabel: this.text(o, "fopLabel", { max: 256 }),
      previousTicket: this.previousTicket(o),
      fopCardAccessType: this.choice(o, "fopCardAccessType", CARD_ACCESS),
      legalEntityName: this.text(o, "legalEntityName", { max: 256 }),
    } satisfies ImportedCredit;
    if (issueDate && expiryDate && Date.parse(issueDate) > Date.parse(expiryDate))
      this.fail("expiryDate", "must not be before issueDate");
    return this.failed ? undefined : credit;
  }

  private text(
    o: Json,
    field: string,
    rule: { required?: boolean; pattern?: RegExp; hint?: string; max?: number },
    label = field,
  ): string | undefined {
    const value = o[field];
    if (value === undefined || value === null || value === "") {
      if (rule.required) this.fail(label, "is required");
      return undefined;
    }
    if (typeof value !== "string") return this.fail(label, "must be a string");
    if (rule.max !== undefined && value.length > rule.max)
      return this.fail(label, `must be at most ${rule.max} characters`);
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(value)) return this.fail(label, "must not hold control characters");
    if (rule.pattern && !rule.pattern.test(value)) return this.fail(label, `must be ${rule.hint ?? "well formed"}`);
    return value;
  }

  private choice(o: Json, field: string, values: readonly string[], label = field): string | undefined {
    const value = o[field];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== "string" || !values.includes(value))
      return this.fail(label, `must be one of ${values.join(", ")}`);
    return value;
  }

  private object(o: Json, field: string): Json | undefined {
    const value = o[field];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== "object" || Array.isArray(value)) return this.fail(field, "must be an object");
    return value as Json;
  }

  private airlineCode(o: Json): string | undefined {
    const direct = this.text(o, "airlineCode", { pattern: /^[A-Z0-9]{2}$/, hint: "a 2-character IATA airline code" });
    const info = this.object(o, "airlineInfo");
    const nested = info
      ? this.text(
          info,
          "airlineCode",
          { pattern: /^[A-Z0-9]{2}$/, hint: "a 2-character IATA airline code" },
          "airlineInfo.airlineCode",
        )
      : undefined;
    if (direct && nested && direct !== nested) return this.fail("airlineInfo.airlineCode", "must equal airlineCode");
    if (!direct && !nested) return this.fail("airlineCode", "is required (or airlineInfo.airlineCode)");
    return direct ?? nested;
  }

  private airlineName(o: Json): string | undefined {
    const info = o.airlineInfo;
    if (typeof info !== "object" || info === null || Array.isArray(info)) return undefined;
    return this.text(info as Json, "airlineName", { max: 128 }, "airlineInfo.airlineName");
  }

  private money(o: Json): ImportedCredit["totalFare"] | undefined {
    const fare = this.object(o, "totalFare");
    if (!fare) return this.fail("totalFare", "is required");
    const currencyCode = this.text(
      fare,
      "currencyCode",
      { required: true, pattern: /^[A-Z]{3}$/, hint: "an ISO 4217 currency code" },
      "totalFare.currencyCode",
    );
    const raw = fare.amount;
    let amount: string | undefined;
    if (typeof raw === "number" && Number.isFinite(raw)) amount = String(raw);
    else if (typeof raw === "string") amount = raw;
    else if (raw === undefined || raw === null) return this.fail("totalFare.amount", "is required");
    else return this.fail("totalFare.amount", "must be a number");
    // Kept as the decimal text it was written as: never rounded through a float's arithmetic.
    if (!/^\d{1,12}(\.\d{1,3})?$/.test(amount!))
      return this.fail("totalFare.amount", "must be a non-negative amount with at most 12 digits and 3 decimals");
    return currencyCode ? { amount: amount!, currencyCode } : undefined;
  }

  /**
   * A DateModel or DateTimeOffset as the UTC instant it names (2030-12-31T23:30:00-05:00 is
   * 2031-01-01T04:30:00.000Z): the instant is kept, never cut to its local date. A date alone is
   * its midnight UTC; a time without Z or an offset names no instant and is refused.
   */
  private date(o: Json, field: string, required: boolean): string | undefined {
    const value = o[field];
    if (value === undefined || value === null) {
      if (required) this.fail(field, "is required");
      return undefined;
    }
    const iso = typeof value === "object" && !Array.isArray(value) ? (value as Json).iso8601 : undefined;
    if (typeof iso !== "string")
      return this.fail(
        field,
        'must be {"iso8601": "YYYY-MM-DD"} or {"iso8601": "YYYY-MM-DDThh:mm[:ss]Z"} (or an offset such as -05:00)',
      );
    const instant = utcInstantOf(iso);
    if (instant === undefined) {
      return this.fail(
        `${field}.iso8601`,
        "must be an ISO 8601 date (YYYY-MM-DD) or a date-time with Z or an offset (YYYY-MM-DDThh:mm[:ss]±hh:mm) that exists",
      );
    }
    return instant;
  }

  private name(o: Json): PassengerName | undefined {
    const name = this.object(o, "passengerName");
    if (!name) return undefined;
    const given = this.text(name, "given", { required: true, max: 128 }, "passengerName.given");
    const family1 = this.text(name, "family1", { required: true, max: 128 }, "passengerName.family1");
    const optional = (field: string) => this.text(name, field, { max: 128 }, `passengerName.${field}`);
    const result: PassengerName = {
      given: given ?? "",
      family1: family1 ?? "",
      ...pick("family2", optional("family2")),
      ...pick("middle", optional("middle")),
      ...pick("preferred", optional("preferred")),
      ...pick("suffix", this.choice(name, "suffix", NAME_SUFFIXES, "passengerName.suffix")),
    };
    return result;
  }

  private fopInfo(o: Json): Record<string, unknown> | undefined {
    const fop = this.object(o, "fopInfo");
    if (!fop) return undefined;
    const problem = this.fopInfoProblem(fop);
    if (problem) return this.fail("fopInfo", problem);
    const copy = JSON.parse(JSON.stringify(fop)) as Json;
    const card = copy.card;
    if (typeof card === "object" && card !== null && !Array.isArray(card)) {
      // Never store a card number or a CVV: only the last four digits survive.
      const c = card as Json;
      if (typeof c.number === "string") c.number = c.number.replace(/\D/g, "").slice(-4).padStart(8, "*");
      delete c.cvv;
    }
    return copy;
  }

  private previousTicket(o: Json): string | undefined {
    const exchange = this.object(o, "exchangeInfo");
    return exchange ? this.text(exchange, "previousTicket", { max: 20 }, "exchangeInfo.previousTicket") : undefined;
  }
}

function pick<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
}

const DATE_TIME = /^T([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d)(\.\d{1,9})?)?(Z|([+-])(0\d|1[0-4]):?([0-5]\d))$/;

/** YYYY-MM-DD, or a date-time with Z or an offset, as its UTC instant (toISOString), or undefined. */
export function utcInstantOf(iso: string): string | undefined {
  const date = iso.slice(0, 10);
  if (!isCalendarDate(date)) return undefined;
  const rest = iso.slice(10);
  if (rest === "") return `${date}T00:00:00.000Z`;
  const m = DATE_TIME.exec(rest);
  if (!m) return undefined;
  const [, hours, minutes, seconds, fraction, zone, sign, offsetHours, offsetMinutes] = m;
  const at = new Date(`${date}T00:00:00.000Z`);
  at.setUTCHours(Number(hours), Number(minutes), Number(seconds ?? 0), Math.floor(Number(`0${fraction ?? ""}`) * 1000));
  const offset = zone === "Z" ? 0 : (sign === "-" ? -1 : 1) * (Number(offsetHours) * 60 + Number(offsetMinutes));
  return new Date(at.getTime() - offset * 60_000).toISOString();
}
