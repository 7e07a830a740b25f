// Property tests of the SCIM surface with a VALID SCIM token (the other fuzz files never get past
// authentication here): generated filters, list parameters, user bodies and PATCH bodies reach
// the filter parser, scim-patch and the database, and every answer is a 2xx or a SCIM 4xx error
// (application/scim+json, schemas, status, detail) — never a 5xx. Seeds: see test/fuzz/fuzz-kit.ts.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import { backend, TEST_OPERATOR_TOKEN } from "../helpers/backend.js";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";
import { FUZZ_RUNS, FUZZ_SEED, fuzzParams } from "../fuzz/fuzz-kit.js";
import { ERROR_SCHEMA, PATCH_OP, USER_SCHEMA, type ScimTenant } from "./scim-kit.js";

const RUNS = Math.max(20, Math.round(FUZZ_RUNS / 2));

/** Filter-ish text: real attribute names, operators, quotes, brackets and junk, glued together. */
const filterText = fc
  .array(
    fc.oneof(
      fc.constantFrom("userName", "externalId", "emails", "emails.value", "emails[type eq \"work\"]", "name.givenName", "active", "id", "meta.created", "title", "urn:ietf:params:scim:schemas:core:2.0:User:userName"),
      fc.constantFrom(" eq ", " ne ", " co ", " sw ", " ew ", " gt ", " pr", " and ", " or ", "not ", "(", ")", "[", "]", ".", "\""),
      fc.constantFrom('"ada@a.example"', "true", "false", "null", "42", '"2026-01-01T00:00:00Z"', "'x'", '"%_\\\\"'),
      fc.string({ maxLength: 6 }),
    ),
    { maxLength: 12 },
  )
  .map((parts) => parts.join(""));

const scimValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.string({ maxLength: 12 }),
    fc.constantFrom("True", "False", "ada@a.example", "", "__proto__"),
    fc.boolean(),
    fc.integer(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom("value", "type", "primary", "givenName", "familyName", "active", "userName", "__proto__", "a.b"), tie("value"), { maxKeys: 3 }),
  ),
})).value;

const userBody = fc.record(
  {
    schemas: fc.oneof(fc.constant([USER_SCHEMA]), fc.constant([]), scimValue),
    userName: fc.oneof(fc.emailAddress(), scimValue),
    name: fc.oneof(fc.record({ givenName: fc.string({ maxLength: 10 }), familyName: fc.string({ maxLength: 10 }) }), scimValue),
    active: fc.oneof(fc.boolean(), fc.constantFrom("True", "False", "yes"), scimValue),
    externalId: fc.oneof(fc.string({ maxLength: 10 }), scimValue),
    emails: scimValue,
    phoneNumbers: scimValue,
  },
  { requiredKeys: [] },
);

const operation = fc.record(
  {
    op: fc.oneof(fc.constantFrom("add", "Add", "replace", "Replace", "REMOVE", "remove", "copy"), scimValue),
    path: fc.oneof(
      fc.constantFrom("active", "userName", "name.givenName", "externalId", "emails[type eq \"work\"].value", "emails[type eq \"home\"].value", "title", "id", "meta.created", "name..x", "emails[", "__proto__.x", "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department"),
      fc.string({ maxLength: 10 }),
      scimValue,
    ),
    value: scimValue,
  },
  { requiredKeys: [] },
);

const patchBody = fc.record({ schemas: fc.oneof(fc.constant([PATCH_OP]), scimValue), Operations: fc.oneof(fc.array(operation, { maxLength: 4 }), scimValue) }, { requiredKeys: [] });

