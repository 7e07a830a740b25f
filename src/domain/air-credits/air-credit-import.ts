import { invalidArgument, notFound, type ErrorParameter } from "../../errors/domain-error.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { CompanyDirectory } from "./ports.js";
import type { ImportedCredit, PassengerName } from "./model.js";
import type { UnusedCreditRepository } from "./ports.js";
import { isCalendarDate } from "./air-credit-listing.js";

/** At most this many invalid rows are named in one error. */
const MAX_REPORTED = 100;

export interface ImportResult {
  readonly companyId: string;
  readonly created: number;
  readonly updated: number;
}

/** What AirCreditImport is built from. */
export interface AirCreditImportDeps {
  readonly uow: UnitOfWork;
  readonly companies: CompanyDirectory;
  readonly credits: UnusedCreditRepository;
}

/**
 * The operator's import of a company's unused credits (`credits import`). Every row is checked
 * first; any invalid row refuses the whole import with 400, naming each bad row by its index and
 * field ("credits[3].expiryDate"). The valid file is then written in one transaction: a ticket
 * number the company already has updates that credit (its payment source id is kept unless the
 * row names one), a new one inserts a credit.
 */
export class AirCreditImport {
  constructor(private readonly deps: AirCreditImportDeps) {}

  /** The rows as the contract typed them; `vocabulary` holds the contract's enum names each enum-valued field may take. */
  async import(
    companyId: string,
    rows: readonly CreditImportRow[],
    vocabulary: CreditVocabulary,
  ): Promise<ImportResult> {
    const { credits, errors } = parseCredits(rows, vocabulary);
    if (errors.length > 0) {
      const rowsWithErrors = new Set(errors.map((e) => /^credits\[(\d+)\]/.exec(e.name)?.[1])).size;
      throw invalidArgument(
        `${rowsWithErrors} of ${rows.length} credits are invalid; nothing was imported`,
        errors.slice(0, MAX_REPORTED),
      );
    }
    const result = await this.deps.uow.transaction(async (tx) => {
      const scope = await this.deps.companies.tenantOfCompany(tx, companyId);
      if (!scope) throw notFound("Company", [{ name: "companyId", value: companyId }]);
      const counts = await this.deps.credits.upsertCredits(tx, scope, companyId, credits);
      return { companyId, ...counts };
    });
    // A bulk import can change the table's shape faster than autovacuum notices: the list's
    // plans depend on fresh statistics.
    await this.deps.credits.refreshStatisticsIfStale(this.deps.uow.direct);
    return result;
  }
}

/** A date as the contract carries it (the reference's DateModel / DateTimeOffset). */
export interface ImportDate {
  readonly iso8601: string;
}

/**
 * One row of an import as the contract typed it (ImportedAirCredit, a reference UnusedCreditInfo):
 * text is "" when absent; enum-valued fields hold names still to be checked against the
 * `CreditVocabulary`, so a wrong one is reported with its row. `violations` are what the
 * contract's own rules of the row found (formats and lengths of its text fields), named by field:
 * the rules here are those no field rule can say.
 */
export interface CreditImportRow {
  readonly violations: readonly { readonly field: string; readonly reason: string }[];
  readonly sourcePnr: string;
  readonly spotnanaPnr: string;
  readonly ticketNumber: string;
  readonly airlineCode: string;
  readonly airlineInfo?: { readonly airlineCode: string; readonly airlineName: string } | undefined;
  readonly totalFare?: { readonly amount?: number | undefined; readonly currencyCode: string } | undefined;
  readonly issueDate?: ImportDate | undefined;
  readonly expiryDate?: ImportDate | undefined;
  readonly usedDate?: ImportDate | undefined;
  readonly departureDate?: ImportDate | undefined;
  readonly segmentsAvailable: string;
  /** The suffix is a name the contract already checked; "" when none. */
  readonly passengerName?:
    | {
        readonly given: string;
        readonly family1: string;
        readonly family2: string;
        readonly middle: string;
        readonly preferred: string;
        readonly suffix: string;
      }
    | undefined;
  readonly departureCountry: string;
  readonly arrivalCountry: string;
  readonly ticketType: string;
  readonly pcc: string;
  readonly status: string;
  readonly source: string;
  readonly tripId: string;
  readonly redeemVia: string;
  readonly sourceOfTruth: string;
  readonly owningPcc: string;
  readonly paymentSourceId: string;
  readonly creditUsageType: string;
  readonly email: string;
  /** The reference UnusedCreditFop object (JSON), already checked by the contract. */
  readonly fopInfo?: Readonly<Record<string, unknown>> | undefined;
  readonly fopLabel: string;
  readonly exchangeInfo?: { readonly previousTicket: string } | undefined;
  readonly fopCardAccessType: string;
  readonly legalEntityName: string;
}

