// Property-based fuzzing of the REST gateway (hardening issue, item "Fuzzing"). The routes come
// from the contract (restRoutesOf(contractServices), the gateway's own table), so a new RPC with
// a REST path is fuzzed without a new line here. For every route, arbitrary requests are sent in
// process (app.inject): JSON bodies built from the input message's descriptor with right- and
// wrong-typed values (control characters, NUL, lone surrogates, strings past every limit, int32
// extremes and numbers out of range, nested garbage around every depth limit, unknown fields,
// arrays where objects go), requests one change away from a valid one, top-level JSON that is no
// object, raw non-JSON bytes, form bodies (also for JSON routes) with broken percent-encoding and
// repeated names, random query strings and path values (with `%` sequences), random content
// types, other verbs, and no / the admin's / a wrong / a Basic credential. Properties:
//   P1 every answer is 2xx or 4xx — never 3xx or 5xx — except 501 NOT_IMPLEMENTED from the RPCs
//      whose issue is not done (README, "Status"; the route's service registers no handler);
//   P2 every 4xx (and that 501) is an ErrorResponse: JSON with debugIdentifier (= x-request-id) and
//      errorMessages[0].errorCode and .message;
//   P3 nothing is written on refusal: the storage fingerprint (every table's rows, fuzz-kit.ts) is
//      unchanged by every request answered >= 400. Successful creates, rotations and revocations
//      (of API users the fuzzer created, never the seeded admin whose token it uses) are
//      legitimate and feed later cases.
// Then fixed cases: JSON bodies past the gateway's depth limit (MAX_JSON_DEPTH) are refused on
// every JSON route, with or without a credential, and the Connect face answers the same body
// 4xx (or 501 from a service not implemented yet: none today).
//
// Size: FUZZ_RUNS cases per property (default 100, fuzz-kit.ts), about 1 300 requests: on the
// 2-core machine 35–60 s per backend for the whole file (its fuzzing 20–48 s, 20–25 s of CPU),
// measured while other work kept the load at 9–14. Every run prints its seed in the suite title;
// a failure prints fast-check's seed and path, the shrunk case, and the request as sent with the answer.
// Everything the run creates (a Postgres schema or an embedded data directory, Redis keys under
// its own prefix) is removed in `after`.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import type { InjectOptions } from "fastify";
import { internalsOf } from "../../src/app/test-access.js";
import { restRoutesOf, type RestRoute } from "../../src/gateway/http-rules.js";
import { MAX_JSON_DEPTH } from "../../src/gateway/json-depth.js";
import { contractServices } from "../../src/rpc/areas.js";
import { accessToken } from "../helpers/api.js";
import { backend, newStorage, type Storage } from "../helpers/backend.js";
import { dropStorage, operatorCall, seedDemo, startService, type RunningService } from "../helpers/service.js";
import {
  assertRestErrorResponse,
  fingerprintDiff,
  FUZZ_RUNS,
  FUZZ_SEED,
  FUZZ_SERVICE_ENV,
  FUZZ_VERBOSE,
  fuzzParams,
  fuzzString,
  fuzzUnit,
  hostileEncode,
  JsonGen,
  longString,
  percentEncode,
  Ref,
  resolveRefs,
  shortFuzzString,
  show,
  storageFingerprint,
  nearValid,
  Tally,
  validRequests,
  wrongJson,
  type GenObject,
  type StringPool,
} from "./fuzz-kit.js";

const routes = restRoutesOf(contractServices);
/** Services whose issue is not done: the RPC core registers them without handlers (src/rpc/routes.ts). */
const UNIMPLEMENTED_SERVICES = new Set<string>();
const MAX_URL_BYTES = 8192;

// ---- the world the requests are made in -------------------------------------------------------

interface World {
  running: RunningService;
  admin: { clientId: string; clientSecret: string; token: string };
  seed: { tmcId: string; orgId: string; userIds: string[] };
  /** API users the fuzzer created and has not revoked (never the admin). */
  created: string[];
  revoked: string[];
  /** SCIM tokens of created SCIM_TOKEN users: bearer credentials that must be refused here. */
  scimTokens: string[];
}

