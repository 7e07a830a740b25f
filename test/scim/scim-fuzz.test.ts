// Property tests of the SCIM surface with a VALID SCIM token (the other fuzz files never get past
// authentication here): generated filters, list parameters, user bodies and PATCH bodies reach
// the filter parser, scim-patch and the database, and every answer is a 2xx or a SCIM 4xx error
// (application/scim+json, schemas, status, detail) — never a 5xx. The filter grammar (RFC 7644
// 3.4.2.2) is generated from its parts: attribute names from a vocabulary with Object.prototype's
// keys, every operator × every attribute type, values of every type and extreme dates (year 0000,
// offsets across a year's edge); any such filter is 200 or 400 invalidFilter, and one built only
// of supported attributes, allowed operators and typed values is 200 (these
// properties fail on the code before that fix). String values also come with JSON escapes (`\u0000`,
// `\u001f`, lone `\ud800`/`\udc00`, `\"`, `\\`): one that decodes to text the text rule refuses is
// 400 invalidFilter, never the database's 500. `npm test` runs RUNS cases per property;
// `bash scripts/fuzz.sh test/scim/scim-fuzz.test.ts` many more. Seeds: see test/fuzz/fuzz-kit.ts.
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
      fc.constantFrom(
        "userName",
        "externalId",
        "emails",
        "emails.value",
        'emails[type eq "work"]',
        "name.givenName",
        "active",
        "id",
        "meta.created",
        "title",
        "urn:ietf:params:scim:schemas:core:2.0:User:userName",
      ),
      fc.constantFrom(
        " eq ",
        " ne ",
        " co ",
        " sw ",
        " ew ",
        " gt ",
        " pr",
        " and ",
        " or ",
        "not ",
        "(",
        ")",
        "[",
        "]",
        ".",
        '"',
      ),
      fc.constantFrom('"ada@a.example"', "true", "false", "null", "42", '"2026-01-01T00:00:00Z"', "'x'", '"%_\\\\"'),
      fc.string({ maxLength: 6 }),
    ),
    { maxLength: 12 },
  )
  .map((parts) => parts.join(""));

// ---- the filter grammar (RFC 7644 3.4.2.2), built from parts ---------------------------------------

/** Every operator, and the attribute types the service filters on with the operators each allows. */
const COMPARE_OPERATORS = ["eq", "ne", "co", "sw", "ew", "gt", "ge", "lt", "le"] as const;
const STRING_ATTRIBUTES = ["userName", "emails", "emails.value", "externalId", "name.givenName", "name.familyName"];
const SUPPORTED: ReadonlyArray<{ names: readonly string[]; ops: readonly string[]; value: fc.Arbitrary<string> }> = [
  {
    names: STRING_ATTRIBUTES,
    ops: ["eq", "ne", "co", "sw", "ew"],
    value: fc.string({ maxLength: 12 }).map((t) => JSON.stringify(t)),
  },
  {
    names: ["id"],
    ops: ["eq", "ne"],
    value: fc.oneof(fc.uuid(), fc.string({ maxLength: 12 })).map((t) => JSON.stringify(t)),
  },
  { names: ["active"], ops: ["eq", "ne"], value: fc.constantFrom("true", "false", '"True"', '"false"') },
  {
    names: ["meta.created", "meta.lastModified"],
    ops: ["eq", "gt", "ge", "lt", "le"],
    value: fc
      .date({ min: new Date("0002-01-01T00:00:00Z"), max: new Date("9998-12-31T23:59:59Z"), noInvalidDate: true })
      .map((d) => JSON.stringify(d.toISOString())),
  },
];

/** Attribute names: the supported ones in any case and with the schema URN, Object.prototype's keys, and others. */
const attributeName = fc.oneof(
  fc.constantFrom(
    ...SUPPORTED.flatMap((a) => a.names),
    "emails.type",
    "emails.primary",
    "name",
    "meta",
    "title",
    "displayName",
    "groups",
    "x.y.z",
  ),
  fc.constantFrom(
    ...Object.getOwnPropertyNames(Object.prototype),
    "prototype",
    "__proto__.x",
    "constructor.name",
    "emails.__proto__",
    "name.constructor",
  ),
  fc
    .constantFrom(...STRING_ATTRIBUTES, "id", "meta.created")
    .map((n) => `urn:ietf:params:scim:schemas:core:2.0:User:${n}`),
  fc.constantFrom("USERNAME", "Active", "META.CREATED", "iD", "Name.GivenName"),
);

