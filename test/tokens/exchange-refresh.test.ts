// Token exchange (RFC 8693; spec 2.9, 5.3) and the refresh_token grant:
// (a) a subject_token this service issued: same sub, the caller as `act`, never wider in scope or
//     audience, same TMC only;
// (b) a JWT from an external issuer the caller's TMC trusts (RS256 and ES256, JWKS inline or at a
//     jwks_uri served from 127.0.0.1), naming a user of that TMC by email;
// refresh tokens rotate on use, and reuse revokes the whole family.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { createRemoteJWKSet, exportJWK, generateKeyPair, jwtVerify, SignJWT, type CryptoKey, type JWK } from "jose";
import { operatorCall, operatorHeaders, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  assertApiUsersPage,
  assertError,
  assertOAuthError,
  AUDIENCE,
  disposeService,
  genuineSigningKey,
  getWith,
  GRANT_EXCHANGE,
  ISSUER,
  newApiUser,
  newTenant,
  newUser,
  partsOf,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TestClock,
  TOKEN_PATH,
  TYPE_ACCESS_TOKEN,
  TYPE_JWT,
  type Client,
  type HttpReply,
  type Tenant,
} from "../helpers/token-kit.js";

const PARTNER_AUDIENCE = "https://partner.api.test/v1";
const INLINE_ISSUER = "https://idp-inline.example";
const REMOTE_ISSUER = "https://idp-remote.example";
const UNTRUSTED_ISSUER = "https://idp-untrusted.example";
/** The audience the trusted issuers' tokens carry for this platform (every issuer is registered with one). */
const IDP_AUDIENCE = "https://travel.test/token-exchange";

const clock = new TestClock();
let running: RunningService;
let baseUrl: string;
let tenantA: Tenant;
let tenantB: Tenant;
/** Two TMC admins of TMC A: `owner` obtains subject tokens, `actor` exchanges them. */
let owner: Client;
let actor: Client;
let outsider: Client;
let seed: { tmcId: string; orgId: string; userIds: string[]; clientId: string; clientSecret: string };
let seedAdmin: Client;
/** The active API users of TMC A, in creation order: what GetApiUsers lists to its tokens. */
const membersOfA: string[] = [];

interface SigningKey {
  kid: string;
  alg: "RS256" | "ES256";
  privateKey: CryptoKey;
  publicJwk: JWK;
}
let inlineRsa: SigningKey;
let inlineEc: SigningKey;
let remoteRsa: SigningKey;
let remoteEc: SigningKey;
let jwksServer: http.Server;
let jwksRequests = 0;

async function newKey(alg: "RS256" | "ES256", kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" } };
}

