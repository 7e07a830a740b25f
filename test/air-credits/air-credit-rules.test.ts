import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ImportAirCreditsRequestSchema } from "../../gen/travel/operator/v1/operator_pb.js";
import { parseCredits } from "../../src/domain/air-credits/air-credit-import.js";
import { creditImportRow, creditVocabulary } from "../../src/rpc/mappers/air-credit-mappers.js";
import { isCalendarDate, mayAccessCompany } from "../../src/domain/air-credits/air-credit-listing.js";
import { migrationFailure, transferableOn, utcToday } from "../../src/domain/air-credits/transferability.js";

/** Rows as the RPC edge gives them to the domain: decoded as the contract's ImportedAirCredit, then mapped. */
function rowsOf(credits: unknown[]) {
  return fromJson(ImportAirCreditsRequestSchema, { credits } as JsonValue).credits.map(creditImportRow);
}

const parse = (credits: unknown[]) => parseCredits(rowsOf(credits), creditVocabulary);

/** A valid import row with only the required fields, for the rows that get one thing wrong. */
const base = {
  ticketNumber: "0017779139217",
  airlineCode: "AA",
  totalFare: { amount: 1, currencyCode: "USD" },
  issueDate: { iso8601: "2026-01-31" },
  expiryDate: { iso8601: "2027-01-31" },
};