/** Date-times at and beyond the edges: year 0000, offsets that cross a year boundary, impossible fields. */
const extremeDate = fc
  .tuple(
    fc.oneof(fc.constantFrom(0, 1, 9999), fc.integer({ min: 0, max: 9999 })),
    fc.integer({ min: 0, max: 13 }),
    fc.integer({ min: 0, max: 32 }),
    fc.integer({ min: 0, max: 25 }),
    fc.constantFrom("Z", "+01:00", "-01:00", "+14:00", "-12:00", "", ".999999999Z", "+24:00"),
  )
  .map(
    ([y, mo, d, h, zone]) =>
      `${String(y).padStart(4, "0")}-${String(mo).padStart(2, "0")}-${String(d).padStart(2, "0")}T${String(h).padStart(2, "0")}:59:59${zone}`,
  );

/**
 * Strings as a client writes them in a filter, with JSON escapes: characters the text rule refuses
 * (NUL, other C0 controls, DEL, lone surrogates of either half) and ones it allows (a quote, a
 * backslash, a surrogate pair, tab), among plain text; JSON.stringify writes each control character
 * and lone surrogate as its \uXXXX escape, so the filter text itself stays clean.
 */
const FORBIDDEN_PIECES = ["\u0000", "\u0001", "\u001f", "\u007f", "\ud800", "\udbff", "\udc00", "\udfff"];
const escapedValue = fc
  .array(
    fc.oneof(
      fc.constantFrom(...FORBIDDEN_PIECES),
      fc.constantFrom('"', "\\", "\ud83d\ude00", "\t", "é"),
      fc.string({ maxLength: 4 }),
    ),
    { maxLength: 6 },
  )
  .map((parts) => parts.join(""));
/** An escaped string that holds at least one character the text rule refuses. */
const escapedForbiddenValue = fc
  .tuple(escapedValue, fc.constantFrom(...FORBIDDEN_PIECES), escapedValue)
  // The dots keep a lone surrogate from pairing with a neighbour into a valid character.
  .map(([x, bad, y]) => `${x}.${bad}.${y}`);
// JSON.stringify leaves DEL as it is; a client may escape it too.
const asFilterString = (text: string) => JSON.stringify(text).replace(/\u007f/g, "\\u007F");

/** Comparison values of every type the grammar has, and the wrong ones. */
const filterValue = fc.oneof(
  fc.string({ maxLength: 12 }).map((t) => JSON.stringify(t)),
  fc.uuid().map((t) => JSON.stringify(t)),
  extremeDate.map((t) => JSON.stringify(t)),
  fc.constantFrom(
    "true",
    "false",
    "null",
    "0",
    "-1",
    "1e308",
    '"+275760-09-13T00:00:00Z"',
    '"-000001-01-01T00:00:00Z"',
    '"2026-02-30T00:00:00Z"',
    '"%_\\"',
    '"\u0000"',
  ),
  escapedValue.map(asFilterString),
);

/** Any leaf: every attribute name × every operator × every value type (most are refused, none may fail). */
const anyLeaf = fc.oneof(
  fc.tuple(attributeName, fc.constantFrom(...COMPARE_OPERATORS), filterValue).map(([a, op, v]) => `${a} ${op} ${v}`),
  attributeName.map((a) => `${a} pr`),
  // The date attributes meet the extreme dates often, not by chance alone.
  fc
    .tuple(fc.constantFrom("meta.created", "meta.lastModified"), fc.constantFrom(...COMPARE_OPERATORS), extremeDate)
    .map(([a, op, d]) => `${a} ${op} "${d}"`),
  fc
    .tuple(
      fc.constantFrom("emails", "__proto__", "constructor", "name"),
      attributeName,
      fc.constantFrom(...COMPARE_OPERATORS),
      filterValue,
    )
    .map(([a, sub, op, v]) => `${a}[${sub} ${op} ${v}]`),
);