/** The enum-valued fields of a row and the names each may take (the contract's enums, given by the RPC edge). */
export type CreditVocabulary = Readonly<
  Record<
    | "segmentsAvailable"
    | "ticketType"
    | "status"
    | "source"
    | "redeemVia"
    | "sourceOfTruth"
    | "creditUsageType"
    | "fopCardAccessType",
    readonly string[]
  >
>;

/** Checks every row; returns the credits, or every problem found (by row index and field). */
export function parseCredits(
  rows: readonly CreditImportRow[],
  vocabulary: CreditVocabulary,
): { credits: ImportedCredit[]; errors: ErrorParameter[] } {
  const credits: ImportedCredit[] = [];
  const errors: ErrorParameter[] = [];
  const seenTickets = new Map<string, number>();
  const seenSources = new Map<string, number>();
  rows.forEach((row, index) => {
    const r = new RowReader(`credits[${index}]`, errors, vocabulary);
    const credit = r.credit(row);
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

interface TextRule {
  readonly required?: boolean;
  readonly pattern?: RegExp;
  readonly hint?: string;
  readonly max?: number;
}

/** airlineInfo.airlineCode, a field of the v3 AirlineInfo (shared with the list's answers), as the contract's airlineCode. */
const AIRLINE_CODE: TextRule = { pattern: /^[A-Z0-9]{2}$/, hint: "a 2-character IATA airline code" };

class RowReader {
  private failed = false;

  constructor(
    private readonly path: string,
    private readonly errors: ErrorParameter[],
    private readonly vocabulary: CreditVocabulary,
  ) {}

  fail(field: string, reason: string): undefined {
    this.failed = true;
    this.errors.push({ name: field ? `${this.path}.${field}` : this.path, value: reason });
    return undefined;
  }

  credit(o: CreditImportRow): ImportedCredit | undefined {
    for (const { field, reason } of o.violations) this.fail(field, reason);
    const refused = new Set(o.violations.map((v) => v.field));
    /** A text field the contract checked: undefined when empty, or refused (the row has failed). */
    const given = (field: keyof CreditImportRow, value: string) =>
      value === "" || refused.has(field) ? undefined : value;
    const ticketNumber = given("ticketNumber", o.ticketNumber);
    const airlineCode = this.airlineCode(o, given("airlineCode", o.airlineCode));
    const totalFare = this.money(o);
    const issueDate = this.date(o.issueDate, "issueDate", true);
    const expiryDate = this.date(o.expiryDate, "expiryDate", true);
    const departureDate = this.date(o.departureDate, "departureDate", false);
    const usedDate = this.date(o.usedDate, "usedDate", false);
    const paymentSourceId = given("paymentSourceId", o.paymentSourceId);
    const email = given("email", o.email);
    const credit = {
      // Empty: the credit keeps the payment source it has, or gets a new one.
      paymentSourceId: paymentSourceId?.toLowerCase() ?? "",
      ticketNumber: ticketNumber!,
      sourcePnr: given("sourcePnr", o.sourcePnr),
      spotnanaPnr: given("spotnanaPnr", o.spotnanaPnr),
      airlineCode: airlineCode!,
      airlineName: o.airlineInfo && this.text(o.airlineInfo.airlineName, "airlineInfo.airlineName", { max: 128 }),
      totalFare: totalFare!,
      issueDate: issueDate!,
      expiryDate: expiryDate!,
      usedDate,
      departureDate,
      segmentsAvailable: this.choice(o, "segmentsAvailable"),
      passengerName: this.name(o),
      departureCountry: given("departureCountry", o.departureCountry),
      arrivalCountry: given("arrivalCountry", o.arrivalCountry),
      ticketType: this.choice(o, "ticketType") ?? "ETICKET",
      pcc: given("pcc", o.pcc),
      status: (this.choice(o, "status") ?? "OPEN") as ImportedCredit["status"],
      source: this.choice(o, "source") ?? "SABRE",
      tripId: given("tripId", o.tripId),
      redeemVia: this.choice(o, "redeemVia"),
      sourceOfTruth: this.choice(o, "sourceOfTruth"),
      owningPcc: given("owningPcc", o.owningPcc),
      creditUsageType: (this.choice(o, "creditUsageType") ?? "PERSONAL") as ImportedCredit["creditUsageType"],
      email: email?.toLowerCase(),
      fopInfo: o.fopInfo && masked(o.fopInfo),
      fopLabel: given("fopLabel", o.fopLabel),
      previousTicket:
        o.exchangeInfo && this.text(o.exchangeInfo.previousTicket, "exchangeInfo.previousTicket", { max: 20 }),
      fopCardAccessType: this.choice(o, "fopCardAccessType"),
      legalEntityName: given("legalEntityName", o.legalEntityName),
    } satisfies ImportedCredit;
    if (issueDate && expiryDate && Date.parse(issueDate) > Date.parse(expiryDate))
      this.fail("expiryDate", "must not be before issueDate");
    return this.failed ? undefined : credit;
  }

  private text(value: string, label: string, rule: TextRule): string | undefined {
    if (value === "") {
      if (rule.required) this.fail(label, "is required");
      return undefined;
    }
    if (rule.max !== undefined && value.length > rule.max)
      return this.fail(label, `must be at most ${rule.max} characters`);
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(value)) return this.fail(label, "must not hold control characters");
    if (rule.pattern && !rule.pattern.test(value)) return this.fail(label, `must be ${rule.hint ?? "well formed"}`);
    return value;
  }

  private choice(o: CreditImportRow, field: keyof CreditVocabulary): string | undefined {
    const value = o[field];
    if (value === "") return undefined;
    const values = this.vocabulary[field];
    if (!values.includes(value)) return this.fail(field, `must be one of ${values.join(", ")}`);
    return value;
  }

  /** `direct`: airlineCode as the contract checked it (undefined when empty or refused). */
  private airlineCode(o: CreditImportRow, direct: string | undefined): string | undefined {
    const nested = o.airlineInfo && this.text(o.airlineInfo.airlineCode, "airlineInfo.airlineCode", AIRLINE_CODE);
    if (direct && nested && direct !== nested) return this.fail("airlineInfo.airlineCode", "must equal airlineCode");
    if (!direct && !nested) return this.fail("airlineCode", "is required (or airlineInfo.airlineCode)");
    return direct ?? nested;
  }

  private money(o: CreditImportRow): ImportedCredit["totalFare"] | undefined {
    const fare = o.totalFare;
    if (!fare) return this.fail("totalFare", "is required");
    const currencyCode = this.text(fare.currencyCode, "totalFare.currencyCode", {
      required: true,
      pattern: /^[A-Z]{3}$/,
      hint: "an ISO 4217 currency code",
    });
    if (fare.amount === undefined) return this.fail("totalFare.amount", "is required");
    // A double with at most 15 significant digits prints as the decimal it was written as.
    const amount = String(fare.amount);
    if (!/^\d{1,12}(\.\d{1,3})?$/.test(amount))
      return this.fail("totalFare.amount", "must be a non-negative amount with at most 12 digits and 3 decimals");
    return currencyCode ? { amount, currencyCode } : undefined;
  }

  /**
   * A DateModel or DateTimeOffset as the UTC instant it names (2030-12-31T23:30:00-05:00 is
   * 2031-01-01T04:30:00.000Z): the instant is kept, never cut to its local date. A date alone is
   * its midnight UTC; a time without Z or an offset names no instant and is refused.
   */
  private date(value: ImportDate | undefined, field: string, required: boolean): string | undefined {
    if (value === undefined) {
      if (required) this.fail(field, "is required");
      return undefined;
    }
    const instant = utcInstantOf(value.iso8601);
    if (instant === undefined) {
      return this.fail(
        `${field}.iso8601`,
        "must be an ISO 8601 date (YYYY-MM-DD) or a date-time with Z or an offset (YYYY-MM-DDThh:mm[:ss]±hh:mm) that exists",
      );
    }
    return instant;
  }

  private name(o: CreditImportRow): PassengerName | undefined {
    const name = o.passengerName;
    if (!name) return undefined;
    const given = this.text(name.given, "passengerName.given", { required: true, max: 128 });
    const family1 = this.text(name.family1, "passengerName.family1", { required: true, max: 128 });
    const optional = (field: "family2" | "middle" | "preferred") =>
      this.text(name[field], `passengerName.${field}`, { max: 128 });
    return {
      given: given ?? "",
      family1: family1 ?? "",
      ...pick("family2", optional("family2")),
      ...pick("middle", optional("middle")),
      ...pick("preferred", optional("preferred")),
      ...pick("suffix", name.suffix || undefined),
    };
  }
}

/** A FOP object as stored: never a card number (only its last four digits survive) nor a CVV. */
function masked(fop: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const copy = JSON.parse(JSON.stringify(fop)) as Record<string, unknown>;
  const card = copy.card;
  if (typeof card === "object" && card !== null && !Array.isArray(card)) {
    const c = card as Record<string, unknown>;
    if (typeof c.number === "string") c.number = c.number.replace(/\D/g, "").slice(-4).padStart(8, "*");
    delete c.cvv;
  }
  return copy;
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
