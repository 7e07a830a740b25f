// The deprecated POST /get-auth-token (spec 9.2), token introspection POST /v2/auth/introspect
// (RFC 7662), and signing-key rotation through the operator RPC RotateSigningKey (tokens issued
// before keep verifying; the JWKS lists every key whose tokens may still be valid).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createLocalJWKSet, createRemoteJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from "jose";
import { operatorCall, operatorHeaders, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  assertApiUsersPage,
  assertOAuthError,
  AUDIENCE,
  basicAuthorization,
  disposeService,
  getWith,
  grpcClients,
  INTROSPECT_PATH,
  ISSUER,
  LEGACY_PATH,
  newApiUser,
  newTenant,
  partsOf,
  postForm,
  postJson,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TestClock,
  TMC_ADMIN_SCOPES,
  type Client,
  type HttpReply,
  type Tenant,
} from "../helpers/token-kit.js";

const clock = new TestClock();
let running: RunningService;
let baseUrl: string;
let tenant: Tenant;
let admin: Client;
let other: Tenant;
/** The active API users of `tenant`, in creation order: what GetApiUsers lists to its tokens. */
const members: string[] = [];

before(async () => {
  running = await startTokenService({ env: ROOMY_RATE_LIMITS, now: clock.now });
  baseUrl = running.baseUrl;
  tenant = await newTenant(baseUrl);
  admin = tenant.admin;
  members.push(admin.clientId);
  other = await newTenant(baseUrl);
});

after(async () => {
  await disposeService(running);
});

async function verify(token: string) {
  return jwtVerify(token, createRemoteJWKSet(new URL(`${baseUrl}/.well-known/jwks.json`)), {
    issuer: ISSUER,
    audience: AUDIENCE,
    typ: "at+jwt",
    algorithms: ["EdDSA"],
  });
}

/** Authenticated: GET /v2/api-users?limit=5 answers 200 with exactly the tenant's API users. */
function assertPassesAuth(res: HttpReply): void {
  assertApiUsersPage(res, members.slice(0, 5), members.length);
}

describe("legacy POST /get-auth-token", () => {
  test("JSON {clientId, clientSecret} → {token, expiryTimeInSeconds: 86400, type: Bearer} with Deprecation and Link", async () => {
    const res = await postJson(baseUrl, LEGACY_PATH, { clientId: admin.clientId, clientSecret: admin.clientSecret });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(Object.keys(res.body).sort(), ["expiryTimeInSeconds", "token", "type"]);
    assert.equal(res.body.expiryTimeInSeconds, 86400);
    assert.equal(res.body.type, "Bearer");
    const deprecation = res.headers.get("deprecation");
    assert.ok(deprecation, "Deprecation header present");
    assert.match(deprecation, /^@\d+$/, "RFC 9745: Deprecation is an sf-date (@<epoch seconds>)");
    const link = res.headers.get("link") ?? "";
    assert.match(link, /<\/v2\/auth\/oauth2-token>/);
    assert.match(link, /rel="successor-version"/);
    assert.equal(res.headers.get("cache-control"), "no-store");
    assert.equal(res.headers.get("pragma"), "no-cache");

    const { payload, protectedHeader } = await verify(res.body.token);
    assert.equal(protectedHeader.typ, "at+jwt");
    assert.equal(payload.sub, admin.clientId);
    assert.equal(payload.exp! - payload.iat!, 86400);
    assert.deepEqual(String(payload.scope).split(" ").sort(), [...TMC_ADMIN_SCOPES].sort());
  });

  test("the legacy token is accepted by the protected RPCs", async () => {
    const res = await postJson(baseUrl, LEGACY_PATH, { clientId: admin.clientId, clientSecret: admin.clientSecret });
    assertPassesAuth(await getWith(baseUrl, "/v2/api-users?limit=5", { token: res.body.token }));
  });

  test("a wrong secret or unknown client → 403 INVALID_CLIENT", async () => {
    const wrong = await postJson(baseUrl, LEGACY_PATH, { clientId: admin.clientId, clientSecret: "wrong" });
    assertOAuthError(wrong, 403, "INVALID_CLIENT", "invalid_client");
    assert.equal(wrong.body.token, undefined);
    const unknown = await postJson(baseUrl, LEGACY_PATH, { clientId: "nobody", clientSecret: "wrong" });
    assertOAuthError(unknown, 403, "INVALID_CLIENT", "invalid_client");
    const { debugIdentifier: _a, ...w } = wrong.body;
    const { debugIdentifier: _b, ...u } = unknown.body;
    assert.deepEqual(w, u);
    {
      assert.ok(wrong.headers.get("deprecation"), "the legacy endpoint is marked deprecated on errors too");
    }
  });

  test("it does not take HTTP Basic", async () => {
    const res = await postJson(
      baseUrl,
      LEGACY_PATH,
      {},
      { authorization: basicAuthorization(admin.clientId, admin.clientSecret) },
    );
    assert.equal(res.body.token, undefined);
    // The header is not looked at: the answer is exactly the refusal of the same body without it.
    const without = await postJson(baseUrl, LEGACY_PATH, {});
    assert.ok(
      res.status >= 400 && res.status < 500 && res.status !== 429,
      `a refusal, got ${res.status} ${JSON.stringify(res.body)}`,
    );
    assertOAuthError(res, without.status, without.body.errorMessages[0].errorCode, without.body.error);
    const { debugIdentifier: _a, ...withBasic } = res.body;
    const { debugIdentifier: _b, ...withNothing } = without.body;
    assert.deepEqual(withBasic, withNothing);
  });
});