/** A leaf that is supported by construction: a supported attribute, an operator it allows, a value of its type. */
const supportedLeaf = fc.oneof(
  ...SUPPORTED.map((a) =>
    fc.tuple(fc.constantFrom(...a.names), fc.constantFrom(...a.ops), a.value).map(([n, op, v]) => `${n} ${op} ${v}`),
  ),
  fc.constantFrom(...SUPPORTED.flatMap((a) => a.names)).map((n) => `${n} pr`),
  fc.constantFrom('emails[type eq "work"]', "emails[primary eq true]", "emails[value pr]"),
);

/** and / or / not / parentheses over leaves, at most a few levels deep. */
function filterOver(leaf: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.letrec<{ node: string }>((tie) => ({
    node: fc.oneof(
      { depthSize: "small", maxDepth: 4, withCrossShrink: true },
      leaf,
      fc.tuple(tie("node"), tie("node")).map(([x, y]) => `(${x}) and (${y})`),
      fc.tuple(tie("node"), tie("node")).map(([x, y]) => `${x} or ${y}`),
      tie("node").map((x) => `not (${x})`),
    ),
  })).node;
}

const scimValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.string({ maxLength: 12 }),
    fc.constantFrom("True", "False", "ada@a.example", "", "__proto__"),
    fc.boolean(),
    fc.integer(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 3 }),
    fc.dictionary(
      fc.constantFrom("value", "type", "primary", "givenName", "familyName", "active", "userName", "__proto__", "a.b"),
      tie("value"),
      { maxKeys: 3 },
    ),
  ),
})).value;

const userBody = fc.record(
  {
    schemas: fc.oneof(fc.constant([USER_SCHEMA]), fc.constant([]), scimValue),
    userName: fc.oneof(fc.emailAddress(), scimValue),
    name: fc.oneof(
      fc.record({ givenName: fc.string({ maxLength: 10 }), familyName: fc.string({ maxLength: 10 }) }),
      scimValue,
    ),
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
      fc.constantFrom(
        "active",
        "userName",
        "name.givenName",
        "externalId",
        'emails[type eq "work"].value',
        'emails[type eq "home"].value',
        "title",
        "id",
        "meta.created",
        "name..x",
        "emails[",
        "__proto__.x",
        "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department",
      ),
      fc.string({ maxLength: 10 }),
      scimValue,
    ),
    value: scimValue,
  },
  { requiredKeys: [] },
);

const patchBody = fc.record(
  {
    schemas: fc.oneof(fc.constant([PATCH_OP]), scimValue),
    Operations: fc.oneof(fc.array(operation, { maxLength: 4 }), scimValue),
  },
  { requiredKeys: [] },
);