function resolver(world: World) {
  return (ref: Ref): string => {
    const list =
      ref.pool === "created"
        ? world.created
        : ref.pool === "revoked"
          ? world.revoked
          : ref.pool === "scimToken"
            ? world.scimTokens
            : [];
    return list.length === 0 ? "" : list[ref.index % list.length]!;
  };
}

// ---- request generation -----------------------------------------------------------------------

type Auth =
  | { kind: "none" }
  | { kind: "admin" }
  | { kind: "bearer"; token: string | Ref }
  | { kind: "basic"; id: string | Ref; secret: string | Ref }
  | { kind: "basicAdmin" }
  | { kind: "raw"; value: string };

type Body =
  | { kind: "none" }
  | { kind: "json"; value: unknown }
  | { kind: "form"; pairs: Array<[string, unknown]>; hostile: boolean }
  | { kind: "text"; text: string }
  /** A generated message as JSON text, cut short and/or behind a byte-order mark. */
  | { kind: "jsonText"; value: unknown; cut: number | null; bom: boolean }
  | { kind: "bytes"; bytes: Uint8Array };

interface RestCase {
  /**
   * A request message one change away from a valid one, carried the way google.api.http maps it
   * (path variables, then the body or the query string); when set, it replaces pathValues, query and body.
   */
  mapped: GenObject | null;
  verb: string;
  pathValues: Array<string | Ref>;
  pathHostile: boolean;
  query: Array<[string, unknown]>;
  queryHostile: boolean;
  body: Body;
  /** undefined: the body kind's natural content type. */
  contentType: string | undefined | null;
  auth: Auth;
}

const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "application/json; charset=utf-16",
  "application/json; charset=latin1",
  "APPLICATION/JSON",
  "application/json, text/plain",
  "application/vnd.api+json",
  "application/x-www-form-urlencoded",
  "application/x-www-form-urlencoded; charset=iso-8859-1",
  "application/x-www-form-urlencodedx",
  "multipart/form-data; boundary=xyz",
  "text/plain",
  "text/json",
  "application/octet-stream",
  "application/proto",
  "application/grpc",
  "*/*",
  "",
  ";",
  "application/",
];