describe("introspection POST /v2/auth/introspect", () => {
  const introspect = (caller: Client, token: string, headers: Record<string, string> = {}) =>
    postForm(
      baseUrl,
      INTROSPECT_PATH,
      { token, client_id: caller.clientId, client_secret: caller.clientSecret },
      headers,
    );

  test("an active token of the caller's TMC → active: true with scope, client_id, exp (a JSON number), sub, iss", async () => {
    const caller = await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN");
    members.push(caller.clientId);
    const token = await accessTokenOf(baseUrl, admin, { scope: "users:read openid" });
    const claims = partsOf(token).payload;
    const res = await introspect(caller, token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.active, true);
    assert.equal(res.body.scope, "users:read openid");
    assert.equal(res.body.client_id, admin.clientId);
    assert.equal(res.body.sub, admin.clientId);
    assert.equal(res.body.iss, ISSUER);
    assert.equal(typeof res.body.exp, "number");
    assert.equal(res.body.exp, claims.exp);
    assert.equal(typeof res.body.iat, "number");
    assert.equal(res.body.iat, claims.iat);
    assert.equal(res.body.jti, claims.jti);
    assert.deepEqual(res.body.aud, [AUDIENCE]);
    assert.match(String(res.body.token_type), /^bearer$/i);
    assert.equal(res.headers.get("cache-control"), "no-store");
  });

  test("the caller may introspect its own token, authenticating with HTTP Basic", async () => {
    const token = await accessTokenOf(baseUrl, admin);
    const res = await postForm(
      baseUrl,
      INTROSPECT_PATH,
      { token },
      { authorization: basicAuthorization(admin.clientId, admin.clientSecret) },
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.active, true);
  });

  test("garbage, a tampered token and another TMC's token → inactive", async () => {
    const genuine = await accessTokenOf(baseUrl, admin);
    const [h, p, s] = genuine.split(".");
    const tampered = `${h}.${p}.${s!.slice(0, 5)}${s![5] === "A" ? "B" : "A"}${s!.slice(6)}`;
    const otherTmcs = await accessTokenOf(baseUrl, other.admin);
    const answers: HttpReply[] = [];
    for (const token of ["garbage", tampered, otherTmcs]) {
      const res = await introspect(admin, token);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.active, false);
      for (const leaked of ["scope", "client_id", "sub", "iss", "jti", "tmc_id", "role"]) {
        assert.equal(res.body[leaked], undefined, `no ${leaked} for an inactive token`);
      }
      answers.push(res);
    }
    // And the other TMC sees its own token as active.
    assert.equal((await introspect(other.admin, otherTmcs)).body.active, true);
    {
      for (const res of answers) assert.deepEqual(res.body, { active: false });
    }
  });

  test("an expired token → inactive", async () => {
    const token = await accessTokenOf(baseUrl, admin);
    let res: HttpReply;
    try {
      clock.advanceSeconds(3600 + 10);
      res = await introspect(admin, token);
    } finally {
      clock.reset();
    }
    assert.equal(res.status, 200);
    assert.equal(res.body.active, false);
    assert.equal(res.body.scope, undefined);
    // Back at the real time it is active again: it was the clock that made it inactive.
    assert.equal((await introspect(admin, token)).body.active, true);
    assert.deepEqual(res.body, { active: false });
  });

  test("introspection requires client authentication: a wrong secret → 403 INVALID_CLIENT", async () => {
    const token = await accessTokenOf(baseUrl, admin);
    assertOAuthError(
      await introspect({ ...admin, clientSecret: "wrong" }, token),
      403,
      "INVALID_CLIENT",
      "invalid_client",
    );
  });

  test("over gRPC: IntrospectToken answers active with exp, inactive for garbage", async () => {
    const grpcs = grpcClients(baseUrl);
    try {
      const token = await accessTokenOf(baseUrl, admin);
      const active = await grpcs.call("auth", "introspectToken", {
        token,
        clientId: admin.clientId,
        clientSecret: admin.clientSecret,
      });
      assert.equal(active.ok, true, JSON.stringify(active.errorResponse));
      assert.equal(active.response!.active, true);
      assert.equal(Number(active.response!.exp), partsOf(token).payload.exp);
      const inactive = await grpcs.call("auth", "introspectToken", {
        token: "garbage",
        clientId: admin.clientId,
        clientSecret: admin.clientSecret,
      });
      assert.equal(inactive.response!.active, false);
    } finally {
      grpcs.close();
    }
  });
});

