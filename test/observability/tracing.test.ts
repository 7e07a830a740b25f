import assert from "node:assert/strict";
import crypto from "node:crypto";
import { PassThrough } from "node:stream";
import { after, before, describe, test } from "node:test";
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { AuthService } from "../../gen/travel/auth/v2/auth_pb.js";
import { createService, type Service } from "../../src/app/compose.js";
import { loadConfig } from "../../src/config/config.js";
import { fetchToken } from "../helpers/api.js";
import { grpcJsUnary, jsonGrpcClient } from "../helpers/grpc-js.js";
import { backend, isPostgres, newStorage, serviceEnv, type Storage } from "../helpers/backend.js";
import { dropStorage, operatorCall, operatorHeaders } from "../helpers/service.js";

/*
 * OpenTelemetry tracing end to end, on the backend of the run (TEST_BACKEND): a service started
 * with tracing on, its spans exported to an InMemorySpanExporter through createService's
 * test-only `spanExporter` option (no environment variable could turn that on in production).
 */

const FETCH_TOKEN = "travel.auth.v2.AuthService/FetchOauth2Token";
/** The HTTP server span of a REST token request (`<METHOD> <route template>`). */
const TOKEN_ROUTE = "POST /v2/auth/oauth2-token";
/** Both backends are PostgreSQL (the embedded one compiled to WebAssembly). */
const DB_SYSTEM = "postgresql";

const exporter = new InMemorySpanExporter();
let service: Service;
let storage: Storage;
let baseUrl: string;
let client: { clientId: string; clientSecret: string };
/** The service's log, line by line (JSON). */
const logStream = new PassThrough();
const logLines: string[] = [];
/** Every credential these tests sent or received: no span may hold any of them. */
const secrets = new Set<string>();
const accessTokens: string[] = [];

/** The spans of one trace, once its RPC span has ended (and a moment for late children). */
async function traceOf(traceId: string | (() => string | undefined)): Promise<ReadableSpan[]> {
  const id = () => (typeof traceId === "string" ? traceId : traceId());
  for (let i = 0; i < 100 && id() === undefined; i++) await new Promise((r) => setTimeout(r, 20));
  const found = id();
  assert.ok(found, "the RPC span was exported");
  await new Promise((r) => setTimeout(r, 100));
  return exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === found);
}

/** The last exported RPC span of a method whose request.id is `requestId`. */
function rpcSpan(name: string, requestId: string | null): ReadableSpan | undefined {
  return exporter.getFinishedSpans().find((s) => s.name === name && s.attributes["request.id"] === requestId);
}

/** The HTTP server span of a successful REST token request carries these attributes… */
const REST_TOKEN_ATTRIBUTES = {
  "http.request.method": "POST",
  "http.route": "/v2/auth/oauth2-token",
  "http.response.status_code": 200,
  "url.path": "/v2/auth/oauth2-token",
  "travel.protocol": "rest",
};
/** …and the RPC's span under it these. */
const REST_TOKEN_RPC_ATTRIBUTES = {
  "rpc.system": "connect_rpc",
  "rpc.service": "travel.auth.v2.AuthService",
  "rpc.method": "FetchOauth2Token",
  "rpc.grpc.status_code": 0,
  "travel.protocol": "rest",
};

/** The span's attributes of these names (absent ones as undefined). */
function attributesOf(span: ReadableSpan, names: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(names.map((name) => [name, span.attributes[name]]));
}

/** Whether `span` descends from `ancestor` within the exported spans. */
function descendsFrom(span: ReadableSpan, ancestor: ReadableSpan, spans: readonly ReadableSpan[]): boolean {
  const bySpanId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
  let parentId = span.parentSpanContext?.spanId;
  for (let depth = 0; parentId !== undefined && depth < 20; depth++) {
    if (parentId === ancestor.spanContext().spanId) return true;
    parentId = bySpanId.get(parentId)?.parentSpanContext?.spanId;
  }
  return false;
}

