import {
  fromJson,
  toJson,
  type DescField,
  type DescMessage,
  type JsonObject,
  type JsonValue,
} from "@bufbuild/protobuf";
import { ScalarType } from "@bufbuild/protobuf";
import type { Tracer } from "@opentelemetry/api";
import { ConnectError, createContextValues, type Transport } from "@connectrpc/connect";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ErrorDialect, ErrorResponseSchema } from "../../gen/travel/common/v1/error_pb.js";
import { DomainError, invalidArgument } from "../errors/domain-error.js";
import { printable } from "../rpc/errors/printable.js";
import { requestInfoKey, rpcRequestHeaders } from "../rpc/request-context.js";
import { noteTrace } from "./request-trace.js";
import { RestSpan } from "./rest-spans.js";
import { noteRefusal, sendError } from "./error-reply.js";
import { allowedMethods, HTTP_METHODS, type RestRoute } from "./http-rules.js";
import { jsonDepthExceeds, MAX_JSON_DEPTH } from "./json-depth.js";
import { withRestDefaults } from "./json-shape.js";

/** Response headers an RPC may set for REST callers. */
const FORWARDED_RESPONSE_HEADERS = [
  "dpop-nonce",
  "cache-control",
  "pragma",
  "deprecation",
  "sunset",
  "link",
  "retry-after",
  "ratelimit",
  "ratelimit-policy",
  "www-authenticate",
  "location",
];

/**
 * Registers one Fastify route per google.api.http rule. Each turns the HTTP request into the
 * RPC's request message and calls the RPC in-process through the same interceptors as the
 * network face, so authentication, validation and errors are one code path for both.
 */
export function registerRestRoutes(
  app: FastifyInstance,
  routes: readonly RestRoute[],
  transport: Transport,
  tracer?: Tracer,
): void {
  // Media types the contract declares (travel.common.v1.rest content_type, e.g. application/scim+json) are JSON.
  // A DELETE has no body to parse (RFC 9110 9.3.5): a Content-Type sent without one (as Entra ID and
  // Okta do) is ignored rather than an empty JSON document refused.
  const json = app.getDefaultJsonParser("error", "error");
  const parser: typeof json = (request, body, done) => {
    if (request.method === "DELETE" && body === "") done(null, undefined);
    // Fastify's default JSON parser answers through done; nothing waits for what it returns.
    else void json(request, body, done);
  };
  for (const type of new Set(["application/json", ...routes.map((r) => r.contentType).filter((t) => t !== "")])) {
    if (type === "application/json" && app.hasContentTypeParser(type)) app.removeContentTypeParser(type);
    if (!app.hasContentTypeParser(type)) app.addContentTypeParser(type, { parseAs: "string" }, parser);
  }
  for (const route of routes) {
    // SCIM clients append a slash to the collection (GET /Users/?filter=…): without its own route
    // that would be GET /Users/{id} with an empty id. SCIM routes answer on both spellings.
    const urls =
      route.dialect === ErrorDialect.SCIM ? [route.fastifyPath, `${route.fastifyPath}/`] : [route.fastifyPath];
    for (const url of urls) {
      app.route({
        method: route.verb,
        url,
        config: { errorDialect: route.dialect } as object,
        handler: tracer
          ? async (request, reply) => {
              const span = new RestSpan(tracer, route, request);
              try {
                return await handle(route, transport, request, reply, span);
              } finally {
                span.end(reply.statusCode);
              }
            }
          : (request, reply) => handle(route, transport, request, reply),
      });
    }
  }
  registerMethodNotAllowed(app, routes);
}

/** The methods a path may be asked with (Fastify's defaults). */

/**
 * RFC 9110 15.5.6: a path the contract declares, asked with a method it does not take (GET on the
 * token endpoint), is 405 with Allow, not 404: the resource exists. Answered before the body is
 * read, in the path's error dialect.
 */
function registerMethodNotAllowed(app: FastifyInstance, routes: readonly RestRoute[]): void {
  const byPath = new Map<string, { template: string; verbs: Set<string>; dialect: ErrorDialect }>();
  for (const route of routes) {
    // SCIM paths answer wrong methods in their not-found handler (dialect-not-found.ts), which
    // also knows the endpoints SCIM defines but this service does not offer (POST /Users/.search: 501).
    if (route.dialect === ErrorDialect.SCIM) continue;
    const entry = byPath.get(route.fastifyPath) ?? {
      template: route.template,
      verbs: new Set<string>(),
      dialect: route.dialect,
    };
    entry.verbs.add(route.verb);
    byPath.set(route.fastifyPath, entry);
  }
  for (const [url, { template, verbs, dialect }] of byPath) {
    const allowed = allowedMethods(verbs);
    const allow = allowed.join(", ");
    app.route({
      method: HTTP_METHODS.filter((m) => !allowed.includes(m)),
      url,
      config: { errorDialect: dialect } as object,
      onRequest: async (request, reply) => {
        const refusal = new DomainError(
          "METHOD_NOT_ALLOWED",
          `${request.method} is not allowed on ${template}; it takes ${allow}`,
          {
            params: [{ name: "allow", value: allow }],
          },
        );
        return sendError(reply.header("allow", allow), refusal, dialect);
      },
      handler: async () => undefined,
    });
  }
}

