import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Knex } from "knex";
import { internalsOf } from "../../src/app/test-access.js";
import { creditJson, creditSpec, importCredits, LIST_PATH, rest } from "../air-credits/air-credit-kit.js";
import { callApi } from "../helpers/api.js";
import { backend } from "../helpers/backend.js";
import { operatorCall, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  disposeService,
  newApiUser,
  newTenant,
  ROOMY_RATE_LIMITS,
  startTokenService,
  type Tenant,
} from "../helpers/token-kit.js";
import { newScimCompany, scim, type ScimTenant } from "../scim/scim-kit.js";

/**
 * A list request reads its page and the page's total in one statement (one round trip to the
 * database), on Postgres and on the embedded PGlite alike: the statements the instance sends
 * while it answers are recorded from Knex's query events. The background jobs that query on a
 * timer (the readiness ping too) are slowed down and the audit buffer is written first, so that only the request's own
 * statements are seen, and each request is sent once before it is measured, so caches (the
 * credential generations, client records) are warm.
 */
describe(`one round trip per list request (${backend})`, () => {
  let running: RunningService;
  let db: Knex;
  let tenant: Tenant;
  let token: string;
  let scimTenant: ScimTenant;

  before(async () => {
    running = await startTokenService({
      env: {
        ...ROOMY_RATE_LIMITS,
        CREDENTIAL_RECONCILE_INTERVAL_MS: "3600000",
        CREDENTIAL_LOG_PRUNE_INTERVAL_MS: "3600000",
        HEALTH_WATCH_INTERVAL_MS: "3600000",
        SIGNING_KEY_RELOAD_INTERVAL_MS: "600000",
        // The readiness check pings the request pool (`select 1`) every second: it landed in a
        // measured window once (embedded tier, this machine).
        READINESS_INTERVAL_MS: "60000",
      },
    });
    db = internalsOf(running.service).db;
    const base = running.baseUrl;
    tenant = await newTenant(base);
    for (let i = 0; i < 3; i++) await newApiUser(base, tenant.tmcId, "TMC_ADMIN");
    token = await accessTokenOf(base, tenant.admin);
    scimTenant = await newScimCompany(base, tenant.tmcId, "SCIM company");
    for (const name of ["ada", "grace", "edsger"]) {
      const created = await scim(running, scimTenant.scimToken, "POST", "/v2/scim/v2/Users", {
        schemas: ["urn:ietf:params:scim:schemas:core:2.0:User"],
        userName: `${name}@example.com`,
        name: { givenName: name, familyName: "Test" },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
    }
    const credits = [1, 2, 3].map((n) => creditJson(creditSpec(`001000000000${n}`, { expiresIn: 10 * n })));
    assert.equal((await importCredits(base, tenant.orgId, credits)).created, 3);
  });

  after(async () => {
    await disposeService(running);
  });

  /** The statements sent while `request` runs (after one unmeasured run of it), and its answer. */
  async function statementsOf<T>(request: () => Promise<T>): Promise<{ statements: string[]; answer: T }> {
    await request();
    // Tokens issued while setting up are audited off the request path; write them now, or their
    // batch lands in the window and is counted as the request's.
    await internalsOf(running.service).domain.auditLog.flush();
    const statements: string[] = [];
    const record = (query: { sql?: string }) => statements.push(query.sql ?? "?");
    db.on("query", record);
    try {
      return { statements, answer: await request() };
    } finally {
      db.removeListener("query", record);
    }
  }

  /** The statements that read `table` (as `from "table"`, `from table` or `from "schema"."table"`). */
  const reading = (statements: string[], table: string) =>
    statements.filter((sql) => new RegExp(`\\bfrom (?:"?\\w+"?\\.)?"?${table}"?[\\s)]`, "i").test(`${sql} `));

  const apiUsersPage = (query: string) => async () => {
    const response = await callApi(running.baseUrl, `/v2/api-users?${query}`, token);
    assert.equal(response.status, 200);
    return (await response.json()) as { apiUsers?: unknown[]; totalCount: number };
  };

  for (const [query, listed] of [
    ["limit=2&offset=1", 2],
    ["limit=0", 0],
    ["offset=100", 0],
  ] as const) {
    test(`GET /v2/api-users?${query}: one statement, the page and the total`, async () => {
      const { statements, answer } = await statementsOf(apiUsersPage(query));
      assert.equal(answer.totalCount, 5);
      assert.equal(answer.apiUsers?.length ?? 0, listed);
      assert.equal(statements.length, 1, statements.join("\n"));
    });
  }

  test("SCIM GET /Users, a page and a page past the end: one statement that reads users", async () => {
    for (const query of ["startIndex=2&count=1", "startIndex=50", "count=0"]) {
      const { statements, answer } = await statementsOf(() =>
        scim(running, scimTenant.scimToken, "GET", `/v2/scim/v2/Users?${query}`),
      );
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      assert.equal(answer.body.totalResults, 3, query);
      assert.equal(reading(statements, "users").length, 1, `${query}:\n${statements.join("\n")}`);
    }
  });

  test("air credits list, a page and a page past the end: one statement for the page and its total", async () => {
    for (const offset of [1, 50]) {
      const { statements, answer } = await statementsOf(() =>
        rest(running.baseUrl, LIST_PATH, { companyId: { id: tenant.orgId }, offset }, token),
      );
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      assert.equal(Number(answer.body.paginationParams?.totalRecords), 3);
      // The distinct filter values (three loose index scans) read air_credits in statements of their own.
      const pages = reading(statements, "air_credits").filter((sql) => !/with recursive/i.test(sql));
      assert.equal(pages.length, 1, `offset ${offset}:\n${statements.join("\n")}`);
    }
  });

  test("the operator's ListTmcs and ListApiUsers: one statement for each page and its total", async () => {
    const tmcs = await statementsOf(() =>
      operatorCall<{ totalCount: number }>(running.baseUrl, "ListTmcs", { limit: 1, offset: 1000 }),
    );
    assert.ok(Number(tmcs.answer.totalCount) >= 1, JSON.stringify(tmcs.answer));
    assert.equal(tmcs.statements.length, 1, tmcs.statements.join("\n"));
    const users = await statementsOf(() =>
      operatorCall<{ totalCount: number }>(running.baseUrl, "ListApiUsers", { tmcId: tenant.tmcId, limit: 2 }),
    );
    assert.equal(Number(users.answer.totalCount), 5, JSON.stringify(users.answer));
    assert.equal(reading(users.statements, "api_users").length, 1, users.statements.join("\n"));
  });

  test("the operator's ListResourceServers: one statement for the page, its audiences and the total", async () => {
    for (const i of [1, 2, 3])
      await operatorCall(running.baseUrl, "CreateResourceServer", {
        name: `Listed ${i}`,
        audiences: [`https://listed-${i}.example/api`, `urn:listed:${i}`],
      });
    for (const [offset, listed] of [
      [1, 2],
      [1000, 0],
    ] as const) {
      const { statements, answer } = await statementsOf(() =>
        operatorCall<{ resourceServers?: Array<{ audiences: string[] }>; totalCount: number }>(
          running.baseUrl,
          "ListResourceServers",
          { limit: 2, offset },
        ),
      );
      assert.equal(answer.totalCount, 3, JSON.stringify(answer));
      assert.equal(answer.resourceServers?.length ?? 0, listed);
      for (const server of answer.resourceServers ?? []) assert.equal(server.audiences.length, 2);
      assert.equal(statements.length, 1, statements.join("\n"));
    }
  });
});