before(async () => {
  running = await startTokenService({
    env: { ...ROOMY_RATE_LIMITS, ALLOWED_AUDIENCES: PARTNER_AUDIENCE, JWKS_URI_ALLOW_HTTP_LOOPBACK: "true" },
    now: clock.now,
  });
  baseUrl = running.baseUrl;
  tenantA = await newTenant(baseUrl);
  tenantB = await newTenant(baseUrl);
  owner = tenantA.admin;
  actor = await newApiUser(baseUrl, tenantA.tmcId, "TMC_ADMIN");
  membersOfA.push(owner.clientId, actor.clientId);
  outsider = tenantB.admin;

  seed = await operatorCall(baseUrl, "Seed", {});
  seedAdmin = { clientId: seed.clientId, clientSecret: seed.clientSecret, tmcId: seed.tmcId, role: "TMC_ADMIN" };

  inlineRsa = await newKey("RS256", "inline-rsa-1");
  inlineEc = await newKey("ES256", "inline-ec-1");
  remoteRsa = await newKey("RS256", "remote-rsa-1");
  remoteEc = await newKey("ES256", "remote-ec-1");

  jwksServer = http.createServer((req, res) => {
    if (req.url === "/jwks.json") {
      jwksRequests++;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ keys: [remoteRsa.publicJwk, remoteEc.publicJwk] }));
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => jwksServer.listen(0, "127.0.0.1", resolve));
  const jwksUri = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks.json`;

  await operatorCall(baseUrl, "AddTrustedIssuer", {
    tmcId: seed.tmcId,
    issuer: INLINE_ISSUER,
    jwks: JSON.stringify({ keys: [inlineRsa.publicJwk, inlineEc.publicJwk] }),
    audience: IDP_AUDIENCE,
  });
  await operatorCall(baseUrl, "AddTrustedIssuer", {
    tmcId: seed.tmcId,
    issuer: REMOTE_ISSUER,
    jwksUri,
    audience: IDP_AUDIENCE,
  });
});

after(async () => {
  await disposeService(running);
  if (jwksServer) {
    jwksServer.closeAllConnections();
    await new Promise<void>((resolve) => jwksServer.close(() => resolve()));
  }
});

function exchange(client: Client, fields: Record<string, string>): Promise<HttpReply> {
  return postForm(baseUrl, TOKEN_PATH, {
    grant_type: GRANT_EXCHANGE,
    client_id: client.clientId,
    client_secret: client.clientSecret,
    ...fields,
  });
}

function refresh(client: Client, refreshToken: string, extra: Record<string, string> = {}): Promise<HttpReply> {
  return postForm(baseUrl, TOKEN_PATH, {
    grant_type: "refresh_token",
    client_id: client.clientId,
    client_secret: client.clientSecret,
    refresh_token: refreshToken,
    ...extra,
  });
}

async function verify(token: string, audience = AUDIENCE) {
  const { payload } = await jwtVerify(token, createRemoteJWKSet(new URL(`${baseUrl}/.well-known/jwks.json`)), {
    issuer: ISSUER,
    audience,
    typ: "at+jwt",
    algorithms: ["EdDSA"],
  });
  return payload;
}

function assertExchangeResponse(res: HttpReply): void {
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.token_type, "Bearer");
  assert.equal(res.body.expires_in, 3600);
  assert.equal(res.body.issued_token_type, TYPE_ACCESS_TOKEN);
  assert.equal(typeof res.body.access_token, "string");
  assert.equal(typeof res.body.refresh_token, "string");
  assert.ok(res.body.refresh_token.length >= 32);
  assert.equal(typeof res.body.scope, "string");
  assert.equal(res.headers.get("cache-control"), "no-store");
  assert.equal(res.headers.get("pragma"), "no-cache");
}

/** An external identity provider's JWT, for this platform (aud IDP_AUDIENCE unless the claims say otherwise). */
function idpToken(
  key: SigningKey,
  claims: Record<string, unknown>,
  header: Record<string, unknown> = { kid: key.kid },
): Promise<string> {
  return external(key, { aud: IDP_AUDIENCE, ...claims }, header);
}

/** An external identity provider's JWT with exactly the given claims. */
function external(
  key: SigningKey,
  claims: Record<string, unknown>,
  header: Record<string, unknown> = { kid: key.kid },
): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, typ: "JWT", ...header })
    .setIssuedAt()
    .sign(key.privateKey);
}

const inOneHour = () => Math.floor(Date.now() / 1000) + 3600;
const ADA = "ada.lovelace@acme.example";
const GRACE = "grace.hopper@acme.example"; // inactive in the seed

describe("(a) exchanging an access token this service issued", () => {
  test("keeps sub, adds act {sub: caller}, returns issued_token_type and a refresh_token", async () => {
    const subject = await accessTokenOf(baseUrl, owner);
    const res = await exchange(actor, { subject_token: subject, subject_token_type: TYPE_ACCESS_TOKEN });
    assertExchangeResponse(res);
    const claims = await verify(res.body.access_token);
    assert.equal(claims.sub, owner.clientId);
    assert.deepEqual(claims.act, { sub: actor.clientId });
    assert.equal(claims.client_id, actor.clientId);
    assert.equal(claims.tmc_id, tenantA.tmcId);
    assert.equal(claims.aud, AUDIENCE);
    const subjectScopes = String(partsOf(subject).payload.scope).split(" ");
    for (const s of String(claims.scope).split(" "))
      assert.ok(subjectScopes.includes(s), `scope ${s} is within the subject's`);
    assert.deepEqual(res.body.scope.split(" ").sort(), String(claims.scope).split(" ").sort());
  });

  test("the exchanged token is accepted by the protected RPCs", async () => {
    const res = await exchange(actor, {
      subject_token: await accessTokenOf(baseUrl, owner),
      subject_token_type: TYPE_ACCESS_TOKEN,
    });
    assertExchangeResponse(res);
    // GetApiUsers answers for the subject's TMC: exactly TMC A's API users.
    assertApiUsersPage(await getWith(baseUrl, "/v2/api-users?limit=10", { token: res.body.access_token }), membersOfA);
  });

  test("scope no wider than the subject's: none asked → the subject's; a subset → that; wider → 400 invalid_scope", async () => {
    const subject = await accessTokenOf(baseUrl, owner, { scope: "users:read users:write" });
    const same = await exchange(actor, { subject_token: subject, subject_token_type: TYPE_ACCESS_TOKEN });
    assertExchangeResponse(same);
    assert.deepEqual(same.body.scope.split(" ").sort(), ["users:read", "users:write"]);

    const narrower = await exchange(actor, {
      subject_token: subject,
      subject_token_type: TYPE_ACCESS_TOKEN,
      scope: "users:read",
    });
    assertExchangeResponse(narrower);
    assert.equal(narrower.body.scope, "users:read");
    assert.equal((await verify(narrower.body.access_token)).scope, "users:read");

    const wider = await exchange(actor, {
      subject_token: subject,
      subject_token_type: TYPE_ACCESS_TOKEN,
      scope: "users:read api-users",
    });
    assertOAuthError(wider, 400, "INVALID_SCOPE", "invalid_scope");
  });

  test("a COMPANY_ADMIN caller cannot gain api-users by exchanging a TMC admin's token", async () => {
    const companyAdmin = await newApiUser(baseUrl, tenantA.tmcId, "COMPANY_ADMIN", tenantA.orgId);
    membersOfA.push(companyAdmin.clientId);
    const subject = await accessTokenOf(baseUrl, owner);
    // docs/tokens.md, token-exchange policy: a company admin never acts for a TMC admin — no token at all.
    const all = await exchange(companyAdmin, { subject_token: subject, subject_token_type: TYPE_ACCESS_TOKEN });
    assertOAuthError(all, 400, "INVALID_REQUEST", "invalid_request");
    assert.equal(all.body.access_token, undefined);
    const asked = await exchange(companyAdmin, {
      subject_token: subject,
      subject_token_type: TYPE_ACCESS_TOKEN,
      scope: "api-users",
    });
    assertOAuthError(asked, 400, "INVALID_REQUEST", "invalid_request");
    assert.equal(asked.body.access_token, undefined);
    // For a subject of its own company it may act, within its own role: still no api-users.
    const peer = await newApiUser(baseUrl, tenantA.tmcId, "COMPANY_ADMIN", tenantA.orgId);
    membersOfA.push(peer.clientId);
    const peerToken = await accessTokenOf(baseUrl, peer);
    const own = await exchange(companyAdmin, { subject_token: peerToken, subject_token_type: TYPE_ACCESS_TOKEN });
    assertExchangeResponse(own);
    assert.ok(!own.body.scope.split(" ").includes("api-users"));
    const claims = await verify(own.body.access_token);
    assert.equal(claims.role, "COMPANY_ADMIN");
    assert.deepEqual(claims.act, { sub: companyAdmin.clientId });
    const askedOwn = await exchange(companyAdmin, {
      subject_token: peerToken,
      subject_token_type: TYPE_ACCESS_TOKEN,
      scope: "api-users",
    });
    assertOAuthError(askedOwn, 400, "INVALID_SCOPE", "invalid_scope");
  });

  test("audience no wider than the subject's → otherwise 400 invalid_target", async () => {
    const subject = await accessTokenOf(baseUrl, owner);
    const other = await exchange(actor, {
      subject_token: subject,
      subject_token_type: TYPE_ACCESS_TOKEN,
      audience: PARTNER_AUDIENCE,
    });
    assertOAuthError(other, 400, "INVALID_TARGET", "invalid_target");
    const same = await exchange(actor, {
      subject_token: subject,
      subject_token_type: TYPE_ACCESS_TOKEN,
      audience: AUDIENCE,
    });
    assertExchangeResponse(same);

    const partnerSubject = await accessTokenOf(baseUrl, owner, { audience: PARTNER_AUDIENCE });
    const kept = await exchange(actor, { subject_token: partnerSubject, subject_token_type: TYPE_ACCESS_TOKEN });
    assertExchangeResponse(kept);
    assert.equal((await verify(kept.body.access_token, PARTNER_AUDIENCE)).aud, PARTNER_AUDIENCE);
    const widened = await exchange(actor, {
      subject_token: partnerSubject,
      subject_token_type: TYPE_ACCESS_TOKEN,
      audience: AUDIENCE,
    });
    assertOAuthError(widened, 400, "INVALID_TARGET", "invalid_target");
  });

  test("a client of another TMC exchanging it → 400 INVALID_REQUEST", async () => {
    const subject = await accessTokenOf(baseUrl, owner);
    assertOAuthError(
      await exchange(outsider, { subject_token: subject, subject_token_type: TYPE_ACCESS_TOKEN }),
      400,
      "INVALID_REQUEST",
      "invalid_request",
    );
  });

  test("the caller may exchange its own token (act = sub)", async () => {
    const res = await exchange(owner, {
      subject_token: await accessTokenOf(baseUrl, owner),
      subject_token_type: TYPE_ACCESS_TOKEN,
    });
    assertExchangeResponse(res);
    const claims = await verify(res.body.access_token);
    assert.equal(claims.sub, owner.clientId);
    assert.deepEqual(claims.act, { sub: owner.clientId });
  });

  test("an exchanged token exchanged again nests the previous actor", async () => {
    const first = await exchange(actor, {
      subject_token: await accessTokenOf(baseUrl, owner),
      subject_token_type: TYPE_ACCESS_TOKEN,
    });
    assertExchangeResponse(first);
    const second = await exchange(owner, {
      subject_token: first.body.access_token,
      subject_token_type: TYPE_ACCESS_TOKEN,
    });
    assertExchangeResponse(second);
    const claims = await verify(second.body.access_token);
    assert.equal(claims.sub, owner.clientId);
    assert.deepEqual(claims.act, { sub: owner.clientId, act: { sub: actor.clientId } });
  });

  test("invalid subject tokens → 400 INVALID_REQUEST", async () => {
    const genuine = await accessTokenOf(baseUrl, owner);
    const [h, p, s] = genuine.split(".");
    const flipped = s!.slice(0, 10) + (s![10] === "A" ? "B" : "A") + s!.slice(11);
    const { kid, key } = await genuineSigningKey(running);
    const now = Math.floor(Date.now() / 1000);
    const expired = await new SignJWT({ ...partsOf(genuine).payload, iat: now - 7200, exp: now - 3600 })
      .setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid })
      .sign(key);
    for (const subjectToken of [`${h}.${p}.${flipped}`, expired, `${h}.${p}.`]) {
      const res = await exchange(actor, { subject_token: subjectToken, subject_token_type: TYPE_ACCESS_TOKEN });
      assertOAuthError(res, 400, "INVALID_REQUEST", "invalid_request");
    }
    assertOAuthError(
      await exchange(actor, { subject_token: "garbage", subject_token_type: TYPE_ACCESS_TOKEN }),
      400,
      "INVALID_REQUEST",
      "invalid_request",
    );
  });

  test("missing subject_token, missing or unsupported subject_token_type → 400 INVALID_REQUEST", async () => {
    const subject = await accessTokenOf(baseUrl, owner);
    assertOAuthError(
      await exchange(actor, { subject_token_type: TYPE_ACCESS_TOKEN }),
      400,
      "INVALID_REQUEST",
      "invalid_request",
    );
    assertOAuthError(await exchange(actor, { subject_token: subject }), 400, "INVALID_REQUEST", "invalid_request");
    assertOAuthError(
      await exchange(actor, { subject_token: subject, subject_token_type: "urn:ietf:params:oauth:token-type:saml2" }),
      400,
      "INVALID_REQUEST",
      "invalid_request",
    );
  });

  test("a wrong client secret → 403 invalid_client, before looking at the subject token", async () => {
    const res = await exchange(
      { ...actor, clientSecret: "wrong" },
      { subject_token: await accessTokenOf(baseUrl, owner), subject_token_type: TYPE_ACCESS_TOKEN },
    );
    assertOAuthError(res, 403, "INVALID_CLIENT", "invalid_client");
  });
});

