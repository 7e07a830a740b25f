import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { internalsOf } from "../../src/app/test-access.js";
import { accessToken, callApi, fetchToken } from "../helpers/api.js";
import { assertGrpcFailure, basicAuthorization, GRPC, grpcClients } from "../helpers/token-kit.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";

/**
 * Issue 8, failure 2: one token request with a NUL byte answered 500, its audit event could
 * never be inserted, the batch was retried for ever and no later token event was written.
 * Bad bytes are now refused at the edge (400), and the audit writer can no longer be blocked.
 */
describe("bad bytes never reach storage or break the audit trail", () => {
  let running: RunningService;
  let seed: { tmcId: string; clientId: string; clientSecret: string };
  let admin: string;
  before(async () => {
    running = await startService({
      env: { TOKEN_RATE_LIMIT_PER_ADDRESS: "10000/60", TOKEN_FAILURE_LIMIT: "10000/60", AUDIT_FLUSH_INTERVAL_MS: "20" },
    });
    seed = await operatorCall(running.baseUrl, "Seed", {});
    admin = await accessToken(running.baseUrl, seed.clientId, seed.clientSecret);
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  const form = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(`${running.baseUrl}/v2/auth/oauth2-token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body: new URLSearchParams(fields),
    });

  test("NUL and other control bytes in token-request fields are 400 invalid_request naming the field", async () => {
    for (const [field, value] of [
      ["client_id", "a\u0000"],
      ["client_secret", "x\u0001y"],
      ["scope", "openid\u007f"],
      ["grant_type", "client_credentials\u001b"],
    ] as const) {
      const response = await form({
        grant_type: "client_credentials",
        client_id: "a",
        client_secret: "x",
        [field]: value,
      });
      const body = (await response.json()) as any;
      assert.equal(response.status, 400, `${field}: ${JSON.stringify(body)}`);
      assert.equal(body.errorMessages[0].errorCode, "API_VALIDATION_FAILED");
      assert.equal(body.errorMessages[0].errorParameters[0].name, field);
      assert.equal(body.error, "invalid_request");
    }
  });

  /** Basic with the raw (not form-encoded) id and secret: the bytes reach the server as they are. */
  const rawBasic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`, "utf8").toString("base64")}`;

  test("NUL and control bytes in HTTP Basic credentials are 400 naming the field on the token, introspection and revocation endpoints, not 500", async () => {
    const cases: Array<[string, string, "client_id" | "client_secret"]> = [
      [rawBasic("a\u0000", "x"), "NUL in the id", "client_id"],
      [basicAuthorization("a\u0000", "x"), "percent-encoded NUL in the id", "client_id"],
      [rawBasic(seed.clientId, "x\u0000y"), "NUL in the secret of a real client", "client_secret"],
      [basicAuthorization("a\u001b[31m", "x"), "an escape in the id", "client_id"],
      [basicAuthorization("a", "x\u007f"), "DEL in the secret", "client_secret"],
      [basicAuthorization("a".repeat(257), "x"), "an id longer than the form field's 256", "client_id"],
    ];
    for (const [path, fields] of [
      ["/v2/auth/oauth2-token", { grant_type: "client_credentials" }],
      ["/v2/auth/introspect", { token: "x" }],
      ["/v2/auth/revoke", { token: "x" }],
    ] as const) {
      for (const [authorization, what, field] of cases) {
        const response = await fetch(`${running.baseUrl}${path}`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", authorization },
          body: new URLSearchParams(fields),
        });
        const body = (await response.json()) as any;
        assert.equal(response.status, 400, `${path}, ${what}: ${JSON.stringify(body)}`);
        assert.equal(body.errorMessages[0].errorCode, "API_VALIDATION_FAILED", `${path}, ${what}`);
        assert.equal(body.errorMessages[0].errorParameters[0].name, field, `${path}, ${what}`);
        assert.equal(body.error, "invalid_request");
      }
    }
    // Bytes that are not UTF-8, and base64 that is not base64, are malformed Basic credentials.
    for (const authorization of [`Basic ${Buffer.from([0x61, 0xff, 0x3a, 0x78]).toString("base64")}`, "Basic !!!!"]) {
      const response = await form({ grant_type: "client_credentials" }, { authorization });
      assert.equal(response.status, 400, authorization);
      assert.equal(((await response.json()) as any).error, "invalid_request");
    }
    // The same header through gRPC metadata and Connect.
    const grpc = grpcClients(running.baseUrl);
    try {
      const outcome = await grpc.call("auth", "FetchOauth2Token", { grantType: "client_credentials" }, undefined, {
        authorization: rawBasic("a\u0000", "x"),
      });
      assert.equal(
        assertGrpcFailure(outcome, GRPC.INVALID_ARGUMENT, "API_VALIDATION_FAILED").errorMessages[0]!.errorParameters[0]!
          .name,
        "client_id",
      );
    } finally {
      grpc.close();
    }
    const connect = await fetch(`${running.baseUrl}/travel.auth.v2.AuthService/IntrospectToken`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: rawBasic(seed.clientId, "\u0000") },
      body: JSON.stringify({ token: "x" }),
    });
    assert.equal(connect.status, 400);
    assert.equal(((await connect.json()) as any).code, "invalid_argument");
    assert.equal(running.logs().includes("invalid byte sequence"), false, "nothing reached Postgres");
  });

  test("Connect JSON that does not decode names no protobuf type, to an unauthenticated caller or anyone", async () => {
    for (const [path, body] of [
      ["/travel.apiuser.v2.ApiUserService/GetApiUsers", '{"limit":"0x1z"}'],
      ["/travel.apiuser.v2.ApiUserService/GetApiUsers", '{"limit":[1]}'],
      ["/travel.apiuser.v2.ApiUserService/CreateApiUser", '{"role":[1]}'],
      ["/travel.apiuser.v2.ApiUserService/CreateApiUser", "[1]"],
      ["/travel.auth.v2.AuthService/FetchOauth2Token", '{"grant_type":7}'],
    ] as const) {
      for (const authorization of [undefined, `Bearer ${admin}`]) {
        const response = await fetch(`${running.baseUrl}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
          body,
        });
        const answer = (await response.json()) as { code: string; message: string };
        assert.ok(response.status === 400 || response.status === 401, `${path} ${body}: ${response.status}`);
        assert.doesNotMatch(
          answer.message,
          /travel\.|google\.protobuf|[a-z]\.[A-Z]\w*Request/,
          `${path} ${body}: ${answer.message}`,
        );
      }
    }
  });

  test("Connect JSON is decoded as strictly as REST: an unknown enum value or field is 400 and creates nothing", async () => {
    const before = (await (await callApi(running.baseUrl, "/v2/api-users", admin)).json()) as { totalCount: number };
    for (const body of ['{"role":"NOPE"}', '{"credentialType":"PASSWORD"}', '{"role":"TMC_ADMIN","isRoot":true}']) {
      const response = await fetch(`${running.baseUrl}/travel.apiuser.v2.ApiUserService/CreateApiUser`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${admin}` },
        body,
      });
      const answer = (await response.json()) as { code: string; message: string };
      assert.equal(response.status, 400, `${body}: ${response.status} ${JSON.stringify(answer)}`);
      assert.equal(answer.code, "invalid_argument", body);
    }
    const after = (await (await callApi(running.baseUrl, "/v2/api-users", admin)).json()) as { totalCount: number };
    assert.equal(after.totalCount, before.totalCount, "no API user was created");
  });

  test("a lone surrogate (text that was not valid Unicode) is refused too", async () => {
    const response = await callApi(running.baseUrl, "/v2/api-users/rotate", admin, { clientId: "abc\ud800" });
    assert.equal(response.status, 400);
  });

  test("NUL in clientId on rotate and revoke is 400, not 500", async () => {
    for (const path of ["/v2/api-users/rotate", "/v2/api-users/revoke"]) {
      const response = await callApi(running.baseUrl, path, admin, { clientId: "a\u0000b" });
      const body = (await response.json()) as any;
      assert.equal(response.status, 400, `${path}: ${JSON.stringify(body)}`);
      assert.equal(body.errorMessages[0].errorParameters[0].name, "clientId");
    }
  });

  test("after a NUL request, the following token events are all written", async () => {
    assert.equal(
      (await form({ grant_type: "client_credentials", client_id: "a\u0000", client_secret: "x" })).status,
      400,
    );
    for (let i = 0; i < 10; i++)
      assert.equal((await fetchToken(running.baseUrl, seed.clientId, seed.clientSecret)).status, 200);
    const { db } = internalsOf(running.service);
    const count = async () =>
      Number(
        (await db("audit_events").where({ action: "TOKEN_ISSUED", actor: seed.clientId }).count({ n: "*" }).first())
          ?.n ?? 0,
      );
    // The writer flushes every 20 ms here; wait for the 11 issued events (1 from `before`) with a bound.
    for (let i = 0; i < 200 && (await count()) < 11; i++) await new Promise((r) => setTimeout(r, 25));
    assert.equal(await count(), 11);
    assert.equal(running.logs().includes("audit write failed"), false, "no audit batch failed");
  });
});
