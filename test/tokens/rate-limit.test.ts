// Rate limits of the token endpoints (spec 7.4, 8, 9.2): a budget per client_id, one per source
// address, and failed-authentication budgets per (client id, address) and, for unknown client
// ids, per address, that lock further attempts out; the legacy /get-auth-token shares them;
// gRPC callers get RESOURCE_EXHAUSTED.
//
// Budgets: TOKEN_RATE_LIMIT_PER_CLIENT=3/60, TOKEN_RATE_LIMIT_PER_ADDRESS=5/60, TOKEN_FAILURE_LIMIT=2/60.
// Every scenario has its own budgets: its own TMC and clients, and its own source address. The
// first service takes requests directly (127.0.0.1, X-Forwarded-For ignored); the second sits
// "behind a proxy" (TRUSTED_PROXIES=127.0.0.1), so each scenario sends its own X-Forwarded-For
// address — one PGlite start per scenario would make the embedded run take minutes.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { RunningService } from "../helpers/service.js";
import {
  assertGrpcFailure,
  assertOAuthError,
  disposeService,
  GRPC,
  grpcClients,
  LEGACY_PATH,
  newApiUser,
  newTenant,
  postForm,
  postJson,
  startTokenService,
  TOKEN_PATH,
  type Client,
  type HttpReply,
} from "../helpers/token-kit.js";

const LIMITS = {
  TOKEN_RATE_LIMIT_PER_CLIENT: "3/60",
  TOKEN_RATE_LIMIT_PER_ADDRESS: "5/60",
  TOKEN_FAILURE_LIMIT: "2/60",
};

let direct: RunningService;
let proxied: RunningService;
let nextAddress = 10;

before(async () => {
  [direct, proxied] = await Promise.all([
    startTokenService({ env: LIMITS }),
    startTokenService({ env: { ...LIMITS, TRUSTED_PROXIES: "127.0.0.1" } }),
  ]);
});

after(async () => {
  await Promise.all([disposeService(direct), disposeService(proxied)]);
});

/** One scenario's caller: a fresh source address (behind the trusted proxy) and a fresh TMC admin. */
async function scenario(): Promise<{ address: string; admin: Client; baseUrl: string }> {
  const tenant = await newTenant(proxied.baseUrl);
  return { address: `198.51.100.${nextAddress++}`, admin: tenant.admin, baseUrl: proxied.baseUrl };
}

function tokenRequest(
  baseUrl: string,
  address: string | undefined,
  client: Client,
  extra: Record<string, string> = {},
): Promise<HttpReply> {
  return postForm(
    baseUrl,
    TOKEN_PATH,
    { grant_type: "client_credentials", client_id: client.clientId, client_secret: client.clientSecret, ...extra },
    address ? { "x-forwarded-for": address } : {},
  );
}

function legacyRequest(
  baseUrl: string,
  address: string,
  client: Client,
  secret = client.clientSecret,
): Promise<HttpReply> {
  return postJson(
    baseUrl,
    LEGACY_PATH,
    { clientId: client.clientId, clientSecret: secret },
    { "x-forwarded-for": address },
  );
}

/** Draft RateLimit headers: `"default";r=<remaining>;t=<seconds>` and `"default";q=<limit>;w=<window>`. */
function rateLimitOf(res: HttpReply): { remaining: number; reset: number; quota: number; window: number } {
  const limit = res.headers.get("ratelimit");
  const policy = res.headers.get("ratelimit-policy");
  assert.ok(limit, "RateLimit header present");
  assert.ok(policy, "RateLimit-Policy header present");
  const l = /^"default";r=(\d+);t=(\d+)$/.exec(limit);
  const p = /^"default";q=(\d+);w=(\d+)$/.exec(policy);
  assert.ok(l, `RateLimit: ${limit}`);
  assert.ok(p, `RateLimit-Policy: ${policy}`);
  return { remaining: Number(l[1]), reset: Number(l[2]), quota: Number(p[1]), window: Number(p[2]) };
}

/** The 429 itself: status, ErrorResponse with an RFC 6749-style error, retryAfterSeconds parameter. */
function assertTooManyRequests(res: HttpReply): void {
  assert.equal(res.status, 429, JSON.stringify(res.body));
  assert.equal(res.body.errorMessages[0].errorCode, "TOO_MANY_REQUESTS");
  assert.match(res.body.error ?? "", /\S/, "the 429 carries an RFC 6749-style error");
  assert.match(res.body.error_description ?? "", /\S/);
  const retry = res.body.errorMessages[0].errorParameters.find((p: { name: string }) => p.name === "retryAfterSeconds");
  assert.ok(
    retry && /^\d+$/.test(retry.value) && Number(retry.value) >= 1 && Number(retry.value) <= 60,
    JSON.stringify(res.body),
  );
  assert.equal(res.body.access_token, undefined);
}