describe("(b) exchanging a JWT of an external issuer the TMC trusts", () => {
  const cases: Array<[string, () => SigningKey, string, string]> = [
    ["inline JWKS, RS256", () => inlineRsa, INLINE_ISSUER, TYPE_JWT],
    ["inline JWKS, ES256", () => inlineEc, INLINE_ISSUER, TYPE_ACCESS_TOKEN],
    ["jwks_uri, RS256", () => remoteRsa, REMOTE_ISSUER, "urn:ietf:params:oauth:token-type:id_token"],
    ["jwks_uri, ES256", () => remoteEc, REMOTE_ISSUER, TYPE_JWT],
  ];
  for (const [name, key, iss, type] of cases) {
    test(`${name}: the new token's sub is the user named by email`, async () => {
      const subject = await idpToken(key(), { iss, email: ADA, exp: inOneHour() });
      const res = await exchange(seedAdmin, { subject_token: subject, subject_token_type: type });
      assertExchangeResponse(res);
      const claims = await verify(res.body.access_token);
      assert.equal(claims.sub, seed.userIds[0], "sub is ada.lovelace's user id");
      assert.deepEqual(claims.act, { sub: seedAdmin.clientId });
      assert.equal(claims.client_id, seedAdmin.clientId);
      assert.equal(claims.tmc_id, seed.tmcId);
      assert.equal(claims.aud, AUDIENCE);
    });
  }

  test("the jwks_uri was actually fetched", () => {
    assert.ok(jwksRequests >= 1);
  });

  test("the email is matched case-insensitively; a user created through the operator RPC works too", async () => {
    const email = `pat.${Date.now()}@example.com`;
    const userId = await newUser(baseUrl, seed.orgId, email);
    const res = await exchange(seedAdmin, {
      subject_token: await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: email.toUpperCase(), exp: inOneHour() }),
      subject_token_type: TYPE_JWT,
    });
    assertExchangeResponse(res);
    assert.equal((await verify(res.body.access_token)).sub, userId);
    const ada = await exchange(seedAdmin, {
      subject_token: await idpToken(inlineEc, {
        iss: INLINE_ISSUER,
        email: "Ada.Lovelace@ACME.example",
        exp: inOneHour(),
      }),
      subject_token_type: TYPE_JWT,
    });
    assertExchangeResponse(ada);
    assert.equal((await verify(ada.body.access_token)).sub, seed.userIds[0]);
  });

  test("scope: a subset is granted, a scope outside the caller's role → 400 invalid_scope", async () => {
    const subject = await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: ADA, exp: inOneHour() });
    const res = await exchange(seedAdmin, {
      subject_token: subject,
      subject_token_type: TYPE_JWT,
      scope: "users:read",
    });
    assertExchangeResponse(res);
    assert.equal(res.body.scope, "users:read");
    assertOAuthError(
      await exchange(seedAdmin, { subject_token: subject, subject_token_type: TYPE_JWT, scope: "root" }),
      400,
      "INVALID_SCOPE",
      "invalid_scope",
    );
  });

  test("audience: an allowed one is granted, another → 400 invalid_target", async () => {
    const subject = await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: ADA, exp: inOneHour() });
    const partner = await exchange(seedAdmin, {
      subject_token: subject,
      subject_token_type: TYPE_JWT,
      audience: PARTNER_AUDIENCE,
    });
    assertExchangeResponse(partner);
    assert.equal((await verify(partner.body.access_token, PARTNER_AUDIENCE)).aud, PARTNER_AUDIENCE);
    assertOAuthError(
      await exchange(seedAdmin, {
        subject_token: subject,
        subject_token_type: TYPE_JWT,
        audience: "https://evil.example",
      }),
      400,
      "INVALID_TARGET",
      "invalid_target",
    );
  });

  test("refused with 400 INVALID_REQUEST: unknown email, inactive user, untrusted issuer, missing kid, bad signature, expired, no email, no exp", async () => {
    const forger = await newKey("RS256", inlineRsa.kid);
    const now = Math.floor(Date.now() / 1000);
    const refused: Array<[string, string]> = [
      [
        "unknown email",
        await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: "nobody@acme.example", exp: inOneHour() }),
      ],
      ["inactive user", await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: GRACE, exp: inOneHour() })],
      ["untrusted issuer", await idpToken(inlineRsa, { iss: UNTRUSTED_ISSUER, email: ADA, exp: inOneHour() })],
      ["missing kid", await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: ADA, exp: inOneHour() }, {})],
      ["unknown kid", await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: ADA, exp: inOneHour() }, { kid: "nope" })],
      [
        "bad signature (another key, same kid)",
        await idpToken(forger, { iss: INLINE_ISSUER, email: ADA, exp: inOneHour() }),
      ],
      ["key of the other issuer", await idpToken(remoteRsa, { iss: INLINE_ISSUER, email: ADA, exp: inOneHour() })],
      ["expired", await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: ADA, exp: now - 300 })],
      ["expired at jwks_uri issuer", await idpToken(remoteEc, { iss: REMOTE_ISSUER, email: ADA, exp: now - 300 })],
      ["no email", await idpToken(inlineRsa, { iss: INLINE_ISSUER, sub: "ada", exp: inOneHour() })],
      ["no exp", await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: ADA })],
      ["not a JWT", "not-a-jwt"],
    ];
    const [h, p, s] = (await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: ADA, exp: inOneHour() })).split(".");
    refused.push(["flipped signature", `${h}.${p}.${s!.slice(0, 20)}${s![20] === "A" ? "B" : "A"}${s!.slice(21)}`]);
    refused.push([
      "alg none",
      `${Buffer.from(JSON.stringify({ alg: "none", kid: inlineRsa.kid })).toString("base64url")}.${p}.`,
    ]);
    for (const [why, subjectToken] of refused) {
      const res = await exchange(seedAdmin, { subject_token: subjectToken, subject_token_type: TYPE_JWT });
      assert.equal(res.status, 400, `${why}: ${JSON.stringify(res.body)}`);
      assertOAuthError(res, 400, "INVALID_REQUEST", "invalid_request");
    }
  });

  test("an issuer configured with an audience requires it in the subject JWT's aud", async () => {
    const tenant = await newTenant(baseUrl);
    const email = `aud.${Date.now()}@example.com`;
    const userId = await newUser(baseUrl, tenant.orgId, email);
    const key = await newKey("ES256", "aud-ec-1");
    const issuer = "https://idp-audience.example";
    await operatorCall(baseUrl, "AddTrustedIssuer", {
      tmcId: tenant.tmcId,
      issuer,
      jwks: JSON.stringify({ keys: [key.publicJwk] }),
      audience: "https://travel.example/token-exchange",
    });
    const without = await external(key, { iss: issuer, email, exp: inOneHour() });
    assertOAuthError(
      await exchange(tenant.admin, { subject_token: without, subject_token_type: TYPE_JWT }),
      400,
      "INVALID_REQUEST",
      "invalid_request",
    );
    const wrong = await external(key, { iss: issuer, email, exp: inOneHour(), aud: "https://elsewhere.example" });
    assertOAuthError(
      await exchange(tenant.admin, { subject_token: wrong, subject_token_type: TYPE_JWT }),
      400,
      "INVALID_REQUEST",
      "invalid_request",
    );
    const right = await external(key, {
      iss: issuer,
      email,
      exp: inOneHour(),
      aud: ["x", "https://travel.example/token-exchange"],
    });
    const res = await exchange(tenant.admin, { subject_token: right, subject_token_type: TYPE_JWT });
    assertExchangeResponse(res);
    assert.equal((await verify(res.body.access_token)).sub, userId);
  });

  test("AddTrustedIssuer refuses both or neither of jwks and jwksUri, a jwks that is not a JWKS, and no audience", async () => {
    const call = (body: object) =>
      fetch(`${baseUrl}/travel.operator.v1.OperatorService/AddTrustedIssuer`, {
        method: "POST",
        headers: { ...operatorHeaders, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const jwks = JSON.stringify({ keys: [inlineRsa.publicJwk] });
    const audience = IDP_AUDIENCE;
    for (const body of [
      { tmcId: seed.tmcId, issuer: "https://x.example", audience },
      { tmcId: seed.tmcId, issuer: "https://x.example", jwks, jwksUri: "http://127.0.0.1:1/jwks.json", audience },
      { tmcId: seed.tmcId, issuer: "https://x.example", jwks: "{not json", audience },
      { tmcId: seed.tmcId, issuer: "https://x.example", jwks: JSON.stringify({ keys: "nope" }), audience },
      // docs/tokens.md: an issuer must be registered with the audience its tokens carry for this platform.
      { tmcId: seed.tmcId, issuer: "https://x.example", jwks },
    ]) {
      const res = await call(body);
      assert.equal(res.status, 400, `${JSON.stringify(body)} → ${res.status}`);
      await res.body?.cancel();
    }
  });

  test("an external issuer's RFC 9068 access token (typ at+jwt, RS256) is exchanged as subject_token_type access_token", async () => {
    const subject = await idpToken(
      inlineRsa,
      { iss: INLINE_ISSUER, email: ADA, exp: inOneHour() },
      { kid: inlineRsa.kid, typ: "at+jwt" },
    );
    const res = await exchange(seedAdmin, { subject_token: subject, subject_token_type: TYPE_ACCESS_TOKEN });
    {
      assertExchangeResponse(res);
      assert.equal((await verify(res.body.access_token)).sub, seed.userIds[0]);
    }
  });

  test("an issuer trusted by another TMC is not trusted for this one → 400 INVALID_REQUEST", async () => {
    const subject = await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: ADA, exp: inOneHour() });
    assertOAuthError(
      await exchange(owner, { subject_token: subject, subject_token_type: TYPE_JWT }),
      400,
      "INVALID_REQUEST",
      "invalid_request",
    );
  });

  test("a user of another TMC is not found → 400 INVALID_REQUEST", async () => {
    const email = `other.${Date.now()}@example.com`;
    await newUser(baseUrl, tenantB.orgId, email);
    const subject = await idpToken(inlineRsa, { iss: INLINE_ISSUER, email, exp: inOneHour() });
    assertOAuthError(
      await exchange(seedAdmin, { subject_token: subject, subject_token_type: TYPE_JWT }),
      400,
      "INVALID_REQUEST",
      "invalid_request",
    );
  });
});