/** The error dialect of the REST route a request matched, so Fastify's own refusals of its body (413, 415, 400) speak it too. */
export function routeDialectOf(request: FastifyRequest): ErrorDialect | undefined {
  return (request.routeOptions.config as { errorDialect?: ErrorDialect } | undefined)?.errorDialect;
}

async function handle(
  route: RestRoute,
  transport: Transport,
  request: FastifyRequest,
  reply: FastifyReply,
  span?: RestSpan,
) {
  try {
    checkContentType(route, request);
    checkDepth(request);
    const message = decodeRequest(route, request);
    const incoming = rpcRequestHeaders(request.headers);
    const headers = span ? span.forward(incoming) : incoming;
    const context = createContextValues().set(requestInfoKey, {
      requestId: request.id,
      remoteAddress: request.ip,
      protocol: "rest",
      // Fastify's protocol and host apply TRUSTED_PROXIES to X-Forwarded-Proto and -Host.
      target: { method: request.method, url: `${request.protocol}://${request.host}${request.url}` },
      refused: (refusal) => noteRefusal(request, refusal),
      traced: (traceId) => noteTrace(request, traceId),
    });
    const response = await transport.unary(route.method, callerGone(reply), undefined, headers, message, context);
    for (const name of FORWARDED_RESPONSE_HEADERS) {
      const value = response.header.get(name);
      if (value !== null) reply.header(name, value);
    }
    if (route.noContent) return reply.code(route.successStatus).send();
    const canonical = toJson(route.method.output, response.message) as JsonObject;
    const json = route.canonicalJson ? canonical : withRestDefaults(route.method.output, canonical);
    return reply
      .code(route.successStatus)
      .type(`${route.contentType || "application/json"}; charset=utf-8`)
      .send(route.responseBody ? responseBodyOf(route, json) : json);
  } catch (error) {
    // The RPC core logs its own failures (they arrive as ConnectErrors carrying an ErrorResponse);
    // anything else failed here or in the transport, and must leave a trace with its cause.
    if (
      !(error instanceof DomainError) &&
      !(error instanceof ConnectError && error.findDetails(ErrorResponseSchema).length > 0)
    ) {
      request.log.error(
        { err: error, rpc: `${route.method.parent.typeName}/${route.method.name}` },
        "rest gateway request failed",
      );
    }
    // Headers the RPC set before failing (Retry-After and RateLimit on a 429, Deprecation) still apply.
    if (error instanceof ConnectError) {
      for (const name of FORWARDED_RESPONSE_HEADERS) {
        const value = error.metadata.get(name);
        if (value !== null) reply.header(name, value);
      }
    }
    return sendError(reply, error, route.dialect);
  }
}

/**
 * Aborted when the client closes its connection (or its HTTP/2 stream) before the answer is
 * written, as Connect aborts a gRPC handler's signal: the call's work still queued for a slot
 * (admission.ts) is dropped, not run for nobody. A retry storm of clients that time out and hang
 * up otherwise fills its TMC's queue with work whose answers nobody reads.
 */
function callerGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  const hangUp = () => controller.abort(new DomainError("CANCELED", "The client closed the request"));
  if (reply.raw.destroyed) hangUp();
  else
    reply.raw.once("close", () => {
      if (!reply.raw.writableEnded) hangUp();
    });
  return controller.signal;
}

/** google.api.http response_body: the named response field's JSON is the whole answer. */
function responseBodyOf(route: RestRoute, json: JsonObject): JsonValue {
  const field = route.method.output.fields.find((f) => f.name === route.responseBody);
  return (field && json[field.jsonName]) ?? {};
}

/**
 * The contract says which body a route takes (travel.common.v1.rest form_body): the OAuth
 * endpoints take a form (RFC 6749 4.4.2) and refuse JSON; every other route takes JSON and
 * refuses a form, which would otherwise slip past strict JSON decoding.
 */
function checkContentType(route: RestRoute, request: FastifyRequest): void {
  if (request.body === undefined) return;
  if (isForm(request) === route.formBody && acceptsJsonType(route, request)) return;
  const expected = route.formBody ? "application/x-www-form-urlencoded" : route.contentType || "application/json";
  throw new DomainError("UNSUPPORTED_MEDIA_TYPE", `This operation takes ${expected}`, {
    params: [{ name: "content-type", value: expected }],
  });
}