/** The air-credit rules without storage: dates, access, migration checks, the import's row checks. */
describe("air-credit rules", () => {
  test("calendar dates: only days that exist, in YYYY-MM-DD", () => {
    for (const ok of ["2024-02-29", "2026-12-31", "0001-01-01"]) assert.equal(isCalendarDate(ok), true, ok);
    for (const bad of ["2023-02-29", "2026-13-01", "2026-04-31", "2026-1-05", "20260105", "2026-01-05T00:00Z", ""])
      assert.equal(isCalendarDate(bad), false, bad);
  });

  test("today is taken in UTC", () => {
    assert.equal(
      utcToday(() => new Date("2026-11-22T23:30:00-05:00")),
      "2026-11-23",
    );
    assert.equal(transferableOn(() => new Date("2026-11-22T00:00:00Z")).today, "2026-11-22");
    assert.ok(transferableOn(() => new Date()).airlineCodes.includes("AA"));
  });

  test("who may list a company: a TMC admin (its TMC checked by the scoped query), a company admin only its own", () => {
    const tmcAdmin = { clientId: "c", tmcId: "t", orgId: undefined, role: "TMC_ADMIN" as const };
    const companyAdmin = { clientId: "c", tmcId: "t", orgId: "o1", role: "COMPANY_ADMIN" as const };
    assert.equal(mayAccessCompany(tmcAdmin, "o2"), true);
    assert.equal(mayAccessCompany(companyAdmin, "o1"), true);
    assert.equal(mayAccessCompany(companyAdmin, "o2"), false);
  });

  test("migration checks, in order: found, open, not expired, airline allows transfers", () => {
    const credit = {
      companyId: "o",
      status: "OPEN" as const,
      expiryDate: "2026-11-22",
      airlineCode: "AA",
      creditUsageType: "PERSONAL" as const,
    };
    const today = "2026-11-22";
    assert.equal(migrationFailure([], today), "PAYMENT_SOURCE_NOT_FOUND");
    assert.equal(migrationFailure([credit], today), undefined, "expiring today is still transferable");
    assert.equal(migrationFailure([{ ...credit, status: "USED" }], today), "CREDIT_NOT_OPEN");
    assert.equal(
      migrationFailure([{ ...credit, status: "RESERVED", expiryDate: "2020-01-01" }], today),
      "CREDIT_NOT_OPEN",
    );
    assert.equal(migrationFailure([{ ...credit, expiryDate: "2026-11-21" }], today), "CREDIT_EXPIRED");
    assert.equal(migrationFailure([{ ...credit, airlineCode: "WN" }], today), "AIRLINE_NOT_TRANSFERABLE");
    assert.equal(
      migrationFailure([credit, { ...credit, status: "USED" }], today),
      "CREDIT_NOT_OPEN",
      "every credit of the payment source counts",
    );
  });

  test("import rows: defaults, decimal amounts kept as written, card numbers masked", () => {
    const { credits, errors } = parse([
      {
        ticketNumber: "0017779139217",
        airlineInfo: { airlineCode: "AA", airlineName: "American Airlines" },
        totalFare: { amount: 412.3, currencyCode: "USD" },
        issueDate: { iso8601: "2026-01-31" },
        expiryDate: { iso8601: "2027-01-31T10:00:00+02:00" },
        fopInfo: { card: { number: "4111 1111 1111 1234", cvv: "999" } },
      },
      {
        ticketNumber: "0017779139218",
        airlineCode: "UA",
        totalFare: { amount: "0.105", currencyCode: "KWD" },
        issueDate: { iso8601: "2026-01-31" },
        expiryDate: { iso8601: "2026-01-31" },
      },
    ]);
    assert.deepEqual(errors, []);
    assert.equal(credits[0]!.airlineCode, "AA");
    assert.equal(credits[0]!.airlineName, "American Airlines");
    assert.deepEqual(credits[0]!.totalFare, { amount: "412.3", currencyCode: "USD" });
    // The instant is kept, in UTC; a date alone is its midnight UTC.
    assert.equal(credits[0]!.expiryDate, "2027-01-31T08:00:00.000Z");
    assert.equal(credits[1]!.expiryDate, "2026-01-31T00:00:00.000Z");
    assert.deepEqual(
      [
        credits[0]!.status,
        credits[0]!.source,
        credits[0]!.creditUsageType,
        credits[0]!.ticketType,
        credits[0]!.paymentSourceId,
      ],
      ["OPEN", "SABRE", "PERSONAL", "ETICKET", ""],
    );
    assert.deepEqual(credits[0]!.fopInfo, { card: { number: "****1234" } });
    assert.deepEqual(credits[1]!.totalFare, { amount: "0.105", currencyCode: "KWD" });
  });

  test("import rows: every problem named by row index and field", () => {
    const { credits, errors } = parse([
      base,
      { ...base, ticketNumber: "0017779139216", status: "LOST", segmentsAvailable: "UNKNOWN" },
      { ...base, ticketNumber: "0017779139218", airlineCode: "AA", airlineInfo: { airlineCode: "UA" } },
      { ...base, ticketNumber: "0017779139219", totalFare: { amount: 1.5e300, currencyCode: "USD" } },
      { ...base, ticketNumber: "0017779139220", issueDate: { iso8601: "2027-02-01" } },
      { ...base, ticketNumber: "0017779139221", creditUsageType: "CREDIT_USAGE_TYPE_UNKNOWN", paymentSourceId: "nope" },
      { ...base, ticketNumber: "0017779139222", expiryDate: { iso8601: "2027-01-31T10:00" } },
    ]);
    assert.equal(credits.length, 1);
    assert.deepEqual(errors, [
      { name: "credits[1].status", value: `must be one of ${creditVocabulary.status.join(", ")}` },
      { name: "credits[2].airlineInfo.airlineCode", value: "must equal airlineCode" },
      {
        name: "credits[3].totalFare.amount",
        value: "must be a non-negative amount with at most 12 digits and 3 decimals",
      },
      { name: "credits[4].expiryDate", value: "must not be before issueDate" },
      { name: "credits[5].paymentSourceId", value: "must be a UUID" },
      { name: "credits[5].creditUsageType", value: "must be one of COMPANY, PERSONAL" },
      {
        name: "credits[6].expiryDate.iso8601",
        value:
          "must be an ISO 8601 date (YYYY-MM-DD) or a date-time with Z or an offset (YYYY-MM-DDThh:mm[:ss]±hh:mm) that exists",
      },
    ]);
  });

  test("import rows: the contract's field rules (ImportedAirCredit in operator.proto) come first in their row, worded as the service's own", () => {
    const { credits, errors } = parse([
      base,
      { ...base, ticketNumber: "12345", airlineCode: "American", departureCountry: "usa", status: "LOST" },
      { ...base, ticketNumber: "0017779139218", pcc: "P".repeat(33), fopLabel: "Visa\tGold", email: "not an address" },
      {
        ...base,
        ticketNumber: "0017779139219",
        paymentSourceId: "0F1C3A52-4B7E-4F7A-9D41-1B2A3C4D5E6F",
        email: "A@B.CO",
      },
    ]);
    assert.deepEqual(errors, [
      { name: "credits[1].ticketNumber", value: "must be 6 to 20 digits or capital letters" },
      { name: "credits[1].airlineCode", value: "must be a 2-character IATA airline code" },
      { name: "credits[1].departureCountry", value: "must be a 3-letter country code" },
      { name: "credits[1].airlineCode", value: "is required (or airlineInfo.airlineCode)" },
      { name: "credits[1].status", value: `must be one of ${creditVocabulary.status.join(", ")}` },
      { name: "credits[2].pcc", value: "must be at most 32 characters" },
      { name: "credits[2].email", value: "must be an email address" },
      { name: "credits[2].fopLabel", value: "must not hold control characters" },
    ]);
    assert.deepEqual(
      credits.map((c) => [c.ticketNumber, c.paymentSourceId, c.email]),
      [
        ["0017779139217", "", undefined],
        ["0017779139219", "0f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f", "a@b.co"],
      ],
    );
  });

  test("import rows: the enum names are the contract's (v3 enums), the zero value only where the reference has it", () => {
    assert.deepEqual(creditVocabulary.status, ["STATUS_UNKNOWN", "OPEN", "USED", "RESERVED"]);
    assert.deepEqual(creditVocabulary.redeemVia, ["REDEEM_VIA_OBT", "CONTACT_AGENT"]);
    assert.deepEqual(creditVocabulary.creditUsageType, ["COMPANY", "PERSONAL"]);
    assert.equal(creditVocabulary.source.length, 39);
    const [row] = rowsOf([{ passengerName: { given: "A", family1: "B", suffix: "JR" } }]);
    assert.equal(row!.passengerName!.suffix, "JR");
  });

  test("import rows that are not the contract's shape are refused undecoded (a wrong type, an unknown field)", () => {
    for (const bad of ["not an object", { ticketNumber: 5 }, { expiryDate: "2027-01-31" }, { colour: "red" }])
      assert.throws(() => rowsOf([bad]), /cannot decode/, JSON.stringify(bad));
  });
});