describe("the refresh_token grant", () => {
  async function exchanged(): Promise<HttpReply> {
    const res = await exchange(actor, {
      subject_token: await accessTokenOf(baseUrl, owner, { scope: "api-users users:read" }),
      subject_token_type: TYPE_ACCESS_TOKEN,
    });
    assertExchangeResponse(res);
    return res;
  }

  test("works with the exchange's refresh_token: a new access token and a new refresh token", async () => {
    const first = await exchanged();
    const res = await refresh(actor, first.body.refresh_token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.token_type, "Bearer");
    assert.equal(res.body.expires_in, 3600);
    assert.equal(typeof res.body.refresh_token, "string");
    assert.notEqual(res.body.refresh_token, first.body.refresh_token);
    assert.notEqual(res.body.access_token, first.body.access_token);
    assert.equal(res.headers.get("cache-control"), "no-store");
    const claims = await verify(res.body.access_token);
    assert.equal(claims.sub, owner.clientId, "the subject is kept");
    assert.equal(claims.client_id, actor.clientId);
    assert.deepEqual(String(claims.scope).split(" ").sort(), ["api-users", "users:read"]);
    assertApiUsersPage(await getWith(baseUrl, "/v2/api-users?limit=10", { token: res.body.access_token }), membersOfA);
  });

  test("a narrower scope may be asked on refresh; a wider one → 400 invalid_scope", async () => {
    const first = await exchanged();
    assertOAuthError(
      await refresh(actor, first.body.refresh_token, { scope: "users:write" }),
      400,
      "INVALID_SCOPE",
      "invalid_scope",
    );
    const second = await exchanged();
    const narrower = await refresh(actor, second.body.refresh_token, { scope: "users:read" });
    assert.equal(narrower.status, 200, JSON.stringify(narrower.body));
    assert.equal(narrower.body.scope, "users:read");
  });

  test("reusing a refresh token → 400 INVALID_GRANT, and the family is revoked (the new one is refused too)", async () => {
    const first = await exchanged();
    const rotated = await refresh(actor, first.body.refresh_token);
    assert.equal(rotated.status, 200);
    assertOAuthError(await refresh(actor, first.body.refresh_token), 400, "INVALID_GRANT", "invalid_grant");
    assertOAuthError(await refresh(actor, rotated.body.refresh_token), 400, "INVALID_GRANT", "invalid_grant");
  });

  test("reuse detected further down the chain revokes every descendant", async () => {
    const first = await exchanged();
    const r2 = await refresh(actor, first.body.refresh_token);
    const r3 = await refresh(actor, r2.body.refresh_token);
    assert.equal(r3.status, 200);
    assertOAuthError(await refresh(actor, r2.body.refresh_token), 400, "INVALID_GRANT", "invalid_grant");
    assertOAuthError(await refresh(actor, r3.body.refresh_token), 400, "INVALID_GRANT", "invalid_grant");
  });

  test("another client presenting it → 400 INVALID_GRANT", async () => {
    const first = await exchanged();
    assertOAuthError(await refresh(owner, first.body.refresh_token), 400, "INVALID_GRANT", "invalid_grant");
    assertOAuthError(await refresh(outsider, first.body.refresh_token), 400, "INVALID_GRANT", "invalid_grant");
  });

  test("the refresh token of an external-issuer exchange keeps the user as sub", async () => {
    const subject = await idpToken(inlineRsa, { iss: INLINE_ISSUER, email: ADA, exp: inOneHour() });
    const first = await exchange(seedAdmin, { subject_token: subject, subject_token_type: TYPE_JWT });
    assertExchangeResponse(first);
    const res = await refresh(seedAdmin, first.body.refresh_token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal((await verify(res.body.access_token)).sub, seed.userIds[0]);
  });

  test("missing refresh_token → 400 INVALID_REQUEST; an unknown one → 400 INVALID_GRANT", async () => {
    const missing = await postForm(baseUrl, TOKEN_PATH, {
      grant_type: "refresh_token",
      client_id: actor.clientId,
      client_secret: actor.clientSecret,
    });
    assertOAuthError(missing, 400, "INVALID_REQUEST", "invalid_request");
    assertOAuthError(await refresh(actor, "bm90LWEtcmVmcmVzaC10b2tlbg"), 400, "INVALID_GRANT", "invalid_grant");
  });

  test("an expired refresh token → 400 INVALID_GRANT (REFRESH_TOKEN_TTL_SECONDS, 30 days by default)", async () => {
    const first = await exchanged();
    try {
      clock.advanceSeconds(30 * 86_400 + 60);
      assertOAuthError(await refresh(actor, first.body.refresh_token), 400, "INVALID_GRANT", "invalid_grant");
      // The access token it came with is long expired too.
      assertError(
        await getWith(baseUrl, "/v2/api-users?limit=10", { token: first.body.access_token }),
        401,
        "USER_NOT_AUTHENTICATED",
      );
    } finally {
      clock.reset();
    }
  });

  test("a refresh token is not an access token, and vice versa", async () => {
    const first = await exchanged();
    const asBearer = await getWith(baseUrl, "/v2/api-users?limit=10", { token: first.body.refresh_token });
    assert.equal(asBearer.status, 401);
    assertOAuthError(await refresh(actor, first.body.access_token), 400, "INVALID_GRANT", "invalid_grant");
  });
});
