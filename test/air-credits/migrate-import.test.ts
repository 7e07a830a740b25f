import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { backend, newTempDir, removeTempDir, serviceEnv } from "../helpers/backend.js";
import { runCli } from "../helpers/server-process.js";
import { operatorCall, type RunningService } from "../helpers/service.js";
import { disposeService, newApiUser, newTenant, ROOMY_RATE_LIMITS, startTokenService } from "../helpers/token-kit.js";
import {
  airCreditGrpc,
  assertErrorAnswer,
  creditJson,
  importCredits,
  LIST_PATH,
  MIGRATE_PATH,
  rest,
  tokenFor,
  uuid,
  type Answer,
  creditSpec,
  type CreditSpec,
  type Face,
} from "./air-credit-kit.js";

/**
 * POST /v3/air/company-credits/migrations over REST and gRPC (grpc-js), and the operator's import
 * (ImportAirCredits, `credits import`).
 */
describe(`air credits: migrate and import (${backend})`, () => {
  let running: RunningService;
  let grpcFace: ReturnType<typeof airCreditGrpc>;
  let tmcA: string;
  let companyA1: string;
  let companyA2: string;
  let companyB1: string;
  const tokens: Record<string, string> = {};

  const spec = creditSpec;

  before(async () => {
    running = await startTokenService({ env: { ...ROOMY_RATE_LIMITS, BODY_LIMIT_BYTES: "4194304" } });
    const base = running.baseUrl;
    const a = await newTenant(base);
    const b = await newTenant(base);
    tmcA = a.tmcId;
    companyA1 = a.orgId;
    companyB1 = b.orgId;
    companyA2 = (await operatorCall<{ orgId: string }>(base, "CreateCompany", { tmcId: a.tmcId, name: "Second" }))
      .orgId;
    tokens.tmcA = await tokenFor(base, a.admin);
    tokens.tmcB = await tokenFor(base, b.admin);
    tokens.companyA1 = await tokenFor(base, await newApiUser(base, a.tmcId, "COMPANY_ADMIN", companyA1));
    tokens.readOnly = await tokenFor(base, a.admin, "air-credits:read");
    grpcFace = airCreditGrpc(base);
  });

  after(async () => {
    grpcFace?.close();
    await disposeService(running);
  });

  const migrate = (face: Face, body: Record<string, unknown>, token: string | null = tokens.tmcA!): Promise<Answer> =>
    face === "REST"
      ? rest(running.baseUrl, MIGRATE_PATH, body, token ?? undefined)
      : grpcFace.migrate(body, token ?? undefined);
  const listTickets = async (companyId: string): Promise<Map<string, Record<string, any>>> => {
    const answer = await rest(running.baseUrl, LIST_PATH, { companyId: { id: companyId } }, tokens.tmcA);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    return new Map((answer.body.unusedCreditInfos as Array<Record<string, any>>).map((c) => [c.ticketNumber, c]));
  };
  /** Imports credits and returns their payment source ids by ticket number. */
  const seed = async (companyId: string, specs: CreditSpec[]): Promise<Record<string, string>> => {
    const ids = Object.fromEntries(specs.map((s) => [s.ticket, uuid()]));
    await importCredits(
      running.baseUrl,
      companyId,
      specs.map((s) => creditJson({ ...s, paymentSourceId: ids[s.ticket] })),
    );
    return ids;
  };
  const migrationEvents = async (paymentSourceId?: string) => {
    const { events } = await operatorCall<{ events?: Array<{ action: string; details?: Record<string, string> }> }>(
      running.baseUrl,
      "ListAuditEvents",
      { tmcId: tmcA, limit: 1000 },
    );
    return (events ?? []).filter(
      (e) =>
        e.action === "AIR_CREDIT_MIGRATE" &&
        (paymentSourceId === undefined || e.details?.paymentSourceId === paymentSourceId),
    );
  };

  for (const face of ["REST", "gRPC"] as const) {
    describe(face, () => {
      const p = face === "REST" ? "1" : "2";
      test("mixed ids: one answer per distinct id, in order; unknown and foreign look alike; the request itself succeeds", async () => {
        const own = await seed(companyA1, [
          spec(`10${p}0000000001`),
          spec(`10${p}0000000002`, { status: "USED" }),
          spec(`10${p}0000000003`, { expiresIn: -1 }),
          spec(`10${p}0000000004`, { airline: "WN", source: "SOUTHWEST" }),
          spec(`10${p}0000000005`, { status: "RESERVED" }),
        ]);
        const foreign = await seed(companyB1, [spec(`10${p}0000000009`)]);
        const good = own[`10${p}0000000001`]!;
        const unknown = uuid();
        const ids = [
          good,
          unknown,
          foreign[`10${p}0000000009`]!,
          own[`10${p}0000000002`]!,
          own[`10${p}0000000003`]!,
          own[`10${p}0000000004`]!,
          own[`10${p}0000000005`]!,
          good.toUpperCase(),
        ];
        const answer = await migrate(face, { paymentSourceIds: ids, updateCreditUsageTypeTo: "COMPANY" });
        assert.equal(answer.status, 200, JSON.stringify(answer.body));
        assert.deepEqual(
          (answer.body.migrationStatus as any[]).map((m) => [
            m.paymentSourceId,
            m.status,
            m.failureReason || undefined,
          ]),
          [
            [good, "SUCCESS", undefined],
            [unknown, "FAILED", "PAYMENT_SOURCE_NOT_FOUND"],
            [ids[2], "FAILED", "PAYMENT_SOURCE_NOT_FOUND"],
            [ids[3], "FAILED", "CREDIT_NOT_OPEN"],
            [ids[4], "FAILED", "CREDIT_EXPIRED"],
            [ids[5], "FAILED", "AIRLINE_NOT_TRANSFERABLE"],
            [ids[6], "FAILED", "CREDIT_NOT_OPEN"],
          ],
        );
        assert.equal(
          (await listTickets(companyA1)).has(`10${p}0000000001`),
          false,
          "a company credit is no longer transferable",
        );
        assert.equal((await migrationEvents(good)).length, 1);
        assert.equal((await migrationEvents(ids[2])).length, 0);
        // The other tenant's credit did not change: it is still listed for its own TMC.
        const theirs = await rest(running.baseUrl, LIST_PATH, { companyId: { id: companyB1 } }, tokens.tmcB);
        assert.ok(
          (theirs.body.unusedCreditInfos as any[]).some(
            (c) => c.ticketNumber === `10${p}0000000009` && c.creditUsageType === "PERSONAL",
          ),
        );
      });

      test("idempotent: to the current type is a SUCCESS with no change and no audit event; back again writes one", async () => {
        const ids = await seed(companyA1, [spec(`11${p}0000000001`)]);
        const id = ids[`11${p}0000000001`]!;
        const toPersonal = await migrate(face, { paymentSourceIds: [id], updateCreditUsageTypeTo: "PERSONAL" });
        assert.deepEqual(
          (toPersonal.body.migrationStatus as any[]).map((m) => m.status),
          ["SUCCESS"],
        );
        assert.equal((await migrationEvents(id)).length, 0, "already PERSONAL: nothing written");
        for (let i = 0; i < 2; i++) {
          const toCompany = await migrate(face, { paymentSourceIds: [id], updateCreditUsageTypeTo: "COMPANY" });
          assert.deepEqual(
            (toCompany.body.migrationStatus as any[]).map((m) => m.status),
            ["SUCCESS"],
          );
        }
        assert.equal((await migrationEvents(id)).length, 1, "the second COMPANY migration changed nothing");
        await migrate(face, { paymentSourceIds: [id], updateCreditUsageTypeTo: "PERSONAL" });
        assert.equal((await migrationEvents(id)).length, 2);
        assert.equal((await listTickets(companyA1)).get(`11${p}0000000001`)?.creditUsageType, "PERSONAL");
      });

      test("a company admin migrates its own company's credits only; the TMC admin any company's of its TMC", async () => {
        const mine = await seed(companyA1, [spec(`12${p}0000000001`)]);
        const sibling = await seed(companyA2, [spec(`12${p}0000000002`)]);
        const byCompanyAdmin = await migrate(
          face,
          {
            paymentSourceIds: [mine[`12${p}0000000001`], sibling[`12${p}0000000002`]],
            updateCreditUsageTypeTo: "COMPANY",
          },
          tokens.companyA1!,
        );
        assert.deepEqual(
          (byCompanyAdmin.body.migrationStatus as any[]).map((m) => [m.status, m.failureReason || undefined]),
          [
            ["SUCCESS", undefined],
            ["FAILED", "PAYMENT_SOURCE_NOT_FOUND"],
          ],
        );
        const byTmcAdmin = await migrate(face, {
          paymentSourceIds: [sibling[`12${p}0000000002`]],
          updateCreditUsageTypeTo: "COMPANY",
        });
        assert.deepEqual(
          (byTmcAdmin.body.migrationStatus as any[]).map((m) => m.status),
          ["SUCCESS"],
        );
        const byOtherTmc = await migrate(
          face,
          { paymentSourceIds: [mine[`12${p}0000000001`]], updateCreditUsageTypeTo: "PERSONAL" },
          tokens.tmcB!,
        );
        assert.deepEqual(
          (byOtherTmc.body.migrationStatus as any[]).map((m) => [m.status, m.failureReason]),
          [["FAILED", "PAYMENT_SOURCE_NOT_FOUND"]],
        );
      });

      test("concurrent migrations of one id: all succeed, exactly one change is audited", async () => {
        const ids = await seed(companyA1, [spec(`13${p}0000000001`)]);
        const id = ids[`13${p}0000000001`]!;
        const answers = await Promise.all(
          Array.from({ length: 8 }, () =>
            migrate(face, { paymentSourceIds: [id], updateCreditUsageTypeTo: "COMPANY" }),
          ),
        );
        for (const a of answers)
          assert.deepEqual(
            (a.body.migrationStatus as any[]).map((m) => m.status),
            ["SUCCESS"],
            JSON.stringify(a.body),
          );
        assert.equal((await migrationEvents(id)).length, 1);
      });

      test("validation: the target type unknown, missing or CREDIT_USAGE_TYPE_UNKNOWN → 400", async () => {
        const id = uuid();
        assertErrorAnswer(
          await migrate(face, { paymentSourceIds: [id], updateCreditUsageTypeTo: "CREDIT_USAGE_TYPE_UNKNOWN" }),
          400,
          "API_VALIDATION_FAILED",
          "updateCreditUsageTypeTo",
        );
        assertErrorAnswer(
          await migrate(face, { paymentSourceIds: [id] }),
          400,
          "API_VALIDATION_FAILED",
          "updateCreditUsageTypeTo",
        );
      });

      test("validation: no ids, more than 100, or an id longer than 64 characters → 400", async () => {
        assertErrorAnswer(
          await migrate(face, { paymentSourceIds: [], updateCreditUsageTypeTo: "COMPANY" }),
          400,
          "API_VALIDATION_FAILED",
          "paymentSourceIds",
        );
        const many = Array.from({ length: 101 }, () => uuid());
        assertErrorAnswer(
          await migrate(face, { paymentSourceIds: many, updateCreditUsageTypeTo: "COMPANY" }),
          400,
          "API_VALIDATION_FAILED",
          "paymentSourceIds",
        );
        assertErrorAnswer(
          await migrate(face, { paymentSourceIds: [uuid(), "x".repeat(65)], updateCreditUsageTypeTo: "COMPANY" }),
          400,
          "API_VALIDATION_FAILED",
          "paymentSourceIds[1]",
        );
      });

      test("a malformed id is answered FAILED for itself, the other ids are migrated", async () => {
        const ids = await seed(companyA1, [spec(`14${p}0000000001`)]);
        const good = ids[`14${p}0000000001`]!;
        const answer = await migrate(face, {
          paymentSourceIds: ["nope", good, "1234"],
          updateCreditUsageTypeTo: "COMPANY",
        });
        assert.equal(answer.status, 200, JSON.stringify(answer.body));
        assert.deepEqual(
          (answer.body.migrationStatus as any[]).map((m) => [
            m.paymentSourceId,
            m.status,
            m.failureReason || undefined,
          ]),
          [
            ["nope", "FAILED", "PAYMENT_SOURCE_NOT_FOUND"],
            [good, "SUCCESS", undefined],
            ["1234", "FAILED", "PAYMENT_SOURCE_NOT_FOUND"],
          ],
        );
        assert.equal((await migrationEvents(good)).length, 1);
      });

      test("authentication and scope: no token 401, a read-only token 403", async () => {
        assertErrorAnswer(
          await migrate(face, { paymentSourceIds: [uuid()], updateCreditUsageTypeTo: "COMPANY" }, null),
          401,
          "USER_NOT_AUTHENTICATED",
        );
        assertErrorAnswer(
          await migrate(face, { paymentSourceIds: [uuid()], updateCreditUsageTypeTo: "COMPANY" }, tokens.readOnly!),
          403,
          "PERMISSION_DENIED",
        );
      });
    });
  }

  test("REST: an unknown target type string → 400", async () => {
    assertErrorAnswer(
      await rest(
        running.baseUrl,
        MIGRATE_PATH,
        { paymentSourceIds: [uuid()], updateCreditUsageTypeTo: "BOGUS" },
        tokens.tmcA,
      ),
      400,
      "API_VALIDATION_FAILED",
      "updateCreditUsageTypeTo",
    );
  });

  describe("import", () => {
    const importRaw = (companyId: string, credits: unknown[]) =>
      fetch(`${running.baseUrl}/travel.operator.v1.OperatorService/ImportAirCredits`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${serviceEnv(running.storage).OPERATOR_TOKEN}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ companyId, credits }),
      });

    test("invalid rows are reported by index with the reason, and nothing is imported", async () => {
      const before = (await listTickets(companyA2)).size;
      const good = creditJson(spec("2000000000001"));
      const rows = [
        good,
        { ...creditJson(spec("2000000000002")), ticketNumber: undefined },
        creditJson(spec("2000000000003")),
        { ...creditJson(spec("2000000000004")), expiryDate: { iso8601: "2027-02-30" } },
        { ...creditJson(spec("2000000000005")), totalFare: { amount: "12.3456", currencyCode: "usd" } },
        { ...creditJson(spec("2000000000006")), status: "LOST" },
        creditJson(spec("2000000000001")),
      ];
      const response = await importRaw(companyA2, rows);
      assert.equal(response.status, 400);
      const body = (await response.json()) as any;
      const detail = body.details[0].debug;
      assert.equal(detail.errorMessages[0].errorCode, "API_VALIDATION_FAILED");
      assert.equal(detail.errorMessages[0].message, "5 of 7 credits are invalid; nothing was imported");
      assert.deepEqual(
        detail.errorMessages[0].errorParameters.map((p: any) => p.name),
        [
          "credits[1].ticketNumber",
          "credits[3].expiryDate.iso8601",
          "credits[4].totalFare.currencyCode",
          "credits[4].totalFare.amount",
          "credits[5].status",
          "credits[6].ticketNumber",
        ],
      );
      assert.equal(detail.errorMessages[0].errorParameters[0].value, "is required");
      assert.equal(detail.errorMessages[0].errorParameters[5].value, "repeats the ticket number of credits[0]");
      assert.equal((await listTickets(companyA2)).size, before, "not even the valid rows were imported");
    });

    test("a date-time with an offset keeps its instant: shown in UTC, filtered by its UTC day", async () => {
      const rows = [
        { ...creditJson(spec("2400000000001")), expiryDate: { iso8601: "2030-12-31T23:30:00-05:00" } },
        {
          ...creditJson(spec("2400000000002")),
          expiryDate: { iso8601: "2030-12-31T22:00+0100" },
          issueDate: { iso8601: "2030-01-01T00:00:00.250Z" },
        },
        { ...creditJson(spec("2400000000003")), expiryDate: { iso8601: "2030-12-31" } },
      ];
      assert.equal((await importCredits(running.baseUrl, companyA2, rows)).created, 3);
      const listed = await listTickets(companyA2);
      assert.deepEqual(listed.get("2400000000001")!.expiryDate, { iso8601: "2031-01-01T04:30:00Z" });
      assert.deepEqual(listed.get("2400000000002")!.expiryDate, { iso8601: "2030-12-31T21:00:00Z" });
      assert.deepEqual(listed.get("2400000000002")!.issueDate, { iso8601: "2030-01-01T00:00:00Z" });
      assert.deepEqual(listed.get("2400000000003")!.expiryDate, { iso8601: "2030-12-31T00:00:00Z" });
      const onDay = async (iso8601: string) => {
        const answer = await rest(
          running.baseUrl,
          LIST_PATH,
          {
            companyId: { id: companyA2 },
            companyCreditFilter: { expiryDateRange: { expiryDateStart: { iso8601 }, expiryDateEnd: { iso8601 } } },
          },
          tokens.tmcA,
        );
        return (answer.body.unusedCreditInfos as Array<{ ticketNumber: string }>)
          .map((c) => c.ticketNumber)
          .filter((t) => t.startsWith("24"))
          .sort();
      };
      assert.deepEqual(await onDay("2030-12-31"), ["2400000000002", "2400000000003"]);
      assert.deepEqual(await onDay("2031-01-01"), ["2400000000001"]);
      // A time without Z or an offset names no instant: refused, naming the field.
      const response = await importRaw(companyA2, [
        { ...creditJson(spec("2400000000004")), expiryDate: { iso8601: "2030-12-31T23:30:00" } },
      ]);
      assert.equal(response.status, 400);
      const detail = ((await response.json()) as any).details[0].debug;
      assert.deepEqual(
        detail.errorMessages[0].errorParameters.map((p: any) => p.name),
        ["credits[0].expiryDate.iso8601"],
      );
    });

    test("re-importing a ticket number updates the credit instead of duplicating it, keeping its payment source", async () => {
      const first = await importCredits(running.baseUrl, companyA2, [
        creditJson(spec("2100000000001")),
        creditJson(spec("2100000000002")),
      ]);
      assert.equal(first.created, 2);
      const was = (await listTickets(companyA2)).get("2100000000001")!;
      const again = await importCredits(running.baseUrl, companyA2, [
        creditJson(spec("2100000000001", { fop: "Visa Gold", pcc: "P9" })),
        creditJson(spec("2100000000003")),
      ]);
      assert.equal(again.created, 1);
      assert.equal(again.updated, 1);
      const now = await listTickets(companyA2);
      assert.equal(now.get("2100000000001")!.fopLabel, "Visa Gold");
      assert.equal(now.get("2100000000001")!.pcc, "P9");
      assert.equal(now.get("2100000000001")!.paymentSourceId, was.paymentSourceId);
      assert.equal([...now.keys()].filter((k) => k === "2100000000001").length, 1);
    });

    test("an unknown company → 404; a payment source id of another company → 409", async () => {
      assert.equal((await importRaw(uuid(), [creditJson(spec("2200000000001"))])).status, 404);
      const ids = await seed(companyA1, [spec("2200000000002")]);
      assert.equal(
        (await importRaw(companyA2, [creditJson(spec("2200000000003", { paymentSourceId: ids["2200000000002"] }))]))
          .status,
        409,
      );
    });

    test("the CLI: `credits import` prints the counts; a bad file is reported by row, exit 2, nothing imported", async () => {
      const dir = newTempDir("air-credits-cli-");
      try {
        const env = { ...serviceEnv(running.storage), SERVER_URL: running.baseUrl, ADMIN_URL: running.baseUrl };
        const goodFile = path.join(dir, "good.json");
        fs.writeFileSync(
          goodFile,
          JSON.stringify([creditJson(spec("2300000000001")), creditJson(spec("2300000000002"))]),
        );
        const ok = await runCli(["credits", "import", "--company-id", companyA2, "--file", goodFile], env);
        assert.equal(ok.code, 0, ok.stderr);
        assert.deepEqual(JSON.parse(ok.stdout), { companyId: companyA2, created: 2, updated: 0 });
        const badFile = path.join(dir, "bad.json");
        fs.writeFileSync(
          badFile,
          JSON.stringify([
            creditJson(spec("2300000000003")),
            { ...creditJson(spec("2300000000004")), airlineCode: "American" },
          ]),
        );
        const bad = await runCli(["credits", "import", "--company-id", companyA2, "--file", badFile], env);
        assert.equal(bad.code, 2, bad.stderr);
        assert.match(bad.stderr, /1 of 2 credits are invalid; nothing was imported/);
        assert.match(bad.stderr, /credits\[1\]\.airlineCode=must be a 2-character IATA airline code/);
        assert.equal((await listTickets(companyA2)).has("2300000000003"), false);
        const notArray = path.join(dir, "object.json");
        fs.writeFileSync(notArray, "{}");
        const usage = await runCli(["credits", "import", "--company-id", companyA2, "--file", notArray], env);
        assert.equal(usage.code, 2);
        assert.match(usage.stderr, /must hold a JSON array/);
      } finally {
        removeTempDir(dir);
      }
    });
  });
});