function caseArbitrary(
  route: RestRoute,
  pool: StringPool,
  tokens: StringPool,
  valid: readonly GenObject[],
): fc.Arbitrary<RestCase> {
  const strings = fuzzString(pool);
  const jsonGen = new JsonGen(strings);
  const message = jsonGen.message(route.method.input);
  const mapped = nearValid(route.method.input, valid, jsonGen);
  const fieldNames = route.method.input.fields.flatMap((f) => [f.jsonName, f.name]);
  const name = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...(fieldNames.length > 0 ? fieldNames : ["x"])) },
    { weight: 1, arbitrary: shortFuzzString },
  );
  // Values as text, or as JSON the request builder turns into text (arrays repeat the parameter).
  const textValue = fc.oneof({ weight: 3, arbitrary: strings }, { weight: 1, arbitrary: wrongJson });
  const pairs = fc.oneof(
    { weight: 3, arbitrary: message.map((m) => Object.entries(m) as Array<[string, unknown]>) },
    { weight: 1, arbitrary: fc.array(fc.tuple(name, textValue), { maxLength: 5 }) },
  );
  const body: fc.Arbitrary<Body> = fc.oneof(
    { weight: route.formBody ? 2 : 10, arbitrary: message.map((value): Body => ({ kind: "json", value })) },
    { weight: 2, arbitrary: wrongJson.map((value): Body => ({ kind: "json", value })) },
    {
      weight: route.formBody ? 10 : 1,
      arbitrary: fc.tuple(pairs, fc.boolean()).map(([p, hostile]): Body => ({ kind: "form", pairs: p, hostile })),
    },
    { weight: 2, arbitrary: rawText(message) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((bytes): Body => ({ kind: "bytes", bytes })) },
    { weight: 1, arbitrary: fc.constant<Body>({ kind: "none" }) },
  );
  const auth: fc.Arbitrary<Auth> = fc.oneof(
    { weight: 5, arbitrary: fc.constant<Auth>({ kind: "admin" }) },
    { weight: 2, arbitrary: fc.constant<Auth>({ kind: "none" }) },
    { weight: 1, arbitrary: fuzzString(tokens).map((token): Auth => ({ kind: "bearer", token })) },
    { weight: route.formBody ? 3 : 1, arbitrary: fc.constant<Auth>({ kind: "basicAdmin" }) },
    { weight: 1, arbitrary: fc.tuple(strings, strings).map(([id, secret]): Auth => ({ kind: "basic", id, secret })) },
    {
      weight: 1,
      arbitrary: fc.string({ unit: "grapheme-ascii", maxLength: 40 }).map((value): Auth => ({ kind: "raw", value })),
    },
  );
  return fc.record<RestCase>({
    mapped: fc.oneof({ weight: 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: mapped }),
    verb: fc.oneof(
      { weight: 12, arbitrary: fc.constant(route.verb) },
      { weight: 1, arbitrary: fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS") },
    ),
    pathValues: fc.tuple(...route.pathFields.map(() => strings)),
    pathHostile: fc.boolean(),
    query: fc.oneof(
      { weight: 3, arbitrary: fc.constant<Array<[string, unknown]>>([]) },
      { weight: 2, arbitrary: fc.array(fc.tuple(name, textValue), { maxLength: 4 }) },
    ),
    queryHostile: fc.boolean(),
    body,
    contentType: fc.oneof(
      { weight: 30, arbitrary: fc.constant(undefined) },
      { weight: 1, arbitrary: fc.constant(null) },
      { weight: 2, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
      { weight: 1, arbitrary: fc.string({ unit: "grapheme-ascii", maxLength: 30 }) },
    ),
    auth,
  });
}

/** Bodies that are not (quite) JSON: truncated, behind a BOM, duplicate or prototype keys, plain text. */
function rawText(message: fc.Arbitrary<GenObject>): fc.Arbitrary<Body> {
  return fc.oneof(
    fc
      .record({ value: message, cut: fc.option(fc.nat(), { nil: null }), bom: fc.boolean() })
      .map(({ value, cut, bom }): Body => ({ kind: "jsonText", value, cut: bom ? cut : (cut ?? 0), bom })),
    fc
      .oneof(
        fc.constantFrom(
          '{"__proto__": {"admin": true}}',
          '{"constructor": {"prototype": {"admin": true}}}',
          '{"clientId": "a", "clientId": "b"}',
          '{"tmcId": "x",}',
          "{'clientId': 'a'}",
          '{"limit": 01}',
          '{"a": NaN}',
          '{"a": Infinity}',
          "[".repeat(5000),
          "{".repeat(5000),
          `${"[".repeat(3000)}${"]".repeat(3000)}`,
          `{"travelPreferences":${'{"a":'.repeat(3000)}1${"}".repeat(3000)}}`,
          "\u0000",
          "null",
          "true",
          "1e999999",
          '"\\ud800"',
          '{"clientId": "\\ud800"}',
          '{"clientId": "\\u0000"}',
          "a=b&a=c",
          "grant_type=client_credentials&client_id=%zz",
        ),
        shortFuzzString,
        longString,
      )
      .map((text): Body => ({ kind: "text", text })),
  );
}

// ---- request building -------------------------------------------------------------------------

function text(value: unknown): string[] {
  if (Array.isArray(value))
    return value.flatMap((v) => (v !== null && typeof v === "object" ? [JSON.stringify(v)] : text(v)));
  if (typeof value === "string") return [value];
  if (value === null || value === undefined) return [""];
  if (typeof value === "object") return [JSON.stringify(value)];
  return [String(value)];
}

function encodePairs(pairs: ReadonlyArray<[string, unknown]>, hostile: boolean): string {
  const encode = hostile ? hostileEncode : (s: string) => percentEncode(s);
  return pairs.flatMap(([n, v]) => text(v).map((t) => `${encode(n)}=${encode(t)}`)).join("&");
}

function naturalContentType(body: Body): string | undefined {
  switch (body.kind) {
    case "json":
      return "application/json";
    case "form":
      return "application/x-www-form-urlencoded";
    case "text":
    case "jsonText":
      return "application/json";
    case "bytes":
      return "application/octet-stream";
    case "none":
      return undefined;
  }
}

/** The path values, query and body that carry a request message, as google.api.http maps it. */
function mappedParts(route: RestRoute, request: GenObject): Pick<RestCase, "pathValues" | "query" | "body"> {
  const remaining: GenObject = { ...request };
  const pathValues = route.pathFields.map(({ field }) => {
    const value = remaining[field.jsonName] ?? remaining[field.name];
    delete remaining[field.jsonName];
    delete remaining[field.name];
    return typeof value === "string" ? value : value === undefined ? "" : JSON.stringify(value);
  });
  if (route.body === "") return { pathValues, query: Object.entries(remaining), body: { kind: "none" } };
  const body: Body = route.formBody
    ? { kind: "form", pairs: Object.entries(remaining), hostile: false }
    : { kind: "json", value: remaining };
  return { pathValues, query: [], body };
}

function buildRequest(route: RestRoute, generated: RestCase, world: World): InjectOptions {
  const c: RestCase = generated.mapped
    ? { ...generated, ...mappedParts(route, generated.mapped), pathHostile: false, queryHostile: false }
    : generated;
  let path = route.template;
  route.pathFields.forEach(({ variable }, i) => {
    const value = c.pathValues[i] as string;
    path = path.replace(`{${variable}}`, c.pathHostile ? hostileEncode(value) : percentEncode(value));
  });
  const query = encodePairs(c.query as Array<[string, unknown]>, c.queryHostile);
  const url = query ? `${path}?${query}` : path;
  const headers: Record<string, string> = {};
  const auth = c.auth;
  switch (auth.kind) {
    case "admin":
      headers.authorization = `Bearer ${world.admin.token}`;
      break;
    case "bearer":
      headers.authorization = `Bearer ${asciiOnly(auth.token as string)}`;
      break;
    case "basicAdmin":
      headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(world.admin.clientId)}:${encodeURIComponent(world.admin.clientSecret)}`).toString("base64")}`;
      break;
    case "basic":
      headers.authorization = `Basic ${Buffer.from(`${percentEncode(auth.id as string)}:${percentEncode(auth.secret as string)}`).toString("base64")}`;
      break;
    case "raw":
      headers.authorization = auth.value;
      break;
    case "none":
      break;
  }
  let payload: string | Buffer | undefined;
  const body = c.body;
  switch (body.kind) {
    case "json":
      payload = JSON.stringify(body.value) ?? "";
      break;
    case "form":
      payload = encodePairs(body.pairs, body.hostile);
      break;
    case "text":
      payload = body.text;
      break;
    case "jsonText": {
      const full = JSON.stringify(body.value) ?? "";
      payload = `${body.bom ? "\ufeff" : ""}${body.cut === null ? full : full.slice(0, body.cut % (full.length + 1))}`;
      break;
    }
    case "bytes":
      payload = Buffer.from(body.bytes);
      break;
    case "none":
      payload = undefined;
  }
  const contentType =
    c.contentType === undefined ? naturalContentType(body) : c.contentType === null ? undefined : c.contentType;
  if (contentType !== undefined) headers["content-type"] = contentType;
  return { method: c.verb as InjectOptions["method"], url, headers, ...(payload !== undefined ? { payload } : {}) };
}