/** Bodies nested deeper than MAX_JSON_DEPTH are refused before decoding (see json-depth.ts). */
function checkDepth(request: FastifyRequest): void {
  if (isForm(request) || !jsonDepthExceeds(request.body, MAX_JSON_DEPTH)) return;
  throw invalidArgument(`The request body is nested deeper than ${MAX_JSON_DEPTH} levels`, [
    { name: "body", value: `deeper than ${MAX_JSON_DEPTH} levels` },
  ]);
}

function decodeRequest(route: RestRoute, request: FastifyRequest) {
  const json = requestJson(route, request);
  try {
    // RFC 6749 3.2: unrecognised form parameters are ignored; JSON bodies are checked strictly.
    return fromJson(route.method.input, json, { ignoreUnknownFields: isForm(request) });
  } catch (error) {
    throw decodeFailure(error, route.method.input, json);
  }
}

/** Assembles the request message's JSON from body, path variables and query parameters. */
function requestJson(route: RestRoute, request: FastifyRequest): JsonObject {
  const json: JsonObject = {};
  const input = route.method.input;
  if (route.body === "*") {
    Object.assign(json, bodyObject(request, input));
  } else if (route.body !== "") {
    const field = input.fields.find((f) => f.name === route.body);
    if (field && request.body !== undefined) json[field.jsonName] = request.body as JsonValue;
  }
  // Query parameters fill the remaining fields (GET, or a body rule naming one field).
  if (route.body !== "*") {
    const query = (request.query ?? {}) as Record<string, string | string[]>;
    const scim = route.dialect === ErrorDialect.SCIM;
    const filled = new Set<string>();
    for (const [name, raw] of Object.entries(query)) {
      // SCIM (RFC 7644 3.4.2, 3.10): parameter names are case-insensitive, since IdPs send
      // startindex, Count or excludedattributes; parameters SCIM does not define here are ignored,
      // as SCIM service providers do (and RFC 6749 3.1 for OAuth). Elsewhere names are exact and
      // an unknown one is refused.
      const field = scim ? fieldByNameIgnoringCase(input, name) : fieldByName(input, name);
      if (!field) {
        if (scim) continue;
        throw invalidArgument(`Unknown query parameter "${name}"`, [{ name, value: "unknown" }]);
      }
      // count=1&Count=2 names one parameter twice.
      if (filled.has(field.name))
        throw invalidArgument(`Parameter "${name}" is repeated`, [{ name, value: "repeated" }]);
      filled.add(field.name);
      json[field.jsonName] = fromText(field, raw, name);
    }
  }
  const params = (request.params ?? {}) as Record<string, string>;
  for (const { variable, field } of route.pathFields) {
    json[field.jsonName] = fromText(field, params[variable] ?? "", variable);
  }
  return json;
}

function bodyObject(request: FastifyRequest, input: DescMessage): JsonObject {
  const body = request.body;
  // No body at all means an empty request; a JSON `null` or any non-object is malformed.
  if (body === undefined) return {};
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidArgument("The request body must be a JSON object");
  if (!isForm(request)) return body as JsonObject;
  // Form fields are named by their proto (RFC 6749) names; each may appear once (RFC 6749 3.2),
  // except a repeated field's, whose RFC says it may repeat (RFC 8707 resource).
  const json: JsonObject = {};
  for (const [name, value] of Object.entries(body as Record<string, string | string[]>)) {
    const field = fieldByName(input, name);
    if (Array.isArray(value) && field?.fieldKind !== "list")
      throw invalidArgument(`Parameter "${name}" is repeated`, [{ name, value: "repeated" }]);
    if (field) json[field.jsonName] = fromText(field, value, name);
  }
  return json;
}

/** A route declaring a media type (application/scim+json) takes it or application/json, nothing else. */
function acceptsJsonType(route: RestRoute, request: FastifyRequest): boolean {
  if (route.formBody || route.contentType === "") return true;
  const type = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  return type === "application/json" || type === route.contentType;
}

function isForm(request: FastifyRequest): boolean {
  return (request.headers["content-type"] ?? "").toLowerCase().startsWith("application/x-www-form-urlencoded");
}

function fieldByName(input: DescMessage, name: string): DescField | undefined {
  return input.fields.find((f) => f.jsonName === name || f.name === name);
}

function fieldByNameIgnoringCase(input: DescMessage, name: string): DescField | undefined {
  const lower = name.toLowerCase();
  return input.fields.find((f) => f.jsonName.toLowerCase() === lower || f.name.toLowerCase() === lower);
}