describe(`SCIM properties with a valid token (${backend}, seed ${FUZZ_SEED}, ${RUNS} runs)`, () => {
  let running: RunningService;
  let a: ScimTenant;
  let userId: string;
  before(async () => {
    running = await startService({ listen: false });
    a = await newScimCompanyInProcess();
    const created = await inject("POST", "/v2/scim/v2/Users", { schemas: [USER_SCHEMA], userName: "fuzz.target@a.example" });
    assert.equal(created.statusCode, 201, created.body);
    userId = JSON.parse(created.body).id;
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  async function newScimCompanyInProcess(): Promise<ScimTenant> {
    // The operator RPCs over the in-process app (no port).
    const call = async (method: string, body: object) => {
      const response = await running.service.app.inject({
        method: "POST",
        url: `/travel.operator.v1.OperatorService/${method}`,
        headers: { authorization: `Bearer ${TEST_OPERATOR_TOKEN}`, "content-type": "application/json" },
        payload: JSON.stringify(body),
      });
      assert.equal(response.statusCode, 200, response.body);
      return JSON.parse(response.body) as Record<string, string>;
    };
    const { tmcId } = await call("CreateTmc", { name: "fuzz" });
    const { orgId } = await call("CreateCompany", { tmcId, name: "fuzz co" });
    const { clientId, scimToken } = await call("CreateApiUser", { tmcId, orgId, role: "COMPANY_ADMIN", credentialType: "SCIM_TOKEN" });
    return { tmcId: tmcId!, orgId: orgId!, clientId: clientId!, scimToken: scimToken! };
  }

  function inject(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", url: string, body?: unknown) {
    return running.service.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${a.scimToken}`, ...(body !== undefined ? { "content-type": "application/scim+json" } : {}) },
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
  }

  function assertScimAnswer(response: { statusCode: number; headers: Record<string, unknown>; body: string }, context: string) {
    assert.ok(response.statusCode < 500, `${response.statusCode} for ${context}: ${response.body.slice(0, 300)}`);
    if (response.statusCode < 400) return;
    assert.match(String(response.headers["content-type"]), /^application\/scim\+json/, context);
    const body = JSON.parse(response.body);
    assert.deepEqual(body.schemas, [ERROR_SCHEMA], context);
    assert.equal(body.status, String(response.statusCode), context);
    assert.equal(typeof body.detail, "string", context);
    if (response.statusCode === 400) assert.ok(typeof body.scimType === "string" && body.scimType.length > 0, `400 without scimType for ${context}: ${response.body}`);
  }

  test("list: any filter, startIndex, count, attributes", async () => {
    await fc.assert(
      fc.asyncProperty(filterText, fc.option(fc.integer({ min: -5, max: 300 })), fc.option(fc.integer({ min: -5, max: 1000 })), fc.option(fc.constantFrom("userName", "emails,meta", "x..y")), async (filter, startIndex, count, attributes) => {
        const query = new URLSearchParams({ filter, ...(startIndex !== null ? { startIndex: String(startIndex) } : {}), ...(count !== null ? { count: String(count) } : {}), ...(attributes !== null ? { attributes } : {}) });
        const response = await inject("GET", `/v2/scim/v2/Users?${query}`);
        assertScimAnswer(response, `filter ${JSON.stringify(filter)}`);
        if (response.statusCode === 200) {
          const list = JSON.parse(response.body);
          assert.ok(list.itemsPerPage <= 200 && list.Resources.length === list.itemsPerPage);
        }
      }),
      fuzzParams(RUNS),
    );
  });

  test("create and replace: any body", async () => {
    await fc.assert(
      fc.asyncProperty(userBody, async (body) => {
        assertScimAnswer(await inject("POST", "/v2/scim/v2/Users", body), `POST ${JSON.stringify(body)}`);
        assertScimAnswer(await inject("PUT", `/v2/scim/v2/Users/${userId}`, body), `PUT ${JSON.stringify(body)}`);
      }),
      fuzzParams(RUNS),
    );
  });

  test("patch: any PatchOp-ish body; nothing reaches Object.prototype", async () => {
    await fc.assert(
      fc.asyncProperty(patchBody, async (body) => {
        assertScimAnswer(await inject("PATCH", `/v2/scim/v2/Users/${userId}`, body), `PATCH ${JSON.stringify(body)}`);
        assert.equal(Object.keys(Object.prototype).length, 0, "Object.prototype untouched");
      }),
      fuzzParams(RUNS),
    );
  });
});
