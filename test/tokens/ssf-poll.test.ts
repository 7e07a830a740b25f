// The credential changes as Security Event Tokens (RFC 8417) by RFC 8936 poll
// (AuthService.PollSecurityEvents, POST /v2/ssf/poll), through real HTTP: the SETs verify against
// the JWKS with jose (typ secevent+jwt, iss, aud = the resource server's client id); a rotation
// is a CAEP credential-change (update, with the new generation and the change's time), an API
// user's revocation a credential-change (revoke), an RFC 7009 revocation a CAEP session-revoked
// with a jwt_id subject; unacknowledged SETs come again with the same jti, acknowledged ones never;
// API users and wrong secrets are refused; bad bodies are 400, never 500; a long poll is woken by
// the change. Two instances on one Postgres share each resource server's position.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JWTPayload } from "jose";
import { isPostgres, newStorage, type Storage } from "../helpers/backend.js";
import { dropStorage, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  assertOAuthError,
  basicAuthorization,
  disposeService,
  ISSUER,
  newApiUser,
  newTenant,
  partsOf,
  postForm,
  postJson,
  ROOMY_RATE_LIMITS,
  startTokenService,
  type Client,
  type HttpReply,
  type Tenant,
  registerResourceServer,
  type ResourceServerCredential,
} from "../helpers/token-kit.js";

const POLL_PATH = "/v2/ssf/poll";
const CREDENTIAL_CHANGE = "https://schemas.openid.net/secevent/caep/event-type/credential-change";
const SESSION_REVOKED = "https://schemas.openid.net/secevent/caep/event-type/session-revoked";

/** One poll with HTTP Basic (the body as given: RFC 8936's members). */
const poll = (baseUrl: string, server: ResourceServerCredential, body: unknown): Promise<HttpReply> =>
  postJson(baseUrl, POLL_PATH, body, { authorization: basicAuthorization(server.clientId, server.clientSecret) });

/** Polls (returning at once) and acknowledges until nothing is left: the feed is then at the latest change. */
async function drain(baseUrl: string, server: ResourceServerCredential): Promise<void> {
  let ack: string[] = [];
  for (let i = 0; i < 50; i++) {
    const res = await poll(baseUrl, server, { returnImmediately: true, maxEvents: 1000, ack });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    ack = Object.keys(res.body.sets);
    if (ack.length === 0) return;
  }
  assert.fail("the feed did not drain");
}

async function rotate(baseUrl: string, admin: Client, clientId: string): Promise<void> {
  const response = await fetch(`${baseUrl}/v2/api-users/rotate`, {
    method: "POST",
    headers: { authorization: `Bearer ${await accessTokenOf(baseUrl, admin)}`, "content-type": "application/json" },
    body: JSON.stringify({ clientId }),
  });
  assert.equal(response.status, 200, await response.text());
}

/** Verifies a SET against the service's JWKS as any SSF receiver would, and returns its claims. */
async function verifySet(baseUrl: string, set: string, audience: string): Promise<JWTPayload & Record<string, any>> {
  const jwks = createLocalJWKSet((await (await fetch(`${baseUrl}/.well-known/jwks.json`)).json()) as any);
  const { payload, protectedHeader } = await jwtVerify(set, jwks, { issuer: ISSUER, audience, typ: "secevent+jwt" });
  assert.equal(protectedHeader.alg, "EdDSA");
  return payload as JWTPayload & Record<string, any>;
}