/** Header values must be bytes Node accepts: non-ASCII goes percent-encoded. */
function asciiOnly(value: string): string {
  return /^[\x20-\x7e]*$/.test(value) ? value : percentEncode(value);
}

// ---- the tests --------------------------------------------------------------------------------

/** A JSON object nested `levels` deep counted from itself (`{}` is 1), as text: JSON.stringify would recurse. */
function nestedObject(levels: number, inner = "1"): string {
  return `${'{"a":'.repeat(levels - 1)}{"a":${inner}}${"}".repeat(levels - 1)}`;
}

/** A JSON array nested `levels` deep (`[]` is 1), as text. */
function nestedArray(levels: number): string {
  return `${"[".repeat(levels)}${"]".repeat(levels)}`;
}

describe(`REST fuzzing (${backend}, FUZZ_RUNS=${FUZZ_RUNS}, FUZZ_SEED=${FUZZ_SEED})`, () => {
  let storage: Storage | undefined;
  let running: RunningService | undefined;
  let world: World;
  const tally = new Tally();
  let lastFingerprint: string | undefined;
  before(async () => {
    storage = newStorage();
    running = await startService({ storage, env: { ...FUZZ_SERVICE_ENV } });
    const seed = await seedDemo(running.baseUrl);
    const token = await accessToken(running.baseUrl, seed.clientId, seed.clientSecret);
    // Room for the API users the fuzzer creates, and still a limit it can reach (409) on long runs.
    await operatorCall(running.baseUrl, "SetTmcApiUserLimit", { tmcId: seed.tmcId, maxApiUsers: 12 });
    world = {
      running,
      admin: { clientId: seed.clientId, clientSecret: seed.clientSecret, token },
      seed,
      created: [],
      revoked: [],
      scimTokens: [],
    };
  });
  after(async () => {
    if (FUZZ_VERBOSE) for (const line of tally.lines()) console.log(`# ${line}`);
    try {
      await running?.stop();
    } finally {
      if (storage) await dropStorage(storage);
    }
  });

  /** The strings a route's requests draw from: ids of this world, and for the token routes the admin's credentials. */
  function poolsOf(route: RestRoute): { strings: StringPool; tokens: StringPool } {
    const ids = [world.seed.tmcId, world.seed.orgId, ...world.seed.userIds];
    const oauth = [
      "client_credentials",
      "urn:ietf:params:oauth:grant-type:token-exchange",
      "refresh_token",
      "urn:ietf:params:oauth:token-type:access_token",
      "urn:ietf:params:oauth:token-type:jwt",
      "access_token",
      "api-users",
      "openid users:read",
      "scim",
      "http://auth.test/v2",
      world.admin.token,
    ];
    const enums = ["TMC_ADMIN", "COMPANY_ADMIN", "SCIM_TOKEN", "CLIENT_CREDENTIALS"];
    // The admin's own clientId goes only to the token routes: rotating or revoking it would end the run's token.
    const isAuth = route.method.parent.typeName === "travel.auth.v2.AuthService";
    const constants = isAuth
      ? [...ids, ...oauth, world.admin.clientId, world.admin.clientSecret]
      : [...ids, ...enums, ...oauth];
    return {
      strings: { constants, dynamic: ["created", "revoked"] },
      tokens: {
        constants: [
          world.admin.token,
          world.admin.token.slice(0, -2),
          `${world.admin.token}x`,
          "a.b.c",
          "eyJhbGciOiJub25lIn0.e30.",
        ],
        dynamic: ["scimToken"],
      },
    };
  }

  const inject = (request: InjectOptions) => world.running.service.app.inject(request);
  const fingerprint = () => storageFingerprint(internalsOf(world.running.service).db);

  /** Asserts P3 for a refused request, and keeps the fingerprint as the next request's "before". */
  async function assertNothingWritten(before: string, context: () => string): Promise<void> {
    const after = await fingerprint();
    assert.equal(
      after,
      before,
      `P3: a refused request wrote something: ${fingerprintDiff(before, after)} ${context()}`,
    );
    lastFingerprint = after;
  }

  async function runCase(route: RestRoute, generated: RestCase): Promise<void> {
    // Rotate and revoke need targets: keep two API users the fuzzer made (a setup step, not a case).
    if (
      (route.method.name === "DeleteApiUser" || route.method.name === "RotateClientSecret") &&
      world.created.length < 2
    ) {
      await inject({
        method: "POST",
        url: "/v2/api-users",
        headers: { authorization: `Bearer ${world.admin.token}`, "content-type": "application/json" },
        payload: "{}",
      });
      await syncApiUsers();
      lastFingerprint = undefined;
    }
    const c = resolveRefs(generated, resolver(world));
    const request = buildRequest(route, c, world);
    // The fingerprint after the previous refused request is this one's "before": nothing but
    // requests writes what it covers (fuzz-kit.ts), and a success resets it.
    const before = lastFingerprint ?? (await fingerprint());
    lastFingerprint = undefined;
    const response = await injectOrSkip(request);
    if (!response) {
      tally.add(`${route.verb} ${route.template}`, "not sent (light-my-request refused the URL)");
      return;
    }
    const status = response.statusCode;
    const context = () =>
      `\n  request: ${show({ method: request.method, url: request.url, headers: request.headers, payload: request.payload })}\n  response: ${status} ${show(response.body)}`;
    let errorCode = "";
    if (status >= 400 && request.method !== "HEAD")
      errorCode = String(assertRestErrorResponse(response, context).errorMessages?.[0]?.errorCode);
    tally.add(`${route.verb} ${route.template}`, `${status}${errorCode ? ` ${errorCode}` : ""}`);
    if (process.env.FUZZ_DEBUG === String(status)) console.log(`# debug ${context()}`);

    const unimplemented =
      status === 501 &&
      UNIMPLEMENTED_SERVICES.has(route.method.parent.typeName) &&
      (errorCode === "NOT_IMPLEMENTED" || request.method === "HEAD");
    assert.ok(
      (status >= 200 && status < 300) || (status >= 400 && status < 500) || unimplemented,
      `P1: status ${status} ${context()}`,
    );

    if (status >= 400) return assertNothingWritten(before, context);
    // Successful changes feed later cases: new API users to rotate and revoke, SCIM tokens to refuse.
    if (route.method.name === "CreateApiUser" && request.method === "POST") {
      const created = JSON.parse(response.body) as { scimToken?: string };
      if (created.scimToken) world.scimTokens.push(created.scimToken);
    }
    if (route.method.parent.typeName === "travel.apiuser.v2.ApiUserService") await syncApiUsers();
    // RFC 7009: the admin may revoke its own token with its own credentials (the token routes draw
    // both). That ends the run's token by design, not by a defect: the admin gets a new one.
    if (route.method.name === "RevokeToken" && !(await adminTokenWorks())) {
      tally.add(`${route.verb} ${route.template}`, "the admin's own token revoked by design; a new one issued");
      world.admin.token = await accessToken(world.running.baseUrl, world.admin.clientId, world.admin.clientSecret);
    }
  }

  /** Whether the admin's current token still reads its API users. */
  async function adminTokenWorks(): Promise<boolean> {
    const response = await inject({
      method: "GET",
      url: "/v2/api-users?limit=1",
      headers: { authorization: `Bearer ${world.admin.token}` },
    });
    return response.statusCode === 200;
  }

  /** app.inject, or undefined when light-my-request itself cannot parse the URL (a harness limit, not the service's). */
  async function injectOrSkip(request: InjectOptions) {
    try {
      return await inject(request);
    } catch (error) {
      if (error instanceof TypeError && /Invalid URL/.test(error.message)) return undefined;
      throw error;
    }
  }

  /** The API users of the seeded TMC other than the admin, as the storage has them. */
  async function syncApiUsers(): Promise<void> {
    const { db } = internalsOf(world.running.service);
    const rows = (await db("api_users")
      .where({ tmc_id: world.seed.tmcId })
      .whereNot({ client_id: world.admin.clientId })
      .select("client_id", "revoked_at")) as Array<{
      client_id: string;
      revoked_at: Date | null;
    }>;
    world.created = rows.filter((r) => r.revoked_at === null).map((r) => r.client_id);
    world.revoked = rows.filter((r) => r.revoked_at !== null).map((r) => r.client_id);
  }

  for (const route of routes) {
    test(`${route.verb} ${route.template} (${route.method.parent.name}.${route.method.name}): 2xx/4xx only, ErrorResponse, nothing written on refusal`, async () => {
      const { strings, tokens } = poolsOf(route);
      const valid = validRequests(route.method, {
        adminClientId: world.admin.clientId,
        adminClientSecret: world.admin.clientSecret,
        adminToken: world.admin.token,
        ...world.seed,
      });
      await fc.assert(
        fc.asyncProperty(caseArbitrary(route, strings, tokens, valid), (c) => runCase(route, c)),
        fuzzParams(),
      );
    });
  }

  test("unknown and near-miss paths, any verb: 404 or another 4xx ErrorResponse, nothing written", async () => {
    const segment = fc.oneof(
      fc.constantFrom(
        "v2",
        "v3",
        "api-users",
        "auth",
        "users",
        "rotate",
        "revoke",
        "oauth2-token",
        "..",
        ".",
        "",
        "%2e%2e",
        "%2F",
      ),
      shortFuzzString.map((s) => hostileEncode(s)),
    );
    const arbitrary = fc.record({
      verb: fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"),
      segments: fc.array(segment, { minLength: 1, maxLength: 5 }),
      query: fc.option(shortFuzzString.map(hostileEncode), { nil: undefined }),
      long: fc.option(fc.constantFrom(MAX_URL_BYTES - 10, MAX_URL_BYTES, MAX_URL_BYTES + 1, 20_000), {
        nil: undefined,
      }),
      auth: fc.boolean(),
      payload: fc.option(fc.oneof(shortFuzzString, fuzzUnit), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(arbitrary, async (c) => {
        let url = `/${c.segments.join("/")}${c.query !== undefined ? `?${c.query}` : ""}`;
        if (c.long !== undefined)
          url += `${url.includes("?") ? "&" : "?"}x=${"y".repeat(Math.max(0, c.long - url.length - 3))}`;
        const headers: Record<string, string> = c.auth ? { authorization: `Bearer ${world.admin.token}` } : {};
        if (c.payload !== undefined) headers["content-type"] = "application/json";
        const before = lastFingerprint ?? (await fingerprint());
        lastFingerprint = undefined;
        const response = await injectOrSkip({
          method: c.verb as InjectOptions["method"],
          url,
          headers,
          ...(c.payload !== undefined ? { payload: c.payload } : {}),
        });
        if (!response) {
          tally.add("unknown paths", "not sent (light-my-request refused the URL)");
          return;
        }
        const context = () =>
          `\n  request: ${c.verb} ${show(url)}\n  response: ${response.statusCode} ${show(response.body)}`;
        tally.add("unknown paths", String(response.statusCode));
        assert.ok(response.statusCode < 500, `P1: ${response.statusCode} ${context()}`);
        if (response.statusCode >= 400) {
          if (c.verb !== "HEAD") assertRestErrorResponse(response, context);
          await assertNothingWritten(before, context);
        }
      }),
      fuzzParams(),
    );
  });

  test("the run kept its admin: its token still lists API users, and the list agrees with the storage", async () => {
    await syncApiUsers();
    const response = await inject({
      method: "GET",
      url: "/v2/api-users?limit=100",
      headers: { authorization: `Bearer ${world.admin.token}` },
    });
    assert.equal(response.statusCode, 200, response.body);
    const body = JSON.parse(response.body) as { apiUsers: Array<{ clientId: string }>; totalCount: number };
    const { db } = internalsOf(world.running.service);
    const active = await db("api_users")
      .where({ tmc_id: world.seed.tmcId })
      .whereNull("revoked_at")
      .count({ n: "*" })
      .first();
    assert.equal(body.totalCount, Number(active?.n));
    for (const id of world.created)
      assert.ok(
        body.apiUsers.some((u) => u.clientId === id),
        `created ${id} is listed`,
      );
    for (const id of world.revoked)
      assert.ok(!body.apiUsers.some((u) => u.clientId === id), `revoked ${id} is not listed`);
  });

  test(`a JSON body nested deeper than ${MAX_JSON_DEPTH} levels is refused on every JSON route, with or without a credential, and writes nothing`, async () => {
    const jsonRoutes = routes.filter((r) => !r.formBody && r.body !== "");
    assert.ok(jsonRoutes.length >= 5, `JSON routes: ${jsonRoutes.length}`);
    for (const route of jsonRoutes) {
      const url = route.pathFields.reduce(
        (path, { variable }) => path.replace(`{${variable}}`, world.seed.userIds[0] ?? "x"),
        route.template,
      );
      for (const [depth, payload] of [
        [MAX_JSON_DEPTH + 1, nestedObject(MAX_JSON_DEPTH + 1)],
        [MAX_JSON_DEPTH + 1, `{"a":${nestedArray(MAX_JSON_DEPTH)}}`],
        [50, nestedObject(50)],
        [20_000, nestedArray(20_000)],
      ] as const) {
        for (const authorization of [undefined, `Bearer ${world.admin.token}`]) {
          const before = await fingerprint();
          const response = await inject({
            method: route.verb as InjectOptions["method"],
            url,
            headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
            payload,
          });
          const context = () =>
            `${route.verb} ${url}, depth ${depth}, ${authorization ? "admin" : "no credential"}: ${response.statusCode} ${show(response.body)}`;
          assert.equal(response.statusCode, 400, context());
          const body = assertRestErrorResponse(response, context);
          assert.equal(body.errorMessages?.[0]?.errorCode, "API_VALIDATION_FAILED", context());
          assert.equal(
            body.errorMessages?.[0]?.message,
            `The request body is nested deeper than ${MAX_JSON_DEPTH} levels`,
            context(),
          );
          await assertNothingWritten(before, context);
        }
      }
    }
  });

  test(`a google.protobuf.Struct nested to the limit reaches the RPC; past it, REST answers 400 and Connect a 4xx (never the old 500)`, async () => {
    const userId = world.seed.userIds[0]!;
    const admin = { authorization: `Bearer ${world.admin.token}` };
    // The body is level 1 and travelPreferences level 2: `deep` takes the rest.
    const businessInfo = JSON.stringify({
      legalEntityRef: { id: world.seed.orgId },
      organizationRef: { id: world.seed.orgId },
    });
    const body = (depth: number) =>
      `{"persona":"EMPLOYEE","businessInfo":${businessInfo},"travelPreferences":{"deep":${nestedArray(depth - 2)}}}`;
    const rest = (depth: number, headers: Record<string, string> = admin) =>
      inject({
        method: "PUT",
        url: `/v2/users/${userId}`,
        headers: { "content-type": "application/json", ...headers },
        payload: body(depth),
      });

    // At the limit the request reaches the RPC, which stores it (200, no body: docs/user-profiles.md).
    const atLimit = await rest(MAX_JSON_DEPTH);
    assert.equal(atLimit.statusCode, 200, atLimit.body);
    assert.equal(atLimit.body, "");
    assert.equal((await rest(MAX_JSON_DEPTH, {})).statusCode, 401);

    // 49..97 levels decoded as JSON and then failed protobuf binary's limit in the in-process transport: 500 before.
    for (const depth of [MAX_JSON_DEPTH + 1, 49, 50, 97, 98, 101, 300]) {
      for (const headers of [admin, {}]) {
        const response = await rest(depth, headers);
        const context = () => `depth ${depth}: ${response.statusCode} ${response.body}`;
        assert.equal(response.statusCode, 400, context());
        assert.equal(
          assertRestErrorResponse(response, context).errorMessages?.[0]?.errorCode,
          "API_VALIDATION_FAILED",
          context(),
        );
      }
      // The Connect face decodes JSON once (no binary re-encoding): 401 without a token, and with
      // one 501 (not implemented) or, past protobuf JSON's own limit of 100, 400.
      const connectBody = `{"userId":"${userId}","travelPreferences":{"deep":${nestedArray(depth - 2)}}}`;
      for (const headers of [admin, {}]) {
        const response = await inject({
          method: "POST",
          url: "/travel.user.v2.UserService/UpdateUser",
          headers: { "content-type": "application/json", ...headers },
          payload: connectBody,
        });
        const context = () =>
          `Connect, depth ${depth}, ${"authorization" in headers ? "admin" : "no credential"}: ${response.statusCode} ${response.body}`;
        const code = (JSON.parse(response.body) as { code?: string }).code;
        assert.ok(
          (response.statusCode >= 400 && response.statusCode < 500) ||
            (response.statusCode === 501 && code === "unimplemented"),
          context(),
        );
      }
    }
  });
});