/** Retry-After (integer seconds) and the draft RateLimit headers of the budget that refused. */
function assertRateLimitHeaders(res: HttpReply, quota: number): void {
  const retryAfter = res.headers.get("retry-after");
  assert.ok(retryAfter !== null && /^\d+$/.test(retryAfter), `Retry-After is an integer, got ${retryAfter}`);
  assert.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= 60, `Retry-After ${retryAfter} within the window`);
  const { remaining, quota: q, window, reset } = rateLimitOf(res);
  assert.equal(remaining, 0);
  assert.equal(q, quota, "RateLimit-Policy names the budget that refused");
  assert.equal(window, 60);
  assert.equal(reset, Number(retryAfter), "t equals Retry-After on a refusal");
}

describe("token endpoint rate limits", () => {
  test("per address, direct callers: the 6th request across different client ids → 429; X-Forwarded-For from an untrusted peer is ignored", async () => {
    const tenant = await newTenant(direct.baseUrl);
    const clients = [tenant.admin];
    for (let i = 0; i < 5; i++) clients.push(await newApiUser(direct.baseUrl, tenant.tmcId, "TMC_ADMIN"));
    for (const [i, c] of clients.slice(0, 5).entries()) {
      const res = await tokenRequest(direct.baseUrl, `203.0.113.${i + 1}`, c);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(
        rateLimitOf(res).remaining,
        Math.min(2, 4 - i),
        "the tighter of the client's (3) and the address's (5) budgets",
      );
    }
    const refused = await tokenRequest(direct.baseUrl, "203.0.113.99", clients[5]!);
    assertTooManyRequests(refused);
    assertRateLimitHeaders(refused, 5);
  });

  test("per client: the 4th request within the window → 429 TOO_MANY_REQUESTS with Retry-After and RateLimit headers", async () => {
    const { address, admin, baseUrl } = await scenario();
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await tokenRequest(baseUrl, address, admin);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const rl = rateLimitOf(res);
      assert.equal(rl.quota, 3);
      assert.equal(rl.window, 60);
      assert.ok(rl.reset >= 1 && rl.reset <= 60);
      remaining.push(rl.remaining);
    }
    assert.deepEqual(remaining, [2, 1, 0]);
    const refused = await tokenRequest(baseUrl, address, admin);
    assertTooManyRequests(refused);
    // The same client from another address is still refused: the budget is the client's.
    assertTooManyRequests(await tokenRequest(baseUrl, "198.51.100.250", admin));
    // Another client from the same address has its own budget (the address has used 5 of 5 now).
    const other = await newApiUser(baseUrl, admin.tmcId, "TMC_ADMIN");
    const res = await tokenRequest(baseUrl, address, other);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    {
      assertRateLimitHeaders(refused, 3);
      assert.equal(refused.headers.get("cache-control"), "no-store");
    }
  });

  test("per address: across different client ids, the 6th request → 429; another address is unaffected", async () => {
    const { address, admin, baseUrl } = await scenario();
    const clients = [admin];
    for (let i = 0; i < 6; i++) clients.push(await newApiUser(baseUrl, admin.tmcId, "TMC_ADMIN"));
    for (const c of clients.slice(0, 5)) {
      const res = await tokenRequest(baseUrl, address, c);
      assert.equal(res.status, 200, JSON.stringify(res.body));
    }
    const refused = await tokenRequest(baseUrl, address, clients[5]!);
    assertTooManyRequests(refused);
    assertTooManyRequests(await tokenRequest(baseUrl, address, { ...clients[5]!, clientId: "someoneelse" }));
    const elsewhere = await tokenRequest(baseUrl, `198.51.100.${nextAddress++}`, clients[6]!);
    assert.equal(elsewhere.status, 200, JSON.stringify(elsewhere.body));
    assertRateLimitHeaders(refused, 5);
  });

  test("failed authentications: after 2 at one address, further wrong secrets there → 429, the right one is served; elsewhere the client is served", async () => {
    const { address, admin, baseUrl } = await scenario();
    for (let i = 0; i < 2; i++) {
      assertOAuthError(
        await tokenRequest(baseUrl, address, { ...admin, clientSecret: `wrong-${i}` }),
        403,
        "INVALID_CLIENT",
        "invalid_client",
      );
    }
    const locked = await tokenRequest(baseUrl, address, { ...admin, clientSecret: "wrong-again" });
    assertTooManyRequests(locked);
    const served = await tokenRequest(baseUrl, address, admin);
    assert.equal(served.status, 200, JSON.stringify(served.body));
    // Failures count per (client id, address): guessing from one address never locks the client out elsewhere (issue 8).
    const elsewhere = await tokenRequest(baseUrl, `198.51.100.${nextAddress++}`, admin);
    assert.equal(elsewhere.status, 200, JSON.stringify(elsewhere.body));
    assertRateLimitHeaders(locked, 2);
  });

  test("failed authentications with unknown client ids lock out unknown ids at that address, never the real clients there", async () => {
    const { address, admin, baseUrl } = await scenario();
    for (const id of ["guess-1", "guess-2"]) {
      assertOAuthError(
        await tokenRequest(baseUrl, address, { ...admin, clientId: id, clientSecret: "x" }),
        403,
        "INVALID_CLIENT",
        "invalid_client",
      );
    }
    const locked = await tokenRequest(baseUrl, address, { ...admin, clientId: "guess-3", clientSecret: "x" });
    assertTooManyRequests(locked);
    assertRateLimitHeaders(locked, 2);
    // The real client behind the same address did nothing wrong (issue 8: it was locked out too).
    const served = await tokenRequest(baseUrl, address, admin);
    assert.equal(served.status, 200, JSON.stringify(served.body));
  });

  test("every token request spends its address's budget, including ones refused as 400 before authentication (but not as failures)", async () => {
    const { address, admin, baseUrl } = await scenario();
    for (let i = 0; i < 4; i++) {
      assertOAuthError(
        await tokenRequest(baseUrl, address, admin, { grant_type: "password" }),
        400,
        "UNSUPPORTED_GRANT_TYPE",
        "unsupported_grant_type",
      );
    }
    assert.equal((await tokenRequest(baseUrl, address, admin)).status, 200, "not failures: no lockout");
    assertTooManyRequests(await tokenRequest(baseUrl, address, admin)); // the 6th request from the address
  });

  test("only an authenticated client spends its own budget: wrong secrets from elsewhere cannot exhaust it (issue 8)", async () => {
    const { address, admin, baseUrl } = await scenario();
    for (let i = 0; i < 6; i++) {
      const from = `203.0.113.${nextAddress++}`;
      assertOAuthError(
        await tokenRequest(baseUrl, from, { ...admin, clientSecret: "wrong" }),
        403,
        "INVALID_CLIENT",
        "invalid_client",
      );
    }
    for (let i = 0; i < 3; i++)
      assert.equal((await tokenRequest(baseUrl, address, admin)).status, 200, `request ${i + 1} of the budget of 3`);
    assertTooManyRequests(await tokenRequest(baseUrl, address, admin));
  });

  test("the legacy /get-auth-token shares the per-client budget", async () => {
    const { address, admin, baseUrl } = await scenario();
    assert.equal((await tokenRequest(baseUrl, address, admin)).status, 200);
    const first = await legacyRequest(baseUrl, address, admin);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(rateLimitOf(first).remaining, 1);
    assert.equal((await tokenRequest(baseUrl, address, admin)).status, 200);
    const refused = await legacyRequest(baseUrl, address, admin);
    assertTooManyRequests(refused);
    assertTooManyRequests(await tokenRequest(baseUrl, address, admin));
    {
      assertRateLimitHeaders(refused, 3);
      assert.ok(refused.headers.get("deprecation"), "the legacy endpoint stays marked deprecated on a 429");
    }
  });

  test("the legacy /get-auth-token counts failed authentications towards the lock-out", async () => {
    const { address, admin, baseUrl } = await scenario();
    for (let i = 0; i < 2; i++) {
      const res = await legacyRequest(baseUrl, address, admin, "wrong");
      assert.equal(res.status, 403);
    }
    assertTooManyRequests(await tokenRequest(baseUrl, address, { ...admin, clientSecret: "wrong" }));
    assertTooManyRequests(await legacyRequest(baseUrl, address, admin, "wrong"));
  });

  test("gRPC: the 4th FetchOauth2Token for one client → RESOURCE_EXHAUSTED (8) with TOO_MANY_REQUESTS", async () => {
    const { address, admin, baseUrl } = await scenario();
    const grpcs = grpcClients(baseUrl);
    try {
      const request = { grantType: "client_credentials", clientId: admin.clientId, clientSecret: admin.clientSecret };
      for (let i = 0; i < 3; i++) {
        const ok = await grpcs.call("auth", "fetchOauth2Token", request, undefined, { "x-forwarded-for": address });
        assert.equal(ok.ok, true, JSON.stringify(ok.errorResponse));
      }
      const refused = await grpcs.call("auth", "fetchOauth2Token", request, undefined, { "x-forwarded-for": address });
      const body = assertGrpcFailure(refused, GRPC.RESOURCE_EXHAUSTED, "TOO_MANY_REQUESTS");
      assert.ok(
        body.errorMessages[0]!.errorParameters.some((p) => p.name === "retryAfterSeconds" && /^\d+$/.test(p.value)),
      );
      assert.match(body.error, /\S/);
      // One budget for both faces: the REST endpoint refuses the same client.
      assertTooManyRequests(await tokenRequest(baseUrl, address, admin));
    } finally {
      grpcs.close();
    }
  });

  test("gRPC: after 2 failed authentications a wrong secret → RESOURCE_EXHAUSTED (8), the right one is served", async () => {
    const { address, admin, baseUrl } = await scenario();
    const grpcs = grpcClients(baseUrl);
    const from = { "x-forwarded-for": address };
    try {
      for (let i = 0; i < 2; i++) {
        const wrong = await grpcs.call(
          "auth",
          "fetchOauth2Token",
          { grantType: "client_credentials", clientId: admin.clientId, clientSecret: "wrong" },
          undefined,
          from,
        );
        assertGrpcFailure(wrong, GRPC.PERMISSION_DENIED, "INVALID_CLIENT");
      }
      const wrong = { grantType: "client_credentials", clientId: admin.clientId, clientSecret: "wrong-again" };
      assertGrpcFailure(
        await grpcs.call("auth", "fetchOauth2Token", wrong, undefined, from),
        GRPC.RESOURCE_EXHAUSTED,
        "TOO_MANY_REQUESTS",
      );
      const right = await grpcs.call(
        "auth",
        "fetchOauth2Token",
        { ...wrong, clientSecret: admin.clientSecret },
        undefined,
        from,
      );
      assert.equal(right.ok, true, JSON.stringify(right.errorResponse));
    } finally {
      grpcs.close();
    }
  });

  test("a client this instance holds is decided in one Redis round trip (token_admissions_total), with the same answers; the embedded default decides step by step", async () => {
    const { address, admin, baseUrl } = await scenario();
    const admissions = async () => {
      const text = await (await fetch(`${baseUrl}/metrics`)).text();
      const count = (path: string) =>
        Number(new RegExp(`^token_admissions_total\\{path="${path}"\\} (\\d+)`, "m").exec(text)?.[1] ?? 0);
      return { oneTrip: count("one_round_trip"), stepByStep: count("step_by_step") };
    };
    assert.equal((await tokenRequest(baseUrl, address, admin)).status, 200, "the first request loads the record");
    const before = await admissions();
    const answers = [];
    for (const secret of [admin.clientSecret, "wrong", admin.clientSecret, "wrong", admin.clientSecret]) {
      const res = await tokenRequest(baseUrl, address, { ...admin, clientSecret: secret });
      answers.push(
        res.status === 200
          ? `200 r=${rateLimitOf(res).remaining}`
          : `${res.status} ${res.body.errorMessages[0].errorCode}`,
      );
    }
    // Client budget 3 (one spent above), address 5 (one spent above), failures 2 at this address.
    assert.deepEqual(answers, [
      "200 r=1",
      "403 INVALID_CLIENT",
      "200 r=0",
      "403 INVALID_CLIENT",
      "429 TOO_MANY_REQUESTS",
    ]);
    const after = await admissions();
    // With Redis: the first of the five finds the record held but no credential state in Redis
    // yet (loading the record does not publish it), so it goes step by step and fills it.
    const redis = process.env.TEST_BACKEND === "postgres";
    assert.equal(after.oneTrip - before.oneTrip, redis ? 4 : 0);
    assert.equal(after.stepByStep - before.stepByStep, redis ? 1 : 5);
  });
});
