import assert from "node:assert/strict";
import crypto from "node:crypto";
import { PassThrough } from "node:stream";
import { after, before, describe, test } from "node:test";
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { createService, type Service } from "../../src/app/compose.js";
import { loadConfig } from "../../src/config/config.js";
import { fetchToken } from "../helpers/api.js";
import { backend, isPostgres, newStorage, serviceEnv, type Storage } from "../helpers/backend.js";
import { dropStorage, operatorCall, operatorHeaders } from "../helpers/service.js";

/*
 * OpenTelemetry tracing end to end, on the backend of the run (TEST_BACKEND): a service started
 * with tracing on, its spans exported to an InMemorySpanExporter through createService's
 * test-only `spanExporter` option (no environment variable could turn that on in production).
 */

const FETCH_TOKEN = "travel.auth.v2.AuthService/FetchOauth2Token";
const DB_SYSTEM = isPostgres ? "postgresql" : "pglite";

const exporter = new InMemorySpanExporter();
let service: Service;
let storage: Storage;
let baseUrl: string;
let client: { clientId: string; clientSecret: string };
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
  return exporter
    .getFinishedSpans()
    .find((s) => s.name === name && s.kind === SpanKind.SERVER && s.attributes["request.id"] === requestId);
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
    service = await createService(loadConfig(serviceEnv(storage)), {
      logStream: new PassThrough().resume(),
      spanExporter: exporter,
    });
    baseUrl = await service.listen();
    client = await operatorCall<{ clientId: string; clientSecret: string }>(baseUrl, "Seed", {});
    secrets.add(client.clientSecret);
  });

  after(async () => {
    await service?.close();
    if (storage) await dropStorage(storage);
  });

  test("a REST token request makes one trace: the RPC's server span with its database and Redis spans as children", async () => {
    const response = await fetchToken(baseUrl, client.clientId, client.clientSecret);
    assert.equal(response.status, 200);
    const body = (await response.json()) as { access_token: string };
    secrets.add(body.access_token);
    accessTokens.push(body.access_token);
    const requestId = response.headers.get("x-request-id");
    assert.ok(requestId, "the answer names its request id");

    const spans = await traceOf(() => rpcSpan(FETCH_TOKEN, requestId)?.spanContext().traceId);
    const rpc = spans.find((s) => s.name === FETCH_TOKEN)!;
    assert.equal(rpc.kind, SpanKind.SERVER);
    assert.equal(rpc.parentSpanContext, undefined, "no traceparent: the RPC span is the trace's root");
    assert.deepEqual(
      {
        system: rpc.attributes["rpc.system"],
        service: rpc.attributes["rpc.service"],
        method: rpc.attributes["rpc.method"],
        code: rpc.attributes["rpc.grpc.status_code"],
      },
      { system: "connect_rpc", service: "travel.auth.v2.AuthService", method: "FetchOauth2Token", code: 0 },
    );
    assert.equal(rpc.attributes["request.id"], requestId);
    assert.equal(rpc.status.code, SpanStatusCode.UNSET);

    const db = spans.filter((s) => s.attributes["db.system"] === DB_SYSTEM);
    assert.ok(db.length > 0, `database spans in the trace: ${spans.map((s) => s.name).join(", ")}`);
    for (const span of db) {
      assert.equal(span.kind, SpanKind.CLIENT);
      assert.ok(descendsFrom(span, rpc, spans), `${span.name} is a child of the RPC span`);
      assert.match(String(span.attributes["db.operation.name"]), /^[A-Z]+$/);
    }
    const redis = spans.filter((s) => s.attributes["db.system"] === "redis");
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
    const rpc = spans.find((s) => s.name === FETCH_TOKEN);
    assert.ok(rpc, "the token RPC's span joined the caller's trace");
    assert.equal(rpc.parentSpanContext?.spanId, parentId);
    assert.equal(rpc.attributes["request.id"], rest.headers.get("x-request-id"));
    assert.ok(
      spans.some((s) => s.attributes["db.system"] !== undefined && descendsFrom(s, rpc, spans)),
      "its children are in the trace too",
    );

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
    const rpc = spans.find((s) => s.kind === SpanKind.SERVER)!;
    assert.equal(rpc.attributes["rpc.grpc.status_code"], 0);
    assert.ok(
      spans.some((s) => s.attributes["db.system"] === DB_SYSTEM),
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