describe(`SCIM properties with a valid token (${backend}, seed ${FUZZ_SEED}, ${RUNS} runs)`, () => {
  let running: RunningService;
  let a: ScimTenant;
  let userId: string;
  before(async () => {
    running = await startService({ listen: false });
    a = await newScimCompanyInProcess();
    const created = await inject("POST", "/v2/scim/v2/Users", {
      schemas: [USER_SCHEMA],
      userName: "fuzz.target@a.example",
    });
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
    const { clientId, scimToken } = await call("CreateApiUser", {
      tmcId,
      orgId,
      role: "COMPANY_ADMIN",
      credentialType: "SCIM_TOKEN",
    });
    return { tmcId: tmcId!, orgId: orgId!, clientId: clientId!, scimToken: scimToken! };
  }

  function inject(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", url: string, body?: unknown) {
    return running.service.app.inject({
      method,
      url,
      headers: {
        authorization: `Bearer ${a.scimToken}`,
        ...(body !== undefined ? { "content-type": "application/scim+json" } : {}),
      },
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
  }

  function assertScimAnswer(
    response: { statusCode: number; headers: Record<string, unknown>; body: string },
    context: string,
  ) {
    assert.ok(response.statusCode < 500, `${response.statusCode} for ${context}: ${response.body.slice(0, 300)}`);
    if (response.statusCode < 400) return;
    assert.match(String(response.headers["content-type"]), /^application\/scim\+json/, context);
    const body = JSON.parse(response.body);
    assert.deepEqual(body.schemas, [ERROR_SCHEMA], context);
    assert.equal(body.status, String(response.statusCode), context);
    assert.equal(typeof body.detail, "string", context);
    if (response.statusCode === 400)
      assert.ok(
        typeof body.scimType === "string" && body.scimType.length > 0,
        `400 without scimType for ${context}: ${response.body}`,
      );
  }

  test("list: any filter, startIndex, count, attributes", async () => {
    await fc.assert(
      fc.asyncProperty(
        filterText,
        fc.option(fc.integer({ min: -5, max: 300 })),
        fc.option(fc.integer({ min: -5, max: 1000 })),
        fc.option(fc.constantFrom("userName", "emails,meta", "x..y")),
        async (filter, startIndex, count, attributes) => {
          const query = new URLSearchParams({
            filter,
            ...(startIndex !== null ? { startIndex: String(startIndex) } : {}),
            ...(count !== null ? { count: String(count) } : {}),
            ...(attributes !== null ? { attributes } : {}),
          });
          const response = await inject("GET", `/v2/scim/v2/Users?${query}`);
          assertScimAnswer(response, `filter ${JSON.stringify(filter)}`);
          if (response.statusCode === 200) {
            const list = JSON.parse(response.body);
            assert.ok(list.itemsPerPage <= 200 && list.Resources.length === list.itemsPerPage);
          }
        },
      ),
      fuzzParams(RUNS),
    );
  });

  test("filter grammar: every attribute name (Object.prototype's too) × every operator × every value type → 200 or 400 invalidFilter", async () => {
    await fc.assert(
      fc.asyncProperty(filterOver(anyLeaf), async (filter) => {
        const response = await inject("GET", `/v2/scim/v2/Users?filter=${encodeURIComponent(filter)}`);
        assertScimAnswer(response, `filter ${JSON.stringify(filter)}`);
        if (response.statusCode !== 200) {
          assert.equal(response.statusCode, 400, `filter ${JSON.stringify(filter)}: ${response.body}`);
          // A control character anywhere in a request is refused at the edge for every route (one text
          // rule), before SCIM parses the filter: invalidSyntax there, invalidFilter for everything else.
          // eslint-disable-next-line no-control-regex -- the control characters are what this test looks for
          const expected = /[\u0000-\u001f\u007f]/.test(filter)
            ? ["invalidFilter", "invalidSyntax"]
            : ["invalidFilter"];
          assert.ok(
            expected.includes(JSON.parse(response.body).scimType),
            `filter ${JSON.stringify(filter)}: ${response.body}`,
          );
        }
      }),
      fuzzParams(RUNS),
    );
  });

  test("filter strings: a JSON escape that decodes to a control character or a lone surrogate is 400 invalidFilter, wherever it stands", async () => {
    const leaf = fc
      .tuple(
        fc.constantFrom(...STRING_ATTRIBUTES, "displayName", "id", "emails.type", "active", "meta.created"),
        fc.constantFrom("eq", "ne", "co", "sw", "ew"),
        escapedForbiddenValue.map(asFilterString),
      )
      .map(([a, op, v]) => (a === "emails.type" ? `emails[type ${op} ${v}]` : `${a} ${op} ${v}`));
    const filter = fc
      .tuple(leaf, filterOver(supportedLeaf), fc.constantFrom(0, 1, 2, 3))
      .map(([bad, other, shape]) => [bad, `(${other}) and (${bad})`, `${bad} or ${other}`, `not (${bad})`][shape]!);
    await fc.assert(
      fc.asyncProperty(filter, async (text) => {
        const response = await inject("GET", `/v2/scim/v2/Users?filter=${encodeURIComponent(text)}`);
        assertScimAnswer(response, `filter ${JSON.stringify(text)}`);
        assert.equal(response.statusCode, 400, `filter ${JSON.stringify(text)}: ${response.body}`);
        const body = JSON.parse(response.body);
        assert.equal(body.scimType, "invalidFilter", `filter ${JSON.stringify(text)}: ${response.body}`);
      }),
      fuzzParams(RUNS),
    );
  });

  test("filter grammar: filters of supported attributes, operators and typed values (dates of the years 0002–9998) are answered 200", async () => {
    await fc.assert(
      fc.asyncProperty(filterOver(supportedLeaf), async (filter) => {
        const response = await inject("GET", `/v2/scim/v2/Users?filter=${encodeURIComponent(filter)}`);
        assert.equal(response.statusCode, 200, `filter ${JSON.stringify(filter)}: ${response.body.slice(0, 300)}`);
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