describe(`tracing, backend: ${backend}`, () => {
  before(async () => {
    storage = newStorage();
    logStream.on("data", (chunk: Buffer) => logLines.push(...chunk.toString("utf8").split("\n").filter(Boolean)));
    service = await createService(loadConfig(serviceEnv(storage)), { logStream, spanExporter: exporter });
    baseUrl = await service.listen();
    client = await operatorCall<{ clientId: string; clientSecret: string }>(baseUrl, "Seed", {});
    secrets.add(client.clientSecret);
  });

  after(async () => {
    await service?.close();
    if (storage) await dropStorage(storage);
  });

  test("a REST token request makes one trace: the HTTP server span, the RPC's span under it, its database and Redis spans under that", async () => {
    const response = await fetchToken(baseUrl, client.clientId, client.clientSecret);
    assert.equal(response.status, 200);
    const body = (await response.json()) as { access_token: string };
    secrets.add(body.access_token);
    accessTokens.push(body.access_token);
    const requestId = response.headers.get("x-request-id");
    assert.ok(requestId, "the answer names its request id");

    const spans = await traceOf(() => rpcSpan(FETCH_TOKEN, requestId)?.spanContext().traceId);
    const http = spans.find((s) => s.name === TOKEN_ROUTE);
    assert.ok(http, `the HTTP server span: ${spans.map((s) => s.name).join(", ")}`);
    assert.equal(http.kind, SpanKind.SERVER);
    assert.equal(http.parentSpanContext, undefined, "no traceparent: the HTTP span is the trace's root");
    assert.deepEqual(attributesOf(http, Object.keys(REST_TOKEN_ATTRIBUTES)), REST_TOKEN_ATTRIBUTES);
    assert.match(String(http.attributes["client.address"]), /127\.0\.0\.1|::1/);

    const rpc = spans.find((s) => s.name === FETCH_TOKEN)!;
    assert.equal(rpc.kind, SpanKind.INTERNAL, "under REST, the RPC is an internal span of the HTTP request");
    assert.equal(rpc.parentSpanContext?.spanId, http.spanContext().spanId);
    assert.deepEqual(attributesOf(rpc, Object.keys(REST_TOKEN_RPC_ATTRIBUTES)), REST_TOKEN_RPC_ATTRIBUTES);
    assert.equal(rpc.attributes["request.id"], requestId);
    assert.equal(rpc.status.code, SpanStatusCode.UNSET);

    const db = spans.filter((s) => s.attributes["db.system.name"] === DB_SYSTEM);
    assert.ok(db.length > 0, `database spans in the trace: ${spans.map((s) => s.name).join(", ")}`);
    for (const span of db) {
      assert.equal(span.kind, SpanKind.CLIENT);
      assert.ok(descendsFrom(span, rpc, spans), `${span.name} is a child of the RPC span`);
      assert.match(String(span.attributes["db.operation.name"]), /^[A-Z]+$/);
      assert.equal(span.attributes["db.namespace"], isPostgres ? storage.schema : "public");
      const table = span.attributes["db.collection.name"];
      // Named `<operation> <table>` (`SELECT api_users`) when the statement names a table.
      assert.equal(
        span.name,
        table === undefined ? span.attributes["db.operation.name"] : `${span.attributes["db.operation.name"]} ${table}`,
      );
    }
    assert.ok(
      db.some((s) => s.name === "SELECT api_users" && s.attributes["db.collection.name"] === "api_users"),
      `the client's record is read: ${db.map((s) => s.name).join(", ")}`,
    );
    const redis = spans.filter((s) => s.attributes["db.system.name"] === "redis");
    if (isPostgres) {
      assert.ok(redis.length > 0, `Redis spans in the trace: ${spans.map((s) => s.name).join(", ")}`);
      for (const span of redis) {
        assert.equal(span.kind, SpanKind.CLIENT);
        assert.ok(descendsFrom(span, rpc, spans), `${span.name} is a child of the RPC span`);
        assert.match(String(span.attributes["db.operation.name"]), /^(MGET|EVAL|EVALSHA|MULTI|DEL)$/);
      }
    } else {
      assert.deepEqual(redis, [], "the embedded backend has no Redis");
    }

    // The request's log line carries the trace id.
    const line = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.reqId === requestId);
    assert.ok(line, "the request's log line");
    assert.equal(line.trace_id, rpc.spanContext().traceId);
  });

  test("a gRPC call (@grpc/grpc-js) is a server span of rpc.system grpc, with the caller's address; its log line names the trace", async () => {
    const grpc = jsonGrpcClient(AuthService, new URL(baseUrl).host);
    try {
      const outcome = await grpcJsUnary(grpc, "FetchOauth2Token", {
        grant_type: "client_credentials",
        client_id: client.clientId,
        client_secret: client.clientSecret,
      });
      assert.equal(outcome.code, 0, outcome.details);
      const token = (outcome.response as { accessToken?: string; access_token?: string }) ?? {};
      for (const value of Object.values(token)) if (typeof value === "string" && value.length > 40) secrets.add(value);
      const spans = await traceOf(() => rpcSpan(FETCH_TOKEN, outcome.requestId ?? null)?.spanContext().traceId);
      const rpc = spans.find((s) => s.name === FETCH_TOKEN)!;
      assert.equal(rpc.kind, SpanKind.SERVER);
      assert.equal(rpc.parentSpanContext, undefined);
      assert.equal(rpc.attributes["rpc.system"], "grpc");
      assert.equal(rpc.attributes["travel.protocol"], "grpc");
      assert.match(String(rpc.attributes["client.address"]), /127\.0\.0\.1|::1/);
      assert.ok(spans.some((s) => s.attributes["db.system.name"] === DB_SYSTEM && descendsFrom(s, rpc, spans)));
      const line = logLines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.reqId === outcome.requestId && l.msg === "request completed");
      assert.ok(line, "the call's log line");
      assert.equal(line.trace_id, rpc.spanContext().traceId);
    } finally {
      grpc.close();
    }
  });

  test("a background job's run is a root span of its own with its queries as children; an idle audit flush makes none", async () => {
    let reconcile: ReadableSpan | undefined;
    for (let i = 0; i < 100 && !reconcile; i++) {
      await new Promise((r) => setTimeout(r, 50));
      reconcile = exporter.getFinishedSpans().find((s) => s.name === "job credential reconcile");
    }
    assert.ok(reconcile, "the credential reconcile job's span (every 500 ms)");
    assert.equal(reconcile.kind, SpanKind.INTERNAL);
    assert.equal(reconcile.parentSpanContext, undefined);
    assert.equal(reconcile.attributes["travel.job"], "credential reconcile");
    // The audit flush (four times a second) makes a span only when it has events to write: the
    // token requests before made some, so there is one, and each it made wrote them.
    const all = exporter.getFinishedSpans();
    const flushes = all.filter((s) => s.name === "job audit flush");
    assert.ok(flushes.length > 0, "the token requests' audit events were flushed in a job span");
    for (const flush of flushes) {
      assert.equal(flush.parentSpanContext, undefined);
      assert.ok(
        all.some(
          (s) =>
            s.attributes["db.collection.name"] === "audit_events" &&
            /insert into (?:"?\w+"?\.)?"?audit_events/i.test(String(s.attributes["db.query.text"])) &&
            descendsFrom(s, flush, all),
        ),
        "each audit flush span holds its write to audit_events",
      );
    }
  });

  test("a request carrying a traceparent continues the caller's trace, on the REST face and on an RPC face", async () => {
    const traceId = crypto.randomBytes(16).toString("hex");
    const parentId = crypto.randomBytes(8).toString("hex");
    const traceparent = `00-${traceId}-${parentId}-01`;

    const rest = await fetch(`${baseUrl}/v2/auth/oauth2-token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", traceparent },
      body: new URLSearchParams({
        grant_type: "client_credentials",
        client_id: client.clientId,
        client_secret: client.clientSecret,
      }),
    });
    assert.equal(rest.status, 200);
    secrets.add(((await rest.json()) as { access_token: string }).access_token);
    const spans = await traceOf(traceId);
    const http = spans.find((s) => s.name === TOKEN_ROUTE);
    assert.ok(http, "the HTTP span joined the caller's trace");
    assert.equal(http.parentSpanContext?.spanId, parentId);
    const rpc = spans.find((s) => s.name === FETCH_TOKEN);
    assert.ok(rpc, "the token RPC's span joined the caller's trace");
    assert.equal(rpc.parentSpanContext?.spanId, http.spanContext().spanId);
    assert.equal(rpc.attributes["request.id"], rest.headers.get("x-request-id"));
    // (Its queries may all be answered by the client-record cache by now: the Connect call below
    // shows the children of a continued trace.)

    // The Connect protocol (JSON over HTTP/1.1) on OperatorService.
    const connectTraceId = crypto.randomBytes(16).toString("hex");
    const connect = await fetch(`${baseUrl}/travel.operator.v1.OperatorService/CreateTmc`, {
      method: "POST",
      headers: {
        ...operatorHeaders,
        "content-type": "application/json",
        traceparent: `00-${connectTraceId}-${parentId}-01`,
      },
      body: JSON.stringify({ name: "Traced TMC" }),
    });
    assert.equal(connect.status, 200);
    const operatorSpans = await traceOf(connectTraceId);
    const createTmc = operatorSpans.find((s) => s.name === "travel.operator.v1.OperatorService/CreateTmc");
    assert.ok(createTmc, "the operator RPC's span joined the caller's trace");
    assert.equal(createTmc.parentSpanContext?.spanId, parentId);
    assert.ok(
      operatorSpans.some((s) => s.attributes["db.operation.name"] === "INSERT"),
      "its INSERT is in the trace",
    );
  });

  test("a refused request's span has an error status with the Connect code and errorCode", async () => {
    const wrongSecret = `wrong-${crypto.randomBytes(12).toString("base64url")}`;
    secrets.add(wrongSecret);
    const response = await fetchToken(baseUrl, client.clientId, wrongSecret);
    assert.equal(response.status, 403);
    await response.arrayBuffer();
    const requestId = response.headers.get("x-request-id");
    const spans = await traceOf(() => rpcSpan(FETCH_TOKEN, requestId)?.spanContext().traceId);
    const rpc = spans.find((s) => s.name === FETCH_TOKEN)!;
    assert.equal(rpc.status.code, SpanStatusCode.ERROR);
    assert.equal(rpc.attributes["error.type"], "INVALID_CLIENT");
    // A 4xx is the client's: the HTTP server span has no error status (the conventions for server spans).
    const http = spans.find((s) => s.name === TOKEN_ROUTE)!;
    assert.equal(http.attributes["http.response.status_code"], 403);
    assert.equal(http.status.code, SpanStatusCode.UNSET);
    assert.notEqual(rpc.attributes["rpc.grpc.status_code"], 0);
    assert.equal(typeof rpc.attributes["rpc.connect_rpc.error_code"], "string");
  });

  test("an RPC authenticated with an access token is traced (the next test searches it for the token)", async () => {
    const token = accessTokens[0]!;
    const response = await fetch(`${baseUrl}/v2/api-users?limit=10`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(response.status, 200);
    await response.arrayBuffer();
    const requestId = response.headers.get("x-request-id");
    const spans = await traceOf(
      () => rpcSpan("travel.apiuser.v2.ApiUserService/GetApiUsers", requestId)?.spanContext().traceId,
    );
    const rpc = spans.find((s) => s.name === "travel.apiuser.v2.ApiUserService/GetApiUsers")!;
    assert.equal(rpc.attributes["rpc.grpc.status_code"], 0);
    assert.ok(
      spans.some((s) => s.attributes["db.system.name"] === DB_SYSTEM),
      "the listing's queries are in the trace",
    );
  });

  test("no span holds a client secret or an access token (every name, attribute, status and event)", () => {
    const spans = exporter.getFinishedSpans();
    assert.ok(spans.length > 10, `${spans.length} spans exported`);
    const leaks: string[] = [];
    for (const span of spans) {
      const texts = [
        span.name,
        span.status.message ?? "",
        ...Object.entries(span.attributes).map(([key, value]) => `${key}=${JSON.stringify(value)}`),
        ...span.events.flatMap((e) => [e.name, JSON.stringify(e.attributes ?? {})]),
      ];
      for (const text of texts) {
        for (const secret of secrets) if (text.includes(secret)) leaks.push(`${span.name}: ${text.slice(0, 80)}`);
        // Any JWT at all, or a Basic/Bearer credential.
        if (/eyJ[\w-]+\.[\w-]+\.[\w-]+|Bearer |Basic /.test(text)) leaks.push(`${span.name}: ${text.slice(0, 80)}`);
      }
    }
    assert.deepEqual(leaks, []);
    assert.ok(
      secrets.size >= 4,
      "the secrets searched for include the client secret, a wrong one and the access tokens",
    );
  });
});
