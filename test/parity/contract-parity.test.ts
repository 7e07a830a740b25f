// Parity of the four faces, generated from the contract. For every RPC with a google.api.http
// rule (restRoutesOf(contractServices), the gateway's own route table) the same request JSON is
// sent through
//   - gRPC: @grpc/grpc-js over h2c, a generic client (grpc.makeGenericClientConstructor) built from
//     the method descriptors, so it needs no generated stubs;
//   - Connect (JSON) and gRPC-Web (binary): @connectrpc/connect-node transports over HTTP/1.1;
//   - REST: fetch, with path variables, query string and body (JSON, or a form where the contract
//     says form_body) built from that JSON the way google.api.http maps it;
// and the outcomes must agree: all succeed or all fail; on failure the RPC faces carry one Connect
// code, the REST status is that code's HTTP status (httpStatusOf), and the ErrorResponse
// (errorCode, message and the rest of it, all but the per-request debugIdentifier) is identical on
// all four; on success the responses are equal once values that are random per call (ids,
// secrets, tokens, timestamps) are reduced to their type.
//
// The cases are generated per method, never listed by hand, so a new RPC with a REST path is
// covered without a new test:
//   (a) no credentials, empty request;
//   (b) a TMC admin's access token, empty request;
//   (c) that token, with string fields 10 000 characters long or carrying a NUL byte: every string
//       field of the request at once (in as few requests as fit BODY_LIMIT_BYTES), then each one
//       alone (one field's validation error must not hide what another does to the handler or the
//       database); and, where the contract's strings add up to more than BODY_LIMIT_BYTES, that
//       oversized request too, on a server process of its own followed by SIGTERM.
// (a) and (c) must be client errors (4xx) on every face, never INTERNAL or another 5xx; the one
// 5xx allowed is 501 NOT_IMPLEMENTED, the documented answer of an RPC whose issue is not done.
// Cases that fail because of a known src/ problem run as `todo` (knownProblemOf below).
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  fromJson,
  ScalarType,
  toBinary,
  toJson,
  type DescField,
  type DescMessage,
  type DescService,
  type JsonObject,
  type JsonValue,
} from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { ErrorResponseSchema, type ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";
import { restRoutesOf, type RestRoute } from "../../src/gateway/http-rules.js";
import { httpStatusOf } from "../../src/gateway/http-status.js";
import { contractServices } from "../../src/rpc/areas.js";
import { accessToken } from "../helpers/api.js";
import { backend, newStorage, serviceEnv, type Storage } from "../helpers/backend.js";
import { jsonGrpcClient, type GenericGrpcClient } from "../helpers/grpc-js.js";
import { decodeRpcStatus, errorResponseIn } from "../helpers/grpc-status.js";
import { spawnServer, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";
import { ROOMY_RATE_LIMITS } from "../helpers/token-kit.js";

const LONG = "x".repeat(10_000);
const WITH_NUL = "nul\u0000byte";
const CALL_TIMEOUT_MS = 15_000;
/** The service's body limit (its default, set explicitly so the generator knows it). */
const BODY_LIMIT_BYTES = 65_536;
/** The longest URL the service takes (HTTP_MAX_URL_BYTES' maximum), so a 10 000-character path variable reaches REST. */
const MAX_URL_BYTES = 15 * 1024;
const SERVICE_ENV: Record<string, string> = {
  ...ROOMY_RATE_LIMITS,
  BODY_LIMIT_BYTES: String(BODY_LIMIT_BYTES),
  HTTP_MAX_URL_BYTES: String(MAX_URL_BYTES),
};

const routes = restRoutesOf(contractServices);

// ---- outcomes ------------------------------------------------------------------------------

/** The error as every face reports it; debugIdentifier is per request and compared apart. */
interface ErrorView {
  readonly errorCode: string;
  readonly message: string;
  /** Everything else of the ErrorResponse but debugIdentifier, as canonical JSON. */
  readonly rest: JsonValue;
  readonly debugIdentifier: string;
}

interface Outcome {
  readonly face: string;
  readonly ok: boolean;
  /** Success: the response as protobuf JSON (REST: its body, {} when there is none). */
  readonly response?: JsonObject;
  /** RPC faces: the Connect (= gRPC) status code of a failure. */
  readonly code?: Code;
  /** REST: the HTTP status. */
  readonly httpStatus?: number;
  readonly error?: ErrorView;
  /** What was received, for assertion messages. */
  readonly raw: string;
}

function errorView(body: ErrorResponse | undefined): ErrorView | undefined {
  if (!body) return undefined;
  const { debugIdentifier, ...rest } = toJson(ErrorResponseSchema, body) as JsonObject;
  return {
    errorCode: body.errorMessages[0]?.errorCode ?? "",
    message: body.errorMessages[0]?.message ?? "",
    rest,
    debugIdentifier: typeof debugIdentifier === "string" ? debugIdentifier : "",
  };
}

interface Face {
  readonly name: string;
  call(route: RestRoute, request: JsonObject, token: string | undefined): Promise<Outcome>;
  close(): void;
}

// ---- gRPC: grpc-js, a generic client built from the descriptors (test/helpers/grpc-js.ts) ----------

function grpcFace(baseUrl: string): Face {
  const address = new URL(baseUrl).host;
  const clients = new Map<string, GenericGrpcClient>();
  const clientOf = (service: DescService) => {
    let client = clients.get(service.typeName);
    if (!client) clients.set(service.typeName, (client = jsonGrpcClient(service, address)));
    return client;
  };
  return {
    name: "gRPC (grpc-js, h2c)",
    call(route, request, token) {
      const metadata = new grpc.Metadata();
      if (token !== undefined) metadata.set("authorization", `Bearer ${token}`);
      const client = clientOf(route.method.parent);
      return new Promise<Outcome>((resolve) => {
        client[route.method.name]!(
          request,
          metadata,
          { deadline: Date.now() + CALL_TIMEOUT_MS },
          (err: grpc.ServiceError | null, response: JsonObject) => {
            if (!err)
              return resolve({ face: "gRPC (grpc-js, h2c)", ok: true, response, raw: JSON.stringify(response) });
            const [details] = err.metadata?.get("grpc-status-details-bin") ?? [];
            let error: ErrorView | undefined;
            try {
              error = Buffer.isBuffer(details)
                ? errorView(errorResponseIn(decodeRpcStatus(new Uint8Array(details)).details))
                : undefined;
            } catch {
              error = undefined;
            }
            resolve({
              face: "gRPC (grpc-js, h2c)",
              ok: false,
              code: err.code as number as Code,
              error,
              raw: `${err.code} ${err.details}`,
            });
          },
        );
      });
    },
    close: () => clients.forEach((c) => c.close()),
  };
}

// ---- Connect and gRPC-Web: connect-node transports -----------------------------------------

function transportFace(name: string, transport: Transport): Face {
  return {
    name,
    async call(route, request, token) {
      const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
      try {
        const input = fromJson(route.method.input, request);
        const res = await transport.unary(route.method, undefined, CALL_TIMEOUT_MS, headers, input);
        const response = toJson(route.method.output, res.message) as JsonObject;
        return { face: name, ok: true, response, raw: JSON.stringify(response) };
      } catch (e) {
        const err = ConnectError.from(e);
        return {
          face: name,
          ok: false,
          code: err.code,
          error: errorView(err.findDetails(ErrorResponseSchema)[0]),
          raw: `${Code[err.code]} ${err.rawMessage}`,
        };
      }
    },
    close: () => {},
  };
}

// ---- REST: fetch, request assembled as google.api.http maps it -----------------------------

/** Text of a scalar for a path segment, query parameter or form field. */
function asText(value: JsonValue): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** method, URL and body of the REST call that carries `request`. */
function restRequest(route: RestRoute, request: JsonObject): { url: string; body?: string; contentType?: string } {
  const remaining: JsonObject = { ...request };
  let path = route.template;
  for (const { variable, field } of route.pathFields) {
    const value = remaining[field.jsonName];
    delete remaining[field.jsonName];
    path = path.replace(`{${variable}}`, encodeURIComponent(value === undefined ? "" : asText(value)));
  }
  const query = new URLSearchParams();
  const toQuery = (object: JsonObject) => {
    for (const [name, value] of Object.entries(object)) {
      for (const item of Array.isArray(value) ? value : [value]) {
        assert.ok(
          item === null || typeof item !== "object",
          `${route.method.name}: ${name} cannot travel in a query string`,
        );
        query.append(name, asText(item));
      }
    }
  };
  let body: string | undefined;
  let contentType: string | undefined;
  if (route.body === "*") {
    if (route.formBody) {
      const form = new URLSearchParams();
      for (const [name, value] of Object.entries(remaining)) {
        for (const item of Array.isArray(value) ? value : [value]) form.append(name, asText(item));
      }
      body = form.toString();
      contentType = "application/x-www-form-urlencoded";
    } else {
      body = JSON.stringify(remaining);
      contentType = "application/json";
    }
  } else if (route.body !== "") {
    const field = route.method.input.fields.find((f) => f.name === route.body)!;
    const value = remaining[field.jsonName];
    delete remaining[field.jsonName];
    if (value !== undefined) {
      body = JSON.stringify(value);
      contentType = "application/json";
    }
    toQuery(remaining);
  } else {
    toQuery(remaining);
  }
  const search = query.toString();
  return { url: search ? `${path}?${search}` : path, body, contentType };
}

function restFace(baseUrl: string): Face {
  return {
    name: "REST (fetch)",
    async call(route, request, token) {
      const { url, body, contentType } = restRequest(route, request);
      const headers: Record<string, string> = {};
      if (token !== undefined) headers.authorization = `Bearer ${token}`;
      if (contentType) headers["content-type"] = contentType;
      const res = await fetch(`${baseUrl}${url}`, {
        method: route.verb,
        headers,
        body,
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
      const text = await res.text();
      let json: JsonValue | undefined;
      try {
        json = text === "" ? undefined : (JSON.parse(text) as JsonValue);
      } catch {
        json = undefined;
      }
      const raw = `${res.status} ${text.slice(0, 500)}`;
      if (res.status < 300) {
        // google.api.http response_body: REST answers with that field's JSON alone; the RPC faces with the message.
        const field = route.responseBody
          ? route.method.output.fields.find((f) => f.name === route.responseBody)
          : undefined;
        const response = (field && json !== undefined ? { [field.jsonName]: json } : (json ?? {})) as JsonObject;
        return { face: "REST (fetch)", ok: true, httpStatus: res.status, response, raw };
      }
      let error: ErrorView | undefined;
      try {
        const body = fromJson(ErrorResponseSchema, json ?? null);
        // The SCIM dialect's `status` is the HTTP status, which only REST has (the RPC faces carry their code).
        if (body.status !== "") {
          assert.equal(body.status, String(res.status), "REST: the SCIM error status is the HTTP status");
          body.status = "";
        }
        error = errorView(body);
      } catch (failure) {
        if (failure instanceof assert.AssertionError) throw failure;
        error = undefined;
      }
      if (error)
        assert.equal(
          res.headers.get("x-request-id"),
          error.debugIdentifier,
          "REST: debugIdentifier is the x-request-id",
        );
      return { face: "REST (fetch)", ok: false, httpStatus: res.status, error, raw };
    },
    close: () => {},
  };
}

// ---- generated requests --------------------------------------------------------------------

/** A chain of fields from the request message down to a string field. */
type FieldPath = readonly DescField[];

const isString = (field: DescField) =>
  (field.fieldKind === "scalar" || (field.fieldKind === "list" && field.listKind === "scalar")) &&
  field.scalar === ScalarType.STRING;

/** Messages a generated request descends into: the contract's own (well-known types stay unset). */
const isOwnMessage = (message: DescMessage | undefined): message is DescMessage =>
  message !== undefined && !message.typeName.startsWith("google.protobuf.");

/**
 * Every string field a generated request can set: nested ones too, through singular and repeated
 * messages (one element), but never through a type already on the path (recursion) or a map.
 * What REST carries in the path and query string holds scalars only: nested fields only inside
 * the body (all of the request for `body: "*"`, else the one field the rule names).
 */
function stringPaths(route: RestRoute): FieldPath[] {
  const inBody = (prefix: FieldPath, field: DescField) =>
    route.body === "*" || (prefix[0] ?? field).name === route.body;
  const paths: FieldPath[] = [];
  const walk = (message: DescMessage, prefix: FieldPath, seen: ReadonlySet<string>) => {
    for (const field of message.fields) {
      if (isString(field)) {
        paths.push([...prefix, field]);
        continue;
      }
      if (!inBody(prefix, field)) continue;
      const child =
        field.fieldKind === "message"
          ? field.message
          : field.fieldKind === "list" && field.listKind === "message"
            ? field.message
            : undefined;
      if (isOwnMessage(child) && !seen.has(child.typeName))
        walk(child, [...prefix, field], new Set([...seen, child.typeName]));
    }
  };
  walk(route.method.input, [], new Set([route.method.input.typeName]));
  return paths;
}

/** Sets the string at `path` in `request` (creating the messages on the way), unless a oneof sibling is already set. */
function setString(request: JsonObject, path: FieldPath, value: string): void {
  let object = request;
  for (const [index, field] of path.entries()) {
    const last = index === path.length - 1;
    if (field.oneof && field.oneof.fields.some((f) => f !== field && f.jsonName in object)) return;
    if (last) {
      object[field.jsonName] = field.fieldKind === "list" ? [value] : value;
    } else if (field.fieldKind === "list") {
      const list = (object[field.jsonName] ??= [{}]) as JsonObject[];
      object = list[0]!;
    } else {
      object = (object[field.jsonName] ??= {}) as JsonObject;
    }
  }
}

function pathName(path: FieldPath): string {
  return path.map((f) => f.jsonName + (f.fieldKind === "list" ? "[0]" : "")).join(".");
}

interface Case {
  readonly name: string;
  readonly token: "none" | "admin";
  readonly request: JsonObject;
  /** (a) and (c): a client error on every face (or 501 NOT_IMPLEMENTED), never a success or a 5xx. */
  readonly clientError: boolean;
}

/** The larger of the request's two encodings (JSON for Connect and REST, binary for gRPC and gRPC-Web). */
function encodedSize(route: RestRoute, request: JsonObject): number {
  return Math.max(
    Buffer.byteLength(JSON.stringify(request)),
    toBinary(route.method.input, fromJson(route.method.input, request)).length,
  );
}

/**
 * Fits the service's body limit with room for framing, and where the fields travel in the URL
 * (query parameters and path variables of a route whose body is not the whole request), the URL
 * limit too: what (c) is about is the strings, not the body or URL size.
 */
const fits = (route: RestRoute, request: JsonObject) =>
  encodedSize(route, request) <= BODY_LIMIT_BYTES - 1024 &&
  (route.body === "*" || Buffer.byteLength(JSON.stringify(request)) <= MAX_URL_BYTES - 1024);

/**
 * The string paths in requests that each fit the body limit, as few requests as possible:
 * "every string field at once" is one request when the message is small enough.
 */
function groupsWithin(route: RestRoute, paths: readonly FieldPath[], value: string): FieldPath[][] {
  const groups: FieldPath[][] = [];
  let current: FieldPath[] = [];
  for (const path of paths) {
    const candidate = [...current, path];
    const request: JsonObject = {};
    for (const p of candidate) setString(request, p, value);
    if (current.length > 0 && !fits(route, request)) {
      groups.push(current);
      current = [path];
    } else {
      current = candidate;
    }
  }
  if (current.length > 0) groups.push(current);
  return groups;
}

function requestWith(paths: readonly FieldPath[], value: string): JsonObject {
  const request: JsonObject = {};
  for (const path of paths) setString(request, path, value);
  return request;
}

function casesOf(route: RestRoute): Case[] {
  const cases: Case[] = [
    { name: "(a) no credentials, empty request", token: "none", request: {}, clientError: true },
    { name: "(b) TMC admin token, empty request", token: "admin", request: {}, clientError: false },
  ];
  const paths = stringPaths(route);
  if (paths.length === 0) return cases;
  for (const [label, value] of [
    ["10 000 characters long", LONG],
    ["carrying a NUL byte", WITH_NUL],
  ] as const) {
    const groups = groupsWithin(route, paths, value);
    groups.forEach((group, i) => {
      const part = groups.length === 1 ? "" : ` (request ${i + 1} of ${groups.length}, within BODY_LIMIT_BYTES)`;
      cases.push({
        name: `(c) TMC admin token, every string field ${label}${part}`,
        token: "admin",
        request: requestWith(group, value),
        clientError: true,
      });
    });
    if (paths.length === 1) continue;
    for (const path of paths) {
      cases.push({
        name: `(c) TMC admin token, ${pathName(path)} ${label}`,
        token: "admin",
        request: requestWith([path], value),
        clientError: true,
      });
    }
  }
  return cases;
}

/**
 * (c) for a message whose string fields, all 10 000 characters long, add up to more than
 * BODY_LIMIT_BYTES: generated only where the contract makes that possible in a body.
 */
function oversizedCaseOf(route: RestRoute): Case | undefined {
  if (route.body === "") return undefined;
  const request = requestWith(stringPaths(route), LONG);
  if (encodedSize(route, request) <= BODY_LIMIT_BYTES) return undefined;
  return {
    name: "(c) TMC admin token, every string field 10 000 characters long: over BODY_LIMIT_BYTES",
    token: "admin",
    request,
    clientError: true,
  };
}

// ---- comparison ----------------------------------------------------------------------------

/**
 * REST shows zero numbers, false, empty lists and maps that canonical protobuf JSON leaves out
 * (docs/protocols.md, "JSON on REST"); neither side's defaults are compared.
 */
function withoutDefaults(value: JsonValue): JsonValue | undefined {
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.map((v) => withoutDefaults(v) ?? null);
  if (value !== null && typeof value === "object") {
    const out: JsonObject = {};
    for (const [key, v] of Object.entries(value)) {
      const kept = withoutDefaults(v);
      if (kept !== undefined) out[key] = kept;
    }
    return Object.keys(out).length === 0 ? undefined : out;
  }
  if (value === 0 || value === "0" || value === false || value === "") return undefined;
  return value;
}

const typeOf = (value: JsonValue | undefined) =>
  value === null ? "null" : Array.isArray(value) ? "array" : typeof value;

/**
 * `actual` must have the shape of `expected` (same keys, same array lengths, same types), and
 * the same value wherever the two reference calls bracketing the faces agreed: a value that
 * changed between them is random per call (an id, a secret, a token, a timestamp).
 */
function assertSameResponse(
  actual: JsonValue | undefined,
  expected: JsonValue | undefined,
  control: JsonValue | undefined,
  where: string,
): void {
  assert.equal(typeOf(actual), typeOf(expected), `${where}: type`);
  if (Array.isArray(expected)) {
    const a = actual as JsonValue[];
    assert.equal(a.length, expected.length, `${where}: length`);
    expected.forEach((e, i) =>
      assertSameResponse(a[i], e, Array.isArray(control) ? control[i] : undefined, `${where}[${i}]`),
    );
  } else if (expected !== null && typeof expected === "object") {
    const a = actual as JsonObject;
    assert.deepEqual(Object.keys(a).sort(), Object.keys(expected).sort(), `${where}: keys`);
    const c = control !== null && typeof control === "object" && !Array.isArray(control) ? control : {};
    for (const key of Object.keys(expected)) assertSameResponse(a[key], expected[key], c[key], `${where}.${key}`);
  } else if (JSON.stringify(expected) === JSON.stringify(control)) {
    assert.deepEqual(actual, expected, `${where}: the same value on every face`);
  }
}

function describeOutcomes(outcomes: readonly Outcome[]): string {
  return outcomes.map((o) => `  ${o.face}: ${o.ok ? "ok" : "failed"} ${o.raw}`).join("\n");
}

function assertParity(route: RestRoute, c: Case, outcomes: readonly Outcome[], control: Outcome): void {
  const context = `${route.method.parent.typeName}.${route.method.name} ${c.name}\n${describeOutcomes(outcomes)}`;
  const rest = outcomes.find((o) => o.httpStatus !== undefined)!;
  const rpcs = outcomes.filter((o) => o !== rest);
  assert.ok(
    outcomes.every((o) => o.ok === outcomes[0]!.ok),
    `all faces succeed or all fail:\n${context}`,
  );

  if (outcomes[0]!.ok) {
    assert.ok(!c.clientError, `a success where a client error is due:\n${context}`);
    assert.equal(rest.httpStatus, route.successStatus, `REST answers the documented success status:\n${context}`);
    const expected = withoutDefaults(rpcs[0]!.response!);
    for (const o of outcomes)
      assertSameResponse(
        withoutDefaults(o.response!),
        expected,
        withoutDefaults(control.response ?? {}),
        `${o.face} response`,
      );
    return;
  }

  const code = rpcs[0]!.code!;
  for (const o of rpcs) assert.equal(o.code, code, `one Connect code on the RPC faces:\n${context}`);
  for (const o of outcomes) {
    assert.ok(o.error, `${o.face} carries an ErrorResponse:\n${context}`);
    assert.match(o.error.debugIdentifier, /\S/, `${o.face}: debugIdentifier`);
  }
  const first = outcomes[0]!.error!;
  for (const o of outcomes) {
    assert.equal(o.error!.errorCode, first.errorCode, `errorCode on every face:\n${context}`);
    assert.equal(o.error!.message, first.message, `message on every face:\n${context}`);
    assert.deepEqual(o.error!.rest, first.rest, `the whole ErrorResponse on every face:\n${context}`);
  }
  assert.equal(
    rest.httpStatus,
    httpStatusOf(code, first.errorCode),
    `REST status = httpStatusOf(${Code[code]}, ${first.errorCode}):\n${context}`,
  );
  assert.ok(code !== Code.Internal && first.errorCode !== "INTERNAL_ERROR", `never INTERNAL:\n${context}`);
  const notImplemented = code === Code.Unimplemented && first.errorCode === "NOT_IMPLEMENTED";
  assert.ok(
    (rest.httpStatus! >= 400 && rest.httpStatus! < 500) || notImplemented,
    `a 4xx client error (or 501 NOT_IMPLEMENTED), got ${rest.httpStatus}:\n${context}`,
  );
}

// ---- known src/ problems -------------------------------------------------------------------

/**
 * Failures this test finds in src/ that are not fixed yet: knownProblemOf names the cause and the
 * fix of a case, which then runs as `todo` ("not ok … # TODO" while broken, "ok … # TODO" once src
 * is fixed, when the entry must go). Nothing else is excused, and nothing is now: the last one
 * (oversized RPC messages refused by connect before the interceptors, without an ErrorResponse and
 * as RESOURCE_EXHAUSTED while REST says 413 PAYLOAD_TOO_LARGE) is fixed in src/http/protocol/connect-handlers.ts.
 */
function knownProblemOf(_route: RestRoute, _c: Case): string | undefined {
  return undefined;
}

// ---- the tests -----------------------------------------------------------------------------

interface Faces {
  /** Connect first and REST last; `reference` is called after them (the bracket of assertSameResponse). */
  readonly faces: Face[];
  readonly reference: Face;
  close(): void;
}

function facesOf(baseUrl: string, agent?: http.Agent): Faces {
  const nodeOptions = agent ? { agent } : undefined;
  const connect = () => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false, nodeOptions });
  const faces = [
    transportFace("Connect (JSON, HTTP/1.1)", connect()),
    grpcFace(baseUrl),
    transportFace("gRPC-Web (binary, HTTP/1.1)", createGrpcWebTransport({ baseUrl, httpVersion: "1.1", nodeOptions })),
    restFace(baseUrl),
  ];
  return {
    faces,
    reference: transportFace("Connect (reference)", connect()),
    close: () => faces.forEach((f) => f.close()),
  };
}

/** A TMC admin's access token on a fresh demo tenant, with room for the API users case (b) creates. */
async function seededAdminToken(baseUrl: string): Promise<string> {
  const seed = await operatorCall<{ tmcId: string; clientId: string; clientSecret: string }>(baseUrl, "Seed", {});
  await operatorCall(baseUrl, "SetTmcApiUserLimit", { tmcId: seed.tmcId, maxApiUsers: 1000 });
  return accessToken(baseUrl, seed.clientId, seed.clientSecret);
}

async function runCase(faces: Faces, route: RestRoute, c: Case, adminToken: string): Promise<void> {
  const token = c.token === "admin" ? adminToken : undefined;
  // One face after the other (never at once): the first and the last call bracket the others,
  // so a value they agree on was not random per call.
  const outcomes: Outcome[] = [];
  for (const face of faces.faces) outcomes.push(await face.call(route, c.request, token));
  const control = await faces.reference.call(route, c.request, token);
  assertParity(route, c, outcomes, control);
}

const fullName = (route: RestRoute) =>
  `${route.method.parent.typeName}.${route.method.name} (${route.verb} ${route.template}, ${backend})`;

describe("every REST route, on all four faces", () => {
  let running: RunningService;
  let adminToken: string;
  let faces: Faces;

  before(async () => {
    running = await startService({ env: SERVICE_ENV });
    adminToken = await seededAdminToken(running.baseUrl);
    faces = facesOf(running.baseUrl);
  });

  after(async () => {
    faces?.close();
    if (running) {
      await running.stop();
      await dropStorage(running.storage);
    }
  });

  test("the contract has REST routes, and every one gets generated cases", () => {
    assert.ok(routes.length > 0);
    for (const route of routes) assert.ok(casesOf(route).length >= 2, route.method.name);
  });

  for (const route of routes) {
    describe(fullName(route), () => {
      for (const c of casesOf(route)) {
        const todo = knownProblemOf(route, c);
        test(c.name, todo ? { todo } : {}, () => runCase(faces, route, c, adminToken));
      }
    });
  }
});

// A server process of its own: the known shutdown problem must not hold up the test process, and
// the process can be killed when SIGTERM does not end it.
describe(`requests over BODY_LIMIT_BYTES, then SIGTERM (${backend})`, () => {
  const oversized = routes.flatMap((route) => {
    const c = oversizedCaseOf(route);
    return c ? [{ route, c }] : [];
  });
  let storage: Storage | undefined;
  let server: ServerProcess | undefined;
  let adminToken: string;
  let faces: Faces;

  before(async () => {
    storage = newStorage();
    server = await spawnServer(serviceEnv(storage, SERVICE_ENV));
    adminToken = await seededAdminToken(server.address);
    // A refused upload must not leave a connection that the next case would reuse.
    faces = facesOf(server.address, new http.Agent({ keepAlive: false }));
  });

  after(async () => {
    faces?.close();
    await server?.stop(2_000);
    if (storage) await dropStorage(storage);
  });

  for (const { route, c } of oversized) {
    test(`${fullName(route)}: ${c.name}`, () => runCase(faces, route, c, adminToken));
  }

  test("afterwards SIGTERM still stops the server within SHUTDOWN_TIMEOUT_MS, with exit code 0", async () => {
    faces.close();
    const shutdownTimeoutMs = Number(serviceEnv(storage!).SHUTDOWN_TIMEOUT_MS);
    server!.child.kill("SIGTERM");
    const exited = await Promise.race([server!.exited, sleep(shutdownTimeoutMs + 2_000).then(() => undefined)]);
    assert.deepEqual(
      exited,
      { code: 0, signal: null },
      `the server ${exited ? "exited" : "was still running"} ${shutdownTimeoutMs + 2_000} ms after SIGTERM`,
    );
  });
});