describe("signing key rotation", () => {
  test("RotateSigningKey: the new kid is published first, signs from activatesAt; old tokens still verify (JWKS lists both)", async () => {
    const before = await accessTokenOf(baseUrl, admin);
    const oldKid = decodeProtectedHeader(before).kid!;

    const rotated = await operatorCall<{ kid: string; publishedKids: string[]; activatesAt: string }>(
      baseUrl,
      "RotateSigningKey",
      {},
    );
    assert.equal(typeof rotated.kid, "string");
    assert.notEqual(rotated.kid, oldKid);
    assert.deepEqual(rotated.publishedKids, [rotated.kid, oldKid], "latest activation first");
    const wait = (Date.parse(rotated.activatesAt) - clock.now().getTime()) / 1000;
    assert.ok(
      Math.abs(wait - 900) < 5,
      `activates after SIGNING_KEY_PREPUBLISH_SECONDS (900 s by default), got ${wait} s`,
    );

    const jwks = (await (await fetch(`${baseUrl}/.well-known/jwks.json`)).json()) as JSONWebKeySet;
    const kids = jwks.keys.map((k) => k.kid);
    assert.ok(kids.includes(oldKid), "the old kid is still published");
    assert.ok(kids.includes(rotated.kid), "the new kid is published before it signs");
    assert.equal(
      decodeProtectedHeader(await accessTokenOf(baseUrl, admin)).kid,
      oldKid,
      "the current key signs until the activation",
    );

    // An independent verifier with the JWKS fetched before the activation accepts both.
    const keySet = createLocalJWKSet(jwks);
    const options = { issuer: ISSUER, audience: AUDIENCE, typ: "at+jwt", algorithms: ["EdDSA"] };
    await jwtVerify(before, keySet, options);
    clock.advanceSeconds(wait);
    const after = await accessTokenOf(baseUrl, admin);
    assert.equal(decodeProtectedHeader(after).kid, rotated.kid);
    await jwtVerify(after, keySet, options);

    // The service itself accepts both.
    assertPassesAuth(await getWith(baseUrl, "/v2/api-users?limit=5", { token: before }));
    assertPassesAuth(await getWith(baseUrl, "/v2/api-users?limit=5", { token: after }));
    const introspected = await postForm(baseUrl, INTROSPECT_PATH, {
      token: before,
      client_id: admin.clientId,
      client_secret: admin.clientSecret,
    });
    assert.equal(introspected.body.active, true);

    // A second rotation keeps all three published.
    const again = await operatorCall<{ kid: string; publishedKids: string[]; activatesAt: string }>(
      baseUrl,
      "RotateSigningKey",
      {},
    );
    const kids2 = ((await (await fetch(`${baseUrl}/.well-known/jwks.json`)).json()) as JSONWebKeySet).keys.map(
      (k) => k.kid,
    );
    assert.deepEqual(kids2, [again.kid, rotated.kid, oldKid]);
    clock.advanceSeconds((Date.parse(again.activatesAt) - clock.now().getTime()) / 1000);
    assertPassesAuth(await getWith(baseUrl, "/v2/api-users?limit=5", { token: before }));
    assert.equal(decodeProtectedHeader(await accessTokenOf(baseUrl, admin)).kid, again.kid);
  });

  test("a second RotateSigningKey while a key waits to activate → FAILED_PRECONDITION SIGNING_KEY_ROTATION_PENDING; now: true rotates at once and withdraws the rest", async () => {
    const pending = await operatorCall<{ kid: string; activatesAt: string }>(baseUrl, "RotateSigningKey", {});
    const refused = await postJson(
      baseUrl,
      "/travel.operator.v1.OperatorService/RotateSigningKey",
      {},
      operatorHeaders,
    );
    assert.equal(refused.status, 400, "Connect maps failed_precondition to HTTP 400");
    assert.equal(refused.body.code, "failed_precondition");
    const [error] = refused.body.details[0].debug.errorMessages;
    assert.equal(error.errorCode, "SIGNING_KEY_ROTATION_PENDING");
    assert.deepEqual(error.errorParameters, [
      { name: "kid", value: pending.kid },
      { name: "activatesAt", value: pending.activatesAt },
    ]);

    const before = await accessTokenOf(baseUrl, admin);
    const emergency = await operatorCall<{ kid: string; publishedKids: string[]; withdrawnKids: string[] }>(
      baseUrl,
      "RotateSigningKey",
      { now: true },
    );
    assert.deepEqual(emergency.publishedKids, [emergency.kid]);
    assert.ok(
      emergency.withdrawnKids.includes(pending.kid) &&
        emergency.withdrawnKids.includes(decodeProtectedHeader(before).kid!),
    );
    const jwks = (await (await fetch(`${baseUrl}/.well-known/jwks.json`)).json()) as JSONWebKeySet;
    assert.deepEqual(
      jwks.keys.map((k) => k.kid),
      [emergency.kid],
    );
    assert.equal(
      (await getWith(baseUrl, "/v2/api-users?limit=5", { token: before })).status,
      401,
      "the withdrawn key's tokens are refused at once",
    );
    const after = await accessTokenOf(baseUrl, admin);
    assert.equal(decodeProtectedHeader(after).kid, emergency.kid);
    assertPassesAuth(await getWith(baseUrl, "/v2/api-users?limit=5", { token: after }));
  });

  test("RotateSigningKey requires the operator token", async () => {
    const res = await fetch(`${baseUrl}/travel.operator.v1.OperatorService/RotateSigningKey`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${await accessTokenOf(baseUrl, admin)}` },
      body: "{}",
    });
    assert.equal(res.status, 401);
    await res.body?.cancel();
  });
});