describe("SET polling (RFC 8936) and the SSF transmitter configuration", () => {
  let running: RunningService;
  let baseUrl: string;
  let tenant: Tenant;
  let server: ResourceServerCredential;
  before(async () => {
    running = await startTokenService({ env: ROOMY_RATE_LIMITS });
    baseUrl = running.baseUrl;
    tenant = await newTenant(baseUrl);
    server = await registerResourceServer(baseUrl, "Bookings");
  });
  after(() => disposeService(running));

  test("/.well-known/ssf-configuration is SSF 1.0 transmitter metadata: poll delivery, the JWKS, Basic authentication", async () => {
    const res = await fetch(`${baseUrl}/.well-known/ssf-configuration`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), {
      spec_version: "1_0",
      issuer: ISSUER,
      jwks_uri: `${ISSUER}/.well-known/jwks.json`,
      delivery_methods_supported: ["urn:ietf:rfc:8936"],
      authorization_schemes: [{ spec_urn: "urn:ietf:rfc:7617" }, { spec_urn: "urn:ietf:rfc:7523" }],
      default_subjects: "ALL",
    });
  });

  test("a new resource server's first poll has every retained change; a rotation is a signed CAEP credential-change (update, generation, time); unacknowledged it comes again, acknowledged never", async () => {
    const [early, user] = [
      await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN"),
      await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN"),
    ];
    await rotate(baseUrl, tenant.admin, early.clientId);
    const fresh = await registerResourceServer(baseUrl, "Fresh");
    const first = await poll(baseUrl, fresh, { returnImmediately: true, maxEvents: 1000 });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const claims = await Promise.all(
      Object.values<string>(first.body.sets).map((s) => verifySet(baseUrl, s, fresh.clientId)),
    );
    assert.ok(
      claims.some((c) => c.sub_id.id === early.clientId),
      "the rotation made before the receiver's first poll is in it",
    );

    await drain(baseUrl, server);
    const before = Math.floor(Date.now() / 1000);
    const oldToken = await accessTokenOf(baseUrl, user);
    await rotate(baseUrl, tenant.admin, user.clientId);
    const res = await poll(baseUrl, server, { returnImmediately: true });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(Object.keys(res.body).sort(), ["moreAvailable", "sets"]);
    assert.equal(res.body.moreAvailable, false);
    assert.equal(res.headers.get("cache-control"), "no-store");
    const entries = Object.entries<string>(res.body.sets);
    assert.equal(entries.length, 1, JSON.stringify(res.body));
    const [jti, set] = entries[0]!;
    assert.equal(decodeProtectedHeader(set).typ, "secevent+jwt");
    const payload = await verifySet(baseUrl, set, server.clientId);
    assert.equal(payload.jti, jti, "keyed by its jti");
    assert.equal(payload.txn, jti);
    assert.deepEqual(payload.sub_id, { format: "opaque", id: user.clientId });
    assert.equal(payload.sub, undefined, "SSF: the subject is sub_id");
    assert.ok(payload.iat! >= before);
    const event = payload.events[CREDENTIAL_CHANGE];
    assert.deepEqual(Object.keys(payload.events), [CREDENTIAL_CHANGE]);
    assert.deepEqual(
      { ...event, event_timestamp: undefined },
      { credential_type: "client_secret", change_type: "update", credential_generation: 2, event_timestamp: undefined },
    );
    assert.ok(
      event.event_timestamp > partsOf(oldToken).payload.iat,
      "a receiver refusing tokens with iat before event_timestamp refuses the old token",
    );
    assert.ok(event.event_timestamp <= Math.ceil(Date.now() / 1000));

    const again = await poll(baseUrl, server, { returnImmediately: true });
    assert.deepEqual(Object.keys(again.body.sets), [jti], "not acknowledged: delivered again with the same jti");
    const acked = await poll(baseUrl, server, { returnImmediately: true, ack: [jti] });
    assert.deepEqual(acked.body, { sets: {}, moreAvailable: false });
    const after = await poll(baseUrl, server, { returnImmediately: true });
    assert.deepEqual(after.body, { sets: {}, moreAvailable: false }, "acknowledged: never again");
  });

  test("an API user's revocation is credential-change revoke (no generation); an RFC 7009 revocation is session-revoked with a jwt_id subject and the token's expiry", async () => {
    await drain(baseUrl, server);
    const [gone, holder] = [
      await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN"),
      await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN"),
    ];
    const revokeUser = await fetch(`${baseUrl}/v2/api-users/revoke`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${await accessTokenOf(baseUrl, tenant.admin)}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ clientId: gone.clientId }),
    });
    assert.equal(revokeUser.status, 204, await revokeUser.text());
    const token = await accessTokenOf(baseUrl, holder);
    const revoked = await postForm(baseUrl, "/v2/auth/revoke", {
      token,
      client_id: holder.clientId,
      client_secret: holder.clientSecret,
    });
    assert.equal(revoked.status, 200);

    const res = await poll(baseUrl, server, { returnImmediately: true });
    const payloads = await Promise.all(
      Object.values<string>(res.body.sets).map((s) => verifySet(baseUrl, s, server.clientId)),
    );
    assert.equal(payloads.length, 2, JSON.stringify(payloads));
    const [userEvent, tokenEvent] = payloads.sort((x, y) => Number(x.jti) - Number(y.jti));
    assert.deepEqual(userEvent!.sub_id, { format: "opaque", id: gone.clientId });
    const change = userEvent!.events[CREDENTIAL_CHANGE];
    assert.equal(change.change_type, "revoke");
    assert.equal(change.credential_generation, undefined);
    assert.deepEqual(tokenEvent!.sub_id, { format: "jwt_id", iss: ISSUER, jti: partsOf(token).payload.jti });
    assert.deepEqual(Object.keys(tokenEvent!.events), [SESSION_REVOKED]);
    assert.equal(tokenEvent!.events[SESSION_REVOKED].token_expires_at, partsOf(token).payload.exp);
    assert.equal(typeof tokenEvent!.events[SESSION_REVOKED].event_timestamp, "number");
  });

  test("acknowledging one SET of two leaves the other to be delivered again; maxEvents bounds a poll (moreAvailable); setErrs count as received", async () => {
    await drain(baseUrl, server);
    const [one, two, three] = [
      await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN"),
      await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN"),
      await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN"),
    ];
    for (const user of [one, two, three]) await rotate(baseUrl, tenant.admin, user.clientId);
    const bounded = await poll(baseUrl, server, { returnImmediately: true, maxEvents: 2 });
    assert.equal(bounded.body.moreAvailable, true);
    const [first, second] = Object.keys(bounded.body.sets).sort((x, y) => Number(x) - Number(y));
    assert.ok(first && second);
    const afterSecond = await poll(baseUrl, server, { returnImmediately: true, maxEvents: 1000, ack: [second] });
    const left = Object.keys(afterSecond.body.sets).sort((x, y) => Number(x) - Number(y));
    assert.equal(left.length, 2, "the first and the third");
    assert.equal(left[0], first, "the unacknowledged first comes again, oldest first");
    assert.ok(!left.includes(second));
    const third = left[1]!;
    const ackOnly = await poll(baseUrl, server, {
      maxEvents: 0,
      ack: [first],
      setErrs: { [third]: { err: "invalid_request", description: "a receiver's complaint" } },
    });
    assert.deepEqual(ackOnly.body, { sets: {}, moreAvailable: false }, "maxEvents 0: acknowledge only, at once");
    const none = await poll(baseUrl, server, { returnImmediately: true });
    assert.deepEqual(none.body.sets, {});
  });

  test("returnImmediately false waits for the next change and answers as soon as it commits", async () => {
    await drain(baseUrl, server);
    const user = await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN");
    const started = performance.now();
    const waiting = poll(baseUrl, server, {});
    await new Promise((r) => setTimeout(r, 300));
    await rotate(baseUrl, tenant.admin, user.clientId);
    const res = await waiting;
    const tookMs = performance.now() - started;
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const payloads = await Promise.all(
      Object.values<string>(res.body.sets).map((s) => verifySet(baseUrl, s, server.clientId)),
    );
    assert.deepEqual(
      payloads.map((p) => p.sub_id.id),
      [user.clientId],
    );
    assert.ok(tookMs < 3000, `answered ${Math.round(tookMs)} ms after the poll began`);
    const empty = performance.now();
    const nothing = await poll(baseUrl, server, { ack: Object.keys(res.body.sets) });
    assert.deepEqual(nothing.body, { sets: {}, moreAvailable: false });
    const waited = performance.now() - empty;
    assert.ok(waited >= 3500 && waited < 5000, `an empty long poll answers before the 5 s deadline (${waited} ms)`);
  });

  test("form client_id and client_secret work too; an API user is refused (403 unauthorized_client); a wrong secret or none is 401 invalid_client", async () => {
    const form = await postJson(baseUrl, POLL_PATH, {
      returnImmediately: true,
      maxEvents: 0,
      client_id: server.clientId,
      client_secret: server.clientSecret,
    });
    assert.equal(form.status, 200, JSON.stringify(form.body));
    const user = await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN");
    assertOAuthError(
      await poll(baseUrl, user, { returnImmediately: true }),
      403,
      "UNAUTHORIZED_CLIENT",
      "unauthorized_client",
    );
    const wrong = await poll(
      baseUrl,
      { clientId: server.clientId, clientSecret: "not-it" },
      { returnImmediately: true },
    );
    assertOAuthError(wrong, 401, "RESOURCE_SERVER_AUTHENTICATION_FAILED", "invalid_client");
    assert.match(wrong.headers.get("www-authenticate") ?? "", /^Basic/);
    assertOAuthError(
      await postJson(baseUrl, POLL_PATH, { returnImmediately: true }),
      401,
      "CLIENT_AUTHENTICATION_REQUIRED",
      "invalid_client",
    );
  });

  test("bad bodies are 400 with the error shape, never 500: wrong types, maxEvents out of range, a jti this feed never issues, control bytes, unknown members", async () => {
    const bodies: unknown[] = [
      { maxEvents: "ten" },
      { maxEvents: 1001 },
      { maxEvents: -1 },
      { maxEvents: 1e12 },
      { returnImmediately: "yes" },
      { ack: "1" },
      { ack: [1] },
      { ack: ["abc"] },
      { ack: ["0"] },
      { ack: ["1\u0000"] },
      { ack: [`${"9".repeat(65)}`] },
      { ack: Array.from({ length: 1001 }, (_, i) => String(i + 1)) },
      { setErrs: ["1"] },
      { setErrs: { "1": "oops" } },
      { setErrs: { "1\u0007": { err: "x", description: "y" } } },
      { setErrs: { "1": { err: "x\u0000", description: "y" } } },
      { returnImmediately: true, events: {} },
      [],
      "ack",
    ];
    for (const body of bodies) {
      const res = await poll(baseUrl, server, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.status} ${JSON.stringify(res.body)}`);
      assert.ok(Array.isArray(res.body?.errorMessages), `${JSON.stringify(body)}: the error shape`);
      assert.match(res.body.debugIdentifier, /\S/);
    }
    const formBody = await postForm(
      baseUrl,
      POLL_PATH,
      { returnImmediately: "true" },
      {
        authorization: basicAuthorization(server.clientId, server.clientSecret),
      },
    );
    assert.equal(formBody.status, 415, JSON.stringify(formBody.body));
    const acceptedJtiOfTheFuture = await poll(baseUrl, server, { returnImmediately: true, ack: ["9999999999"] });
    assert.equal(acceptedJtiOfTheFuture.status, 200, "a jti of a change still to come acknowledges nothing");
  });
});

test("a waiting long poll answers (empty) as soon as the service stops, not at its bound", async () => {
  // A 20 s deadline: the long poll's bound is 19 s.
  const running = await startTokenService({ env: { ...ROOMY_RATE_LIMITS, REQUEST_DEADLINE_MS: "20000" } });
  try {
    const server = await registerResourceServer(running.baseUrl, "Stopping");
    await drain(running.baseUrl, server);
    const waiting = poll(running.baseUrl, server, {});
    await new Promise((r) => setTimeout(r, 300));
    const stopping = performance.now();
    const stopped = running.stop();
    const res = await waiting;
    const tookMs = performance.now() - stopping;
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body, { sets: {}, moreAvailable: false });
    assert.ok(tookMs < 1000, `answered ${Math.round(tookMs)} ms after stop began`);
    await stopped;
  } finally {
    await disposeService(running);
  }
});

describe("SET polling across two instances", { skip: !isPostgres && "needs a shared Postgres" }, () => {
  let storage: Storage;
  let a: RunningService;
  let b: RunningService;
  before(async () => {
    storage = newStorage();
    a = await startTokenService({ storage, env: ROOMY_RATE_LIMITS });
    b = await startTokenService({ storage, env: ROOMY_RATE_LIMITS });
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    if (storage) await dropStorage(storage);
  });

  test("a rotation on A is in a poll on B (a long poll on B is woken by it); acknowledged on B, it is not delivered on A", async () => {
    const tenant = await newTenant(a.baseUrl);
    const user = await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const server = await registerResourceServer(a.baseUrl, "Shared");
    await drain(b.baseUrl, server);
    const started = performance.now();
    const waiting = poll(b.baseUrl, server, {});
    await new Promise((r) => setTimeout(r, 200));
    await rotate(a.baseUrl, tenant.admin, user.clientId);
    const res = await waiting;
    assert.ok(performance.now() - started < 3000, "woken by the change on A");
    const entries = Object.entries<string>(res.body.sets);
    assert.equal(entries.length, 1, JSON.stringify(res.body));
    const [jti, set] = entries[0]!;
    const payload = await verifySet(a.baseUrl, set, server.clientId);
    assert.deepEqual(payload.sub_id, { format: "opaque", id: user.clientId });
    assert.equal(payload.events[CREDENTIAL_CHANGE].credential_generation, 2);

    const onA = await poll(a.baseUrl, server, { returnImmediately: true });
    assert.deepEqual(Object.keys(onA.body.sets), [jti], "the position is shared: unacknowledged on B, delivered on A");
    await poll(b.baseUrl, server, { returnImmediately: true, maxEvents: 0, ack: [jti] });
    const afterAck = await poll(a.baseUrl, server, { returnImmediately: true });
    assert.deepEqual(afterAck.body, { sets: {}, moreAvailable: false }, "acknowledged on B: not delivered on A");
  });
});
