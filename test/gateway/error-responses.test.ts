import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { InjectOptions } from "fastify";
import { seededAdminAuthorization } from "../helpers/api.js";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";

/** The ErrorResponse shape of spec 2.11, with debugIdentifier = the request id the logs carry. */
function assertErrorResponse(
  response: { statusCode: number; headers: Record<string, unknown>; json(): any },
  status: number,
  errorCode: string,
) {
  assert.equal(response.statusCode, status);
  assert.match(String(response.headers["content-type"]), /^application\/json/);
  const body = response.json();
  assert.equal(typeof body.debugIdentifier, "string");
  assert.equal(body.debugIdentifier, response.headers["x-request-id"]);
  assert.ok(Array.isArray(body.errorMessages) && body.errorMessages.length === 1, JSON.stringify(body));
  assert.equal(body.errorMessages[0].errorCode, errorCode);
  assert.equal(typeof body.errorMessages[0].message, "string");
  return body;
}

describe("ErrorResponse for every failure", () => {
  let running: RunningService;
  let authorization: string;
  before(async () => {
    running = await startService({ env: { BODY_LIMIT_BYTES: "2048" } });
    authorization = await seededAdminAuthorization(running.baseUrl);
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });
  // Protected routes validate after authentication: a TMC admin's token goes with every request.
  const inject = (options: InjectOptions) =>
    running.service.app.inject({ ...options, headers: { authorization, ...(options.headers ?? {}) } });

  test("unknown path → 404", async () => {
    const body = assertErrorResponse(
      await inject({ method: "GET", url: "/v2/nothing-here?x=1" }),
      404,
      "ROUTE_NOT_FOUND",
    );
    assert.equal(body.errorMessages[0].message, "No route for GET /v2/nothing-here");
  });

  // RFC 9110 15.5.6, the path exists (it was 404 before).
  test("wrong method on a known path → 405 METHOD_NOT_ALLOWED with Allow", async () => {
    const response = await inject({ method: "DELETE", url: "/v2/api-users" });
    const body = assertErrorResponse(response, 405, "METHOD_NOT_ALLOWED");
    assert.equal(response.headers.allow, "GET, HEAD, POST");
    assert.equal(body.errorMessages[0].message, "DELETE is not allowed on /v2/api-users; it takes GET, HEAD, POST");
  });

  test("malformed JSON → 400", async () => {
    assertErrorResponse(
      await inject({
        method: "POST",
        url: "/v2/api-users",
        headers: { "content-type": "application/json" },
        payload: "{bad",
      }),
      400,
      "API_VALIDATION_FAILED",
    );
  });

  test("a JSON body that is not an object → 400", async () => {
    for (const payload of ["[1,2]", "42", '"text"', "null"]) {
      assertErrorResponse(
        await inject({
          method: "POST",
          url: "/v2/api-users",
          headers: { "content-type": "application/json" },
          payload,
        }),
        400,
        "API_VALIDATION_FAILED",
      );
    }
  });

  test("an unknown JSON field → 400 naming it", async () => {
    const body = assertErrorResponse(
      await inject({
        method: "POST",
        url: "/v2/api-users",
        headers: { "content-type": "application/json" },
        payload: '{"credentialtype":"SCIM_TOKEN"}',
      }),
      400,
      "API_VALIDATION_FAILED",
    );
    assert.match(body.errorMessages[0].message, /credentialtype/);
  });

  test('an integer in a query string is canonical decimal only: 0x10, 1e2, 1.0, +5, " 5", -0, 007 → 400 naming the parameter', async () => {
    for (const value of [
      "0x10",
      "1e2",
      "1.0",
      "+5",
      " 5",
      "5 ",
      "0b1",
      "Infinity",
      "",
      "-0",
      "00",
      "007",
      "-05",
      "-00",
    ]) {
      const body = assertErrorResponse(
        await inject({ method: "GET", url: `/v2/api-users?limit=${encodeURIComponent(value)}` }),
        400,
        "API_VALIDATION_FAILED",
      );
      assert.equal(body.errorMessages[0].errorParameters[0].name, "limit", JSON.stringify(value));
      assert.match(body.errorMessages[0].message, /"limit" must be an integer in plain decimal digits/);
    }
    for (const value of ["5", "0", "100", "10"])
      assert.equal((await inject({ method: "GET", url: `/v2/api-users?limit=${value}` })).statusCode, 200, value);
    // A negative number is spelled canonically and refused by the field's rule, not the spelling.
    const negative = await inject({ method: "GET", url: "/v2/api-users?limit=-5" });
    assert.equal(negative.statusCode, 400);
    assert.doesNotMatch(negative.json().errorMessages[0].message, /plain decimal/);
  });

  test("a field of the wrong type → 400 naming the field", async () => {
    const body = assertErrorResponse(
      await inject({
        method: "POST",
        url: "/v2/api-users",
        headers: { "content-type": "application/json" },
        payload: '{"tmcId": 12}',
      }),
      400,
      "API_VALIDATION_FAILED",
    );
    assert.deepEqual(body.errorMessages[0].errorParameters, [{ name: "tmcId", value: "invalid" }]);
  });

  test("an unknown enum value → 400", async () => {
    assertErrorResponse(
      await inject({
        method: "POST",
        url: "/v2/api-users",
        headers: { "content-type": "application/json" },
        payload: '{"role":"SUPERUSER"}',
      }),
      400,
      "API_VALIDATION_FAILED",
    );
  });

  test("malformed form body → 400, repeated parameter → 400 (RFC 6749 3.2)", async () => {
    const headers = { "content-type": "application/x-www-form-urlencoded" };
    assertErrorResponse(
      await inject({
        method: "POST",
        url: "/v2/auth/oauth2-token",
        headers,
        payload: "grant_type=client_credentials&grant_type=password",
      }),
      400,
      "API_VALIDATION_FAILED",
    );
  });

  test("validation failures from buf.validate rules → 400 with one errorParameter per field (JSON names)", async () => {
    const limit = assertErrorResponse(
      await inject({ method: "GET", url: "/v2/api-users?limit=101&offset=-1" }),
      400,
      "API_VALIDATION_FAILED",
    );
    assert.deepEqual(limit.errorMessages[0].errorParameters.map((p: { name: string }) => p.name).sort(), [
      "limit",
      "offset",
    ]);
    const uuid = assertErrorResponse(
      await inject({
        method: "POST",
        url: "/v2/api-users",
        headers: { "content-type": "application/json" },
        payload: '{"tmcId":"not-a-uuid","orgId":"x"}',
      }),
      400,
      "API_VALIDATION_FAILED",
    );
    assert.deepEqual(uuid.errorMessages[0].errorParameters.map((p: { name: string }) => p.name).sort(), [
      "orgId",
      "tmcId",
    ]);
    const nested = assertErrorResponse(
      await inject({
        method: "POST",
        url: "/v3/air/company-transferable-unused-credits/list",
        headers: { "content-type": "application/json" },
        payload: '{"companyId":{"id":"nope"}}',
      }),
      400,
      "API_VALIDATION_FAILED",
    );
    assert.equal(nested.errorMessages[0].errorParameters[0].name, "companyId.id");
  });

  test("non-numbers and out-of-range numbers in the query → 400", async () => {
    for (const query of ["limit=abc", "limit=1.5", "offset=", "limit=99999999999", "unknown=1", "limit=1&limit=2"]) {
      assertErrorResponse(await inject({ method: "GET", url: `/v2/api-users?${query}` }), 400, "API_VALIDATION_FAILED");
    }
  });

  test("a path parameter that is not a UUID → 400", async () => {
    assertErrorResponse(await inject({ method: "GET", url: "/v2/users/not-a-uuid" }), 400, "API_VALIDATION_FAILED");
  });

  test("a boolean query parameter that is not true/false → 400", async () => {
    assertErrorResponse(
      await inject({ method: "GET", url: "/v2/users/6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f?includeInactive=yes" }),
      400,
      "API_VALIDATION_FAILED",
    );
  });

  test("body over the configured size → 413", async () => {
    assertErrorResponse(
      await inject({
        method: "POST",
        url: "/v2/api-users",
        headers: { "content-type": "application/json" },
        payload: JSON.stringify({ role: "TMC_ADMIN", pad: "x".repeat(4096) }),
      }),
      413,
      "PAYLOAD_TOO_LARGE",
    );
  });

  test("unsupported content type → 415", async () => {
    assertErrorResponse(
      await inject({ method: "POST", url: "/v2/api-users", headers: { "content-type": "text/xml" }, payload: "<a/>" }),
      415,
      "UNSUPPORTED_MEDIA_TYPE",
    );
  });

  test("a user the caller cannot see → 404 NOT_FOUND, never a made-up 200", async () => {
    assertErrorResponse(
      await inject({ method: "GET", url: "/v2/users/6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f" }),
      404,
      "NOT_FOUND",
    );
  });

  test("the debugIdentifier finds the request in the logs", async () => {
    const response = await inject({ method: "GET", url: "/v2/api-users?limit=500" });
    const id = response.json().debugIdentifier as string;
    const lines = running
      .logs()
      .split("\n")
      .filter((l) => l.includes(id))
      .map((l) => JSON.parse(l));
    // One line per request at info ("request completed"), carrying the id, the request and the status.
    const completed = lines.filter((l) => l.msg === "request completed");
    assert.equal(completed.length, 1, "the request's line carries the id");
    assert.ok(lines.every((l) => l.reqId === id));
    assert.equal(completed[0].res?.statusCode, 400);
    assert.equal(completed[0].req?.url, "/v2/api-users?limit=…");
    // It says why: the catalogue code, the message and the RPC behind the route.
    assert.equal(completed[0].errorCode, response.json().errorMessages[0].errorCode);
    assert.equal(completed[0].errorMessage, response.json().errorMessages[0].message);
    assert.equal(completed[0].rpc, "travel.apiuser.v2.ApiUserService/GetApiUsers");
  });

  test("a refusal on an RPC face (Connect) is logged with its errorCode, message and RPC; a success line has none", async () => {
    const refused = await fetch(`${running.baseUrl}/travel.apiuser.v2.ApiUserService/GetApiUsers`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(refused.status, 401);
    const id = refused.headers.get("x-request-id")!;
    const ok = await fetch(`${running.baseUrl}/healthz`);
    const okId = ok.headers.get("x-request-id")!;
    const lineOf = (reqId: string) =>
      running
        .logs()
        .split("\n")
        .filter((l) => l.includes(reqId))
        .map((l) => JSON.parse(l))
        .find((l) => l.msg === "request completed");
    const line = lineOf(id);
    assert.equal(line?.errorCode, "USER_NOT_AUTHENTICATED");
    assert.match(line?.errorMessage ?? "", /access token is required/);
    assert.equal(line?.rpc, "travel.apiuser.v2.ApiUserService/GetApiUsers");
    const okLine = lineOf(okId);
    assert.equal(okLine?.res?.statusCode, 200);
    assert.equal(okLine?.errorCode, undefined);
  });

  test("garbage never yields a 500", async () => {
    const payloads = [
      "\u0000",
      '{"role":',
      '{"role":null}',
      '{"__proto__":{"x":1}}',
      '{"tmcId":["a"]}',
      '{"orgId":{}}',
      "1e999",
      '{"role":1e400}',
    ];
    for (const payload of payloads) {
      const response = await inject({
        method: "POST",
        url: "/v2/api-users/rotate",
        headers: { "content-type": "application/json" },
        payload,
      });
      assert.ok(
        response.statusCode >= 400 && response.statusCode < 500,
        `${payload} → ${response.statusCode} ${response.body}`,
      );
      assert.ok(response.json().debugIdentifier);
    }
  });
});