/** Query, path and form values arrive as text; protobuf JSON accepts numbers as strings, not booleans. */
function fromText(field: DescField, raw: string | string[], name: string): JsonValue {
  if (Array.isArray(raw)) {
    if (field.fieldKind !== "list")
      throw invalidArgument(`Parameter "${name}" is repeated`, [{ name, value: "repeated" }]);
    return raw.map((item) => (fromText(field, item, name) as string[])[0]!);
  }
  if (field.fieldKind === "scalar" && field.scalar === ScalarType.BOOL) {
    if (raw === "true" || raw === "false") return raw === "true";
    throw invalidArgument(`Parameter "${name}" must be true or false`, [{ name, value: raw }]);
  }
  // protobuf JSON would also take "0x10", "1e2", "1.0", "+5", " 5" (JavaScript's Number()), "-0"
  // and "007": an integer in a query, a path or a form has one spelling, its canonical decimal one.
  const scalar = field.fieldKind === "scalar" || field.fieldKind === "list" ? field.scalar : undefined;
  if (scalar !== undefined && INTEGER_TYPES.has(scalar) && !CANONICAL_INTEGER.test(raw)) {
    throw invalidArgument(
      `Parameter "${name}" must be an integer in plain decimal digits (no leading zero, no sign on zero)`,
      [{ name, value: printable(raw, 40) }],
    );
  }
  return field.fieldKind === "list" ? [raw] : raw;
}

/** 0, or an optional minus and digits without a leading zero: at most 20 characters of digits. */
const CANONICAL_INTEGER = /^(?:0|-?[1-9][0-9]{0,19})$/;

const INTEGER_TYPES: ReadonlySet<ScalarType> = new Set([
  ScalarType.INT32,
  ScalarType.INT64,
  ScalarType.UINT32,
  ScalarType.UINT64,
  ScalarType.SINT32,
  ScalarType.SINT64,
  ScalarType.FIXED32,
  ScalarType.FIXED64,
  ScalarType.SFIXED32,
  ScalarType.SFIXED64,
]);

/**
 * The JSON path ("companyCreditFilter.expiryDateRange.expiryDateStart", "credits[3].totalFare")
 * of the first field present in `json` that `matches`, following the descriptor (depth bounded by
 * the JSON depth limit already checked).
 */
function jsonPathOf(
  message: DescMessage,
  json: unknown,
  matches: (parent: DescMessage, field: DescField, value: unknown) => boolean,
  prefix = "",
): string | undefined {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return undefined;
  const object = json as Record<string, unknown>;
  for (const f of message.fields) {
    const key = f.jsonName in object ? f.jsonName : f.name in object ? f.name : undefined;
    if (key === undefined) continue;
    const path = `${prefix}${f.jsonName}`;
    const value = object[key];
    if (matches(message, f, value)) return path;
    const inner: Array<[unknown, string]> =
      f.fieldKind === "message"
        ? [[value, `${path}.`]]
        : f.fieldKind === "list" && f.listKind === "message" && Array.isArray(value)
          ? value.map((item, i) => [item, `${path}[${i}].`])
          : f.fieldKind === "map" && f.mapKind === "message" && typeof value === "object" && value !== null
            ? Object.entries(value).map(([k, item]) => [item, `${path}.${k}.`])
            : [];
    for (const [item, itemPrefix] of inner) {
      const found = jsonPathOf((f as { message: DescMessage }).message, item, matches, itemPrefix);
      if (found) return found;
    }
  }
  return undefined;
}

/** protobuf-es decode errors, reworded without internal type names. */
function decodeFailure(error: unknown, input: DescMessage, json: unknown) {
  const text = error instanceof Error ? error.message : String(error);
  const field = /^cannot decode field ([\w.]+)\.(\w+) from JSON: (.*)$/s.exec(text);
  if (field) {
    // protobuf-es names the field by its message type, not its place: find that place in the body.
    const name =
      jsonPathOf(input, json, (parent, f) => parent.typeName === field[1] && f.name === field[2]) ??
      input.fields.find((f) => f.name === field[2])?.jsonName ??
      field[2]!;
    return invalidArgument(`Invalid value for field "${name}": ${field[3]}`, [{ name, value: "invalid" }]);
  }
  const message = /^cannot decode message ([\w.]+) from JSON: (.*)$/s.exec(text);
  if (message) {
    // A message-typed field given something that is not an object: name the field holding it.
    const isObject = (v: unknown) => typeof v === "object" && v !== null && !Array.isArray(v);
    const name = jsonPathOf(
      input,
      json,
      (_, f, value) => f.message?.typeName === message[1] && !isObject(value) && value !== null,
    );
    if (name) return invalidArgument(`Invalid value for field "${name}": ${message[2]}`, [{ name, value: "invalid" }]);
  }
  const rest = /^cannot decode (?:message )?[\w.]+ from JSON: (.*)$/s.exec(text);
  return invalidArgument(`The request could not be decoded: ${rest ? rest[1] : "malformed input"}`);
}
