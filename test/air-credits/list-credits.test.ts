import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { backend } from "../helpers/backend.js";
import { operatorCall, type RunningService } from "../helpers/service.js";
import {
  disposeService,
  newApiUser,
  newTenant,
  ROOMY_RATE_LIMITS,
  startTokenService,
  type Client,
} from "../helpers/token-kit.js";
import {
  airCreditGrpc,
  assertErrorAnswer,
  creditJson,
  creditSpec,
  day,
  importCredits,
  LIST_PATH,
  rest,
  tokenFor,
  uuid,
  type Answer,
  type CreditSpec,
  type Face,
} from "./air-credit-kit.js";

/**
 * POST /v3/air/company-transferable-unused-credits/list over REST and over gRPC (grpc-js): every
 * filter alone and combined, paging at its edges, the distinct-value lists and who may list.
 */
describe(`air credits: list (${backend})`, () => {
  let running: RunningService;
  let grpcFace: ReturnType<typeof airCreditGrpc>;
  let companyA1: string; // TMC A, the fixture below
  let companyA2: string; // TMC A, 250 credits for paging
  let companyB1: string; // TMC B
  const tokens: Record<string, string> = {};

  // Transferable: t5 (today), t6/t1 (same expiry: ticket order), t2, t3, t4.
  const fixture: CreditSpec[] = [
    creditSpec("0010000000001", { expiresIn: 10 }),
    {
      ticket: "0010000000002",
      airline: "UA",
      source: "AMADEUS",
      pcc: "P2",
      fop: "Amex",
      access: "CARD_ACCESS_PERSONAL",
      entity: "E2",
      expiresIn: 20,
    },
    {
      ticket: "0010000000003",
      airline: "DL",
      source: "NDC",
      pcc: "P1",
      fop: "Amex",
      access: "CARD_ACCESS_CORPORATE",
      entity: "E1",
      expiresIn: 30,
    },
    {
      ticket: "0010000000004",
      airline: "AA",
      source: "AMADEUS",
      pcc: "P3",
      fop: "Visa",
      access: "CARD_ACCESS_PERSONAL",
      entity: "E2",
      expiresIn: 40,
    },
    {
      ticket: "0010000000005",
      airline: "BA",
      source: "SABRE",
      pcc: "P2",
      fop: "MC",
      access: "CARD_ACCESS_CENTRAL",
      entity: "E3",
      expiresIn: 0,
    },
    {
      ticket: "0009999999999",
      airline: "AF",
      source: "SABRE",
      pcc: "P3",
      fop: "MC",
      access: "CARD_ACCESS_PERSONAL",
      entity: "E3",
      expiresIn: 10,
    },
    // Not transferable: expired yesterday, used, already a company credit, an airline without transfers.
    {
      ticket: "0020000000001",
      airline: "AA",
      source: "SABRE",
      pcc: "PX",
      fop: "Expired label",
      access: "CARD_ACCESS_CENTRAL",
      entity: "EX",
      expiresIn: -1,
    },
    {
      ticket: "0020000000002",
      airline: "AA",
      source: "SABRE",
      pcc: "PU",
      fop: "Used label",
      access: "CARD_ACCESS_CENTRAL",
      entity: "EU",
      expiresIn: 50,
      status: "USED",
    },
    {
      ticket: "0020000000003",
      airline: "AA",
      source: "SABRE",
      pcc: "PC",
      fop: "Company label",
      access: "CARD_ACCESS_CENTRAL",
      entity: "EC",
      expiresIn: 50,
      usage: "COMPANY",
    },
    {
      ticket: "0020000000004",
      airline: "WN",
      source: "SOUTHWEST",
      pcc: "PW",
      fop: "WN label",
      access: "CARD_ACCESS_CENTRAL",
      entity: "EW",
      expiresIn: 50,
    },
  ];
  const t = (n: number) => `001000000000${n}`;
  const t6 = "0009999999999";

  before(async () => {
    // Imports of hundreds of credits in one request need more than the default 256 KiB body.
    running = await startTokenService({ env: { ...ROOMY_RATE_LIMITS, BODY_LIMIT_BYTES: "4194304" } });
    const base = running.baseUrl;
    const a = await newTenant(base);
    const b = await newTenant(base);
    companyA1 = a.orgId;
    companyB1 = b.orgId;
    companyA2 = (await operatorCall<{ orgId: string }>(base, "CreateCompany", { tmcId: a.tmcId, name: "Second" }))
      .orgId;
    const clients: Record<string, Client> = {
      tmcA: a.admin,
      tmcB: b.admin,
      companyA1: await newApiUser(base, a.tmcId, "COMPANY_ADMIN", companyA1),
      companyA2: await newApiUser(base, a.tmcId, "COMPANY_ADMIN", companyA2),
    };
    for (const [name, client] of Object.entries(clients)) tokens[name] = await tokenFor(base, client);
    tokens.noReadScope = await tokenFor(base, a.admin, "api-users");
    assert.equal((await importCredits(base, companyA1, fixture.map(creditJson))).created, 10);
    const many = Array.from({ length: 250 }, (_, i) =>
      creditJson({
        ticket: `0300000${String(i).padStart(6, "0")}`,
        airline: "AA",
        source: "SABRE",
        pcc: "Q1",
        fop: "Bulk",
        access: "CARD_ACCESS_CENTRAL",
        entity: "Bulk",
        expiresIn: 1 + (i % 7),
      }),
    );
    assert.equal((await importCredits(base, companyA2, many)).created, 250);
    await importCredits(base, companyB1, [creditJson({ ...fixture[0]!, fop: "B only" })]);
    grpcFace = airCreditGrpc(base);
  });

  after(async () => {
    grpcFace?.close();
    await disposeService(running);
  });

  const call = (face: Face, body: Record<string, unknown>, token: string | null = tokens.tmcA!): Promise<Answer> =>
    face === "REST"
      ? rest(running.baseUrl, LIST_PATH, body, token ?? undefined)
      : grpcFace.list(body, token ?? undefined);
  const tickets = (answer: Answer) =>
    ((answer.body.unusedCreditInfos ?? []) as Array<{ ticketNumber: string }>).map((c) => c.ticketNumber);
  const totalOf = (answer: Answer) => Number(answer.body.paginationParams?.totalRecords ?? 0);
  const listA1 = (face: Face, filter?: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    call(face, { companyId: { id: companyA1 }, ...(filter ? { companyCreditFilter: filter } : {}), ...extra });

  const filterCases: Array<[string, Record<string, unknown> | undefined, string[]]> = [
    [
      "no filter: every transferable credit, by expiry date then ticket number",
      undefined,
      [t(5), t6, t(1), t(2), t(3), t(4)],
    ],
    ["supplier", { supplier: "SABRE" }, [t(5), t6, t(1)]],
    ["selectedAirlines", { selectedAirlines: ["AA", "UA"] }, [t(1), t(2), t(4)]],
    [
      "expiryDateRange (inclusive at both ends)",
      { expiryDateRange: { expiryDateStart: { iso8601: day(10) }, expiryDateEnd: { iso8601: day(30) } } },
      [t6, t(1), t(2), t(3)],
    ],
    ["expiryDateRange with a start only", { expiryDateRange: { expiryDateStart: { iso8601: day(31) } } }, [t(4)]],
    ["expiryDateRange with an end only", { expiryDateRange: { expiryDateEnd: { iso8601: day(0) } } }, [t(5)]],
    ["fopLabel", { fopLabel: ["Amex"] }, [t(2), t(3)]],
    ["pcc", { pcc: "P1" }, [t(1), t(3)]],
    ["pccs", { pccs: ["P2", "P3"] }, [t(5), t6, t(2), t(4)]],
    ["pccs wins over pcc", { pcc: "P1", pccs: ["P2"] }, [t(5), t(2)]],
    ["fopCardAccessType", { fopCardAccessType: ["CARD_ACCESS_CENTRAL"] }, [t(5), t(1)]],
    ["legalEntityNames", { legalEntityNames: ["E2"] }, [t(2), t(4)]],
    [
      "a filter naming only non-transferable values matches nothing",
      { fopLabel: ["Expired label", "Used label", "Company label", "WN label"] },
      [],
    ],
    ["combined: supplier AND airline", { supplier: "AMADEUS", selectedAirlines: ["AA"] }, [t(4)]],
    [
      "combined: every filter at once",
      {
        supplier: "SABRE",
        selectedAirlines: ["AA", "AF"],
        expiryDateRange: { expiryDateStart: { iso8601: day(5) }, expiryDateEnd: { iso8601: day(15) } },
        fopLabel: ["Visa", "MC"],
        pccs: ["P1", "P3"],
        fopCardAccessType: ["CARD_ACCESS_CENTRAL", "CARD_ACCESS_PERSONAL"],
        legalEntityNames: ["E1", "E3"],
      },
      [t6, t(1)],
    ],
    [
      "combined filters that exclude each other",
      { supplier: "AMADEUS", fopLabel: ["Amex"], selectedAirlines: ["AA"] },
      [],
    ],
  ];

  for (const face of ["REST", "gRPC"] as const) {
    describe(face, () => {
      for (const [name, filter, expected] of filterCases) {
        test(`filter: ${name}`, async () => {
          const answer = await listA1(face, filter);
          assert.equal(answer.status, 200, JSON.stringify(answer.body));
          assert.deepEqual(tickets(answer), expected);
          assert.equal(totalOf(answer), expected.length);
          assert.equal(Number(answer.body.paginationParams?.offset ?? 0), 0);
          // The distinct lists cover every transferable credit of the company, whatever the filter.
          assert.deepEqual(answer.body.companyTransferableFopLabels, ["Amex", "MC", "Visa"]);
          assert.deepEqual(answer.body.companyTransferablePccs, ["P1", "P2", "P3"]);
          assert.deepEqual(answer.body.companyTransferableLegalEntityNames, ["E1", "E2", "E3"]);
        });
      }

      test("a credit's fields, as the reference shapes them", async () => {
        const answer = await listA1(face, { pcc: "P1", selectedAirlines: ["AA"] });
        assert.equal(answer.status, 200);
        const [credit] = answer.body.unusedCreditInfos as Array<Record<string, any>>;
        assert.equal(credit!.ticketNumber, t(1));
        assert.equal(credit!.airlineCode, "AA");
        assert.deepEqual(
          credit!.airlineInfo,
          { airlineCode: "AA", airlineName: "American Airlines" },
          "the name of SUPPORTED_AIRLINES, not the import's",
        );
        assert.equal(credit!.totalFare.amount, 412.3);
        assert.equal(credit!.totalFare.currencyCode, "USD");
        // DateTimeOffset: an imported date is its midnight UTC; a date-time keeps its instant.
        assert.deepEqual(credit!.expiryDate, { iso8601: `${day(10)}T00:00:00Z` });
        assert.deepEqual(credit!.departureDate, { iso8601: `${day(-30)}T17:32:00Z` });
        assert.equal(credit!.status, "OPEN");
        assert.equal(credit!.source, "SABRE");
        assert.equal(credit!.creditUsageType, "PERSONAL");
        assert.equal(credit!.fopLabel, "Visa");
        assert.equal(credit!.fopCardAccessType, "CARD_ACCESS_CENTRAL");
        assert.equal(credit!.legalEntityName, "E1");
        assert.equal(credit!.email, "ada@example.com");
        assert.equal(credit!.passengerName.given, "Ada");
        assert.match(credit!.paymentSourceId, /^[0-9a-f-]{36}$/);
        assert.equal(credit!.fopInfo.card.number, "****1111", "card numbers are stored masked");
        assert.ok(!credit!.fopInfo.card.cvv, "a CVV is never stored");
        const airlines = (answer.body.supportedAirlines as Array<{ airlineCode: string }>).map((a) => a.airlineCode);
        assert.ok(airlines.includes("AA") && !airlines.includes("WN"), JSON.stringify(airlines));
      });

      test("paging: offset 0, a middle page, the last page, exactly the end, beyond the end", async () => {
        const page = (offset: number) => call(face, { companyId: { id: companyA2 }, offset });
        const pages = await Promise.all([0, 100, 200, 250, 1000].map(page));
        for (const p of pages) assert.equal(p.status, 200, JSON.stringify(p.body));
        assert.deepEqual(
          pages.map((p) => tickets(p).length),
          [100, 100, 50, 0, 0],
        );
        assert.deepEqual(pages.map(totalOf), [250, 250, 250, 250, 250]);
        assert.deepEqual(
          pages.map((p) => Number(p.body.paginationParams?.offset ?? 0)),
          [0, 100, 200, 250, 1000],
        );
        const all = [...tickets(pages[0]!), ...tickets(pages[1]!), ...tickets(pages[2]!)];
        assert.equal(new Set(all).size, 250, "no credit on two pages");
        const expiries = pages
          .slice(0, 3)
          .flatMap((p) => (p.body.unusedCreditInfos as any[]).map((c) => `${c.expiryDate.iso8601} ${c.ticketNumber}`));
        assert.deepEqual(expiries, [...expiries].sort(), "ordered by expiry date, then ticket number, across pages");
        assert.deepEqual(pages[0]!.body.companyTransferablePccs, ["Q1"]);
      });

      test("access: the TMC admin reaches every company of its TMC, a company admin only its own", async () => {
        assert.equal((await listA1(face, undefined, {})).status, 200);
        assert.equal((await call(face, { companyId: { id: companyA2 } }, tokens.tmcA)).status, 200);
        assert.deepEqual(tickets(await call(face, { companyId: { id: companyA1 } }, tokens.companyA1)).length, 6);
        assert.deepEqual(tickets(await call(face, { companyId: { id: companyA2 } }, tokens.companyA2)).length, 100);
      });

      test("access: another TMC's company, another company of the same TMC and an unknown company are all 404, alike", async () => {
        const refusals = [
          await call(face, { companyId: { id: companyA1 } }, tokens.tmcB),
          await call(face, { companyId: { id: companyB1 } }, tokens.tmcA),
          await call(face, { companyId: { id: companyA2 } }, tokens.companyA1),
          await call(face, { companyId: { id: uuid() } }, tokens.tmcA),
        ];
        for (const answer of refusals) assertErrorAnswer(answer, 404, "NOT_FOUND", "companyId.id");
        assert.equal(
          new Set(refusals.map((r) => r.body.errorMessages[0].message)).size,
          1,
          "one message for every kind of refusal",
        );
      });

      test("authentication and scope: no token 401, a token without air-credits:read 403", async () => {
        assertErrorAnswer(await call(face, { companyId: { id: companyA1 } }, null), 401, "USER_NOT_AUTHENTICATED");
        assertErrorAnswer(
          await call(face, { companyId: { id: companyA1 } }, tokens.noReadScope),
          403,
          "PERMISSION_DENIED",
        );
      });

      test("validation: the expiry range's start after its end → 400", async () => {
        const range = { expiryDateStart: { iso8601: day(20) }, expiryDateEnd: { iso8601: day(10) } };
        assertErrorAnswer(
          await listA1(face, { expiryDateRange: range }),
          400,
          "API_VALIDATION_FAILED",
          "companyCreditFilter.expiryDateRange",
        );
      });

      test("validation: a date that does not exist, and one that is not ISO 8601 → 400 naming the field", async () => {
        const start = "companyCreditFilter.expiryDateRange.expiryDateStart.iso8601";
        assertErrorAnswer(
          await listA1(face, { expiryDateRange: { expiryDateStart: { iso8601: "2027-02-30" } } }),
          400,
          "API_VALIDATION_FAILED",
          start,
        );
        assertErrorAnswer(
          await listA1(face, { expiryDateRange: { expiryDateStart: { iso8601: "31/01/2027" } } }),
          400,
          "API_VALIDATION_FAILED",
          start,
        );
      });

      test("validation: companyId missing, or not a UUID → 400", async () => {
        assertErrorAnswer(await call(face, {}), 400, "API_VALIDATION_FAILED", "companyId");
        assertErrorAnswer(
          await call(face, { companyId: { id: "not-a-uuid" } }),
          400,
          "API_VALIDATION_FAILED",
          "companyId.id",
        );
      });

      test("validation: a negative offset → 400", async () => {
        assertErrorAnswer(await listA1(face, undefined, { offset: -1 }), 400, "API_VALIDATION_FAILED", "offset");
      });

      test("offset is bounded: 10000 is the deepest page, 10001 and beyond → 400 naming offset", async () => {
        const deepest = await call(face, { companyId: { id: companyA2 }, offset: 10_000 });
        assert.equal(deepest.status, 200, JSON.stringify(deepest.body));
        assert.deepEqual([tickets(deepest).length, totalOf(deepest)], [0, 250]);
        for (const offset of [10_001, 90_000, 10_000_000]) {
          const answer = await call(face, { companyId: { id: companyA2 }, offset });
          assertErrorAnswer(answer, 400, "API_VALIDATION_FAILED", "offset");
          assert.match(JSON.stringify(answer.body), /10000/, "the message says the bound");
        }
      });
    });
  }

  for (const face of ["REST", "gRPC"] as const) {
    test(`${face}: an unknown supplier or card access type → 400 naming the field`, async () => {
      const unknownSupplier = await listA1(face, { supplier: "NOT_A_SUPPLIER" });
      assertErrorAnswer(unknownSupplier, 400, "API_VALIDATION_FAILED", "companyCreditFilter.supplier");
      const unknownAccess = await listA1(face, { fopCardAccessType: ["CARD_ACCESS_CENTRAL", "CARD_ACCESS_NOWHERE"] });
      assertErrorAnswer(unknownAccess, 400, "API_VALIDATION_FAILED", "companyCreditFilter.fopCardAccessType[1]");
    });
  }

  test("the demo seed's credits, every page of them, are valid against the reference's schema (REST and gRPC)", async () => {
    const seed = await operatorCall<{ orgId: string; clientId: string; clientSecret: string }>(
      running.baseUrl,
      "Seed",
      {},
    );
    const token = await tokenFor(running.baseUrl, { clientId: seed.clientId, clientSecret: seed.clientSecret });
    for (const face of ["REST", "gRPC"] as const) {
      // call() passes every answer through the kit's JSON Schema check.
      const answer = await call(face, { companyId: { id: seed.orgId } }, token);
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      assert.ok(tickets(answer).length > 0);
      for (const credit of answer.body.unusedCreditInfos as Array<Record<string, any>>)
        assert.ok(credit.airlineInfo?.airlineName, "every airlineInfo names its airline");
    }
  });

  describe("REST only: JSON the gRPC client cannot even encode", () => {
    test("a string offset and an unknown field → 400 naming the field", async () => {
      const post = (body: Record<string, unknown>) => rest(running.baseUrl, LIST_PATH, body, tokens.tmcA);
      assertErrorAnswer(
        await post({ companyId: { id: companyA1 }, offset: "first" }),
        400,
        "API_VALIDATION_FAILED",
        "offset",
      );
      const unknown = await post({ companyId: { id: companyA1 }, colour: "blue" });
      assertErrorAnswer(unknown, 400, "API_VALIDATION_FAILED");
      assert.match(unknown.body.errorMessages[0].message, /colour/);
    });

    test("a wrong type deeper in the body → 400 naming the field by its JSON path", async () => {
      const post = (body: Record<string, unknown>) => rest(running.baseUrl, LIST_PATH, body, tokens.tmcA);
      assertErrorAnswer(
        await post({ companyId: { id: companyA1 }, companyCreditFilter: { selectedAirlines: "AA" } }),
        400,
        "API_VALIDATION_FAILED",
        "companyCreditFilter.selectedAirlines",
      );
      assertErrorAnswer(
        await post({
          companyId: { id: companyA1 },
          companyCreditFilter: { expiryDateRange: { expiryDateStart: "2027-01-01" } },
        }),
        400,
        "API_VALIDATION_FAILED",
        "companyCreditFilter.expiryDateRange.expiryDateStart",
      );
    });
  });
});
