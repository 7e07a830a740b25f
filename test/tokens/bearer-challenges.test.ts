// RFC 6750 section 3: a refused bearer request says how to authenticate, in WWW-Authenticate, on
// REST, Connect and gRPC alike: the scheme alone without a token, invalid_token with the reason
// for a token that failed, insufficient_scope naming the scope that was missing.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  disposeService,
  grpcClients,
  newTenant,
  ROOMY_RATE_LIMITS,
  startTokenService,
  type Client,
} from "../helpers/token-kit.js";

let running: RunningService;
let admin: Client;

before(async () => {
  running = await startTokenService({ env: ROOMY_RATE_LIMITS });
  admin = (await newTenant(running.baseUrl)).admin;
});
after(() => disposeService(running));

const LIST = "/v2/api-users?limit=1";
const CONNECT_LIST = "/travel.apiuser.v2.ApiUserService/GetApiUsers";

async function rest(token?: string) {
  const res = await fetch(`${running.baseUrl}${LIST}`, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  return {
    status: res.status,
    challenge: res.headers.get("www-authenticate"),
    body: (await res.json()) as { errorMessages: Array<{ errorCode: string }> },
  };
}

async function connect(token?: string) {
  const res = await fetch(`${running.baseUrl}${CONNECT_LIST}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify({ limit: 1 }),
  });
  await res.arrayBuffer();
  return { status: res.status, challenge: res.headers.get("www-authenticate") };
}

async function grpc(token?: string) {
  const clients = grpcClients(running.baseUrl);
  try {
    const reply = await clients.call("apiUser", "getApiUsers", { limit: 1 }, token);
    assert.equal(reply.ok, false);
    return {
      code: reply.ok ? 0 : reply.code,
      challenge: reply.ok ? undefined : (reply.metadata?.get("www-authenticate")[0] as string | undefined),
    };
  } finally {
    clients.close();
  }
}

describe("WWW-Authenticate on bearer refusals (RFC 6750)", () => {
  test("no token: 401 with the scheme alone (no error code), on REST, Connect and gRPC", async () => {
    const viaRest = await rest();
    assert.equal(viaRest.status, 401);
    assert.equal(viaRest.challenge, "Bearer");
    assert.deepEqual(await connect(), { status: 401, challenge: "Bearer" });
    assert.deepEqual(await grpc(), { code: 16, challenge: "Bearer" });
  });

  test("a token that fails: 401 invalid_token with the reason", async () => {
    const expected = 'Bearer error="invalid_token", error_description="The access token is not valid"';
    const viaRest = await rest("not-a-jwt");
    assert.equal(viaRest.status, 401);
    assert.equal(viaRest.challenge, expected);
    assert.deepEqual(await connect("not-a-jwt"), { status: 401, challenge: expected });
    assert.deepEqual(await grpc("not-a-jwt"), { code: 16, challenge: expected });
  });

  test("a valid token without the scope: 403 insufficient_scope naming it; a token with it: no challenge", async () => {
    const narrow = await accessTokenOf(running.baseUrl, admin, { scope: "users:read" });
    const expected = 'Bearer error="insufficient_scope", scope="api-users"';
    const viaRest = await rest(narrow);
    assert.equal(viaRest.status, 403);
    assert.equal(viaRest.challenge, expected);
    assert.deepEqual(await connect(narrow), { status: 403, challenge: expected });
    assert.deepEqual(await grpc(narrow), { code: 7, challenge: expected });
    const full = await rest(await accessTokenOf(running.baseUrl, admin));
    assert.equal(full.status, 200);
    assert.equal(full.challenge, null);
  });
});
