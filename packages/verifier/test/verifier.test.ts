// The verifier against a real auth service (in process, reached through a TCP proxy the tests can
// stall or cut): genuine tokens accepted with their claims and cached; forged, expired, early,
// wrong-issuer, wrong-audience and malformed ones refused with their reason; a rotation and an
// RFC 7009 revocation refused once their event arrives; every token refused as stale once the
// stream has been quiet past the bound, and accepted again only after reconnection and catch-up,
// with what changed meanwhile applied first; the introspection fallback.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { operatorCall, type RunningService } from "../../../test/helpers/service.js";
import { startTcpProxy, type TcpProxy } from "../../../test/helpers/tcp-proxy.js";
import {
  accessTokenOf,
  disposeService,
  genuineSigningKey,
  ISSUER,
  newApiUser,
  newTenant,
  partsOf,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  type Client,
  type Tenant,
} from "../../../test/helpers/token-kit.js";
import { waitFor } from "../../../test/helpers/wait.js";
import { createVerifier, type Outcome, type Verifier, type VerifierOptions } from "../src/index.js";

const AUDIENCE = "https://bookings.platform.test/api";
const STALE_AFTER_MS = 1500;

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
/** A compact JWS of `header` and `payload`, signed Ed25519 with a key of this test or the service's own. */
async function sign(
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
  key: crypto.KeyObject | crypto.webcrypto.CryptoKey,
): Promise<string> {
  const input = `${b64(header)}.${b64(payload)}`;
  const signature =
    key instanceof crypto.KeyObject
      ? crypto.sign(null, Buffer.from(input), key)
      : Buffer.from(await crypto.subtle.sign("Ed25519", key, Buffer.from(input)));
  return `${input}.${signature.toString("base64url")}`;
}

/** Rotates the API user's secret as its TMC admin; the new secret. */
async function rotate(baseUrl: string, admin: Client, clientId: string): Promise<string> {
  const response = await fetch(`${baseUrl}/v2/api-users/rotate`, {
    method: "POST",
    headers: { authorization: `Bearer ${await accessTokenOf(baseUrl, admin)}`, "content-type": "application/json" },
    body: JSON.stringify({ clientId }),
  });
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return (JSON.parse(text) as { clientSecret: string }).clientSecret;
}

const reasonOf = (outcome: Outcome) => (outcome.ok ? "ok" : outcome.reason);

describe("the verifier against a running auth service", () => {
  let running: RunningService;
  let proxy: TcpProxy;
  let tenant: Tenant;
  let server: { clientId: string; clientSecret: string };
  let verifier: Verifier;
  let signingKey: crypto.webcrypto.CryptoKey;
  const verifiers: Verifier[] = [];
  const options = (extra: Partial<VerifierOptions> = {}): VerifierOptions => ({
    authUrl: `http://127.0.0.1:${proxy.port}`,
    issuer: ISSUER,
    audience: AUDIENCE,
    clientId: server.clientId,
    clientSecret: server.clientSecret,
    staleAfterMs: STALE_AFTER_MS,
    ...extra,
  });
  const start = async (extra: Partial<VerifierOptions> = {}) => {
    const v = await createVerifier(options(extra));
    verifiers.push(v);
    return v;
  };
  const tokenOf = (client: Client, audience = AUDIENCE) =>
    accessTokenOf(running.baseUrl, client, { resource: audience });
  /** A token signed with the service's genuine key: the claims of `model`, changed by `changes`. */
  const crafted = (model: string, changes: Record<string, unknown>, header: Record<string, unknown> = {}) =>
    sign(
      { ...partsOf(model).header, ...header },
      { ...partsOf(model).payload, jti: crypto.randomUUID(), ...changes },
      signingKey,
    );

  before(async () => {
    running = await startTokenService({ env: ROOMY_RATE_LIMITS });
    proxy = await startTcpProxy(Number(new URL(running.baseUrl).port));
    tenant = await newTenant(running.baseUrl);
    server = await operatorCall(running.baseUrl, "CreateResourceServer", { name: "Bookings", audiences: [AUDIENCE] });
    signingKey = (await genuineSigningKey(running)).key as unknown as crypto.webcrypto.CryptoKey;
    verifier = await start();
    await verifier.ready(10_000);
  });
  after(async () => {
    await Promise.all(verifiers.map((v) => v.close()));
    await proxy?.close();
    await disposeService(running);
  });

  test("a genuine token for its audience is accepted with its claims; ready() means connected and caught up", async () => {
    const user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const token = await tokenOf(user);
    const outcome = await verifier.verify(token);
    assert.ok(outcome.ok, reasonOf(outcome));
    assert.equal(outcome.claims.client_id, user.clientId);
    assert.equal(outcome.claims.sub, partsOf(token).payload.sub);
    assert.equal(outcome.claims.gen, 1);
    const status = verifier.status();
    assert.equal(status.connected, true);
    assert.equal(status.caughtUp, true);
    assert.match(status.cursor, /^\d+$/);
    assert.ok(Date.now() - status.lastHeardAt! <= 1000, "heard within a heartbeat");
    assert.equal(typeof status.lagMs, "number");
  });

  // How much faster a hit is belongs to the bench (npm run bench, scenario verifier-local), not here.
  test("seen again, a token is a cache hit (counted as one), and the hit answers exactly as first sight did", async () => {
    const user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const token = await tokenOf(user);
    const before = verifier.metrics().verifications;
    const first = await verifier.verify(token);
    const again = await verifier.verify(token);
    assert.deepEqual(again, first);
    assert.deepEqual(verifier.metrics().verifications, {
      firstSight: before.firstSight + 1,
      cached: before.cached + 1,
    });
  });

  test("forged, tampered, unknown-key, expired, not-yet-valid, wrong-issuer, wrong-audience and malformed tokens are refused with their reason; cached or not", async () => {
    const user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const model = await tokenOf(user);
    const [h, p, s] = model.split(".");
    const now = Math.floor(Date.now() / 1000);
    const stranger = crypto.generateKeyPairSync("ed25519").privateKey;
    const tampered = `${h}.${b64({ ...partsOf(model).payload, sub: "someone-else" })}.${s}`;
    const cases: Array<[string, string, string]> = [
      [
        await sign(partsOf(model).header, partsOf(model).payload, stranger),
        "bad_signature",
        "signed with another key, genuine kid",
      ],
      [tampered, "bad_signature", "payload changed after signing"],
      // The checks and their order are the service's (jws.ts): an algorithm it does not sign with is a bad signature.
      [`${b64({ ...partsOf(model).header, alg: "none" })}.${p}.`, "bad_signature", "alg none, no signature"],
      [
        await sign({ ...partsOf(model).header, alg: "HS256" }, partsOf(model).payload, stranger),
        "bad_signature",
        "alg HS256",
      ],
      [
        await sign({ ...partsOf(model).header, kid: "nobody-knows" }, partsOf(model).payload, stranger),
        "unknown_key",
        "unknown kid",
      ],
      [await crafted(model, { iat: now - 3600, exp: now - 60 }), "expired", "expired a minute ago"],
      // As the service (and jose) judge it: `nbf` and `exp` are the time checks; an `iat` ahead is not refused.
      [await crafted(model, { iat: now + 600, exp: now + 1200 }), "ok", "issued in the future"],
      [await crafted(model, { nbf: now + 600 }), "not_yet_valid", "nbf in the future"],
      [await crafted(model, { iss: "http://evil.test" }), "wrong_issuer", "another issuer"],
      [await crafted(model, { aud: "https://invoices.platform.test/api" }), "wrong_audience", "another audience"],
      [await tokenOf(user, "http://auth.test/v2"), "wrong_audience", "the auth service's own audience"],
      [await crafted(model, {}, { typ: "JWT" }), "malformed", "typ JWT, not at+jwt"],
      [await crafted(model, { gen: "1" }), "malformed", "gen not a number"],
      ["not-a-jwt", "malformed", "no dots"],
      [`${h}.${p}`, "malformed", "two segments"],
      // The signature is checked before the payload is read: an altered payload is a bad signature.
      [`${h}.!!!.${s}`, "bad_signature", "payload not base64url JSON"],
      [`${h}.${b64("not an object")}.${s}`, "bad_signature", "payload a JSON string"],
      [`${h}.e30.${s}`, "bad_signature", "payload {}"],
    ];
    for (const [token, reason, what] of cases) {
      assert.equal(reasonOf(await verifier.verify(token)), reason, what);
      assert.equal(reasonOf(await verifier.verify(token)), reason, `${what}, again`);
    }
    assert.ok((await verifier.verify(model)).ok, "the genuine token still is");
  });

  test("unknown kids (genuine signatures under a kid never published) refetch the JWKS at most once per cooldown", async () => {
    const v = await start({ jwksCooldownMs: 60_000 });
    await v.ready();
    await waitFor("the first JWKS fetch", () => v.metrics().jwks.fetches >= 1);
    const user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const model = await tokenOf(user);
    const fetches = v.metrics().jwks.fetches;
    for (let i = 0; i < 20; i++)
      assert.equal(reasonOf(await v.verify(await crafted(model, {}, { kid: `forged-${i}` }))), "unknown_key");
    assert.ok(
      v.metrics().jwks.fetches - fetches <= 1,
      `${v.metrics().jwks.fetches - fetches} fetches for 20 unknown kids`,
    );
  });

  test("an API user rotated: its old token is refused as revoked once the event arrives, the new one accepted; never accepted after", async () => {
    const user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const old = await tokenOf(user);
    assert.ok((await verifier.verify(old)).ok, "cached before the rotation");
    const secret = await rotate(running.baseUrl, tenant.admin, user.clientId);
    await waitFor("the old token refused", async () => reasonOf(await verifier.verify(old)) === "revoked", {
      timeoutMs: 2000,
      intervalMs: 5,
    });
    for (let i = 0; i < 20; i++) assert.equal(reasonOf(await verifier.verify(old)), "revoked");
    const renewed = await verifier.verify(await tokenOf({ ...user, clientSecret: secret }));
    assert.ok(renewed.ok, reasonOf(renewed));
    assert.equal(renewed.claims.gen, 2);
  });

  test("a token revoked by RFC 7009 is refused once its event arrives (it was cached); the client's other tokens are not", async () => {
    const user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const [revoked, other] = [await tokenOf(user), await tokenOf(user)];
    assert.ok((await verifier.verify(revoked)).ok);
    const answer = await postForm(running.baseUrl, "/v2/auth/revoke", {
      token: revoked,
      client_id: user.clientId,
      client_secret: user.clientSecret,
    });
    assert.equal(answer.status, 200);
    await waitFor("the revoked token refused", async () => reasonOf(await verifier.verify(revoked)) === "revoked", {
      timeoutMs: 2000,
      intervalMs: 5,
    });
    assert.ok((await verifier.verify(other)).ok, "another token of the same client");
  });

  test("the stream stalls: every token refused as stale after the bound (not before it is quiet that long); accepted again after resume and catch-up", async () => {
    const user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const token = await tokenOf(user);
    assert.ok((await verifier.verify(token)).ok);
    proxy.stall();
    try {
      const stalledAt = Date.now();
      // The bound counts from the last heartbeat that vouched for the stream (an event since vouches for nothing).
      const lastHeartbeat = verifier.status().lastHeartbeatAt!;
      const stale = await waitFor(
        "stale",
        async () => reasonOf(await verifier.verify(token)) === "stale" && Date.now(),
        {
          timeoutMs: STALE_AFTER_MS + 3000,
          intervalMs: 10,
        },
      );
      // >=: whole wall-clock milliseconds here; the verifier compares a monotonic clock, strictly.
      assert.ok(
        stale - lastHeartbeat >= STALE_AFTER_MS,
        `stale ${stale - lastHeartbeat} ms after its last heartbeat: not before the bound`,
      );
      assert.ok(stale - stalledAt <= STALE_AFTER_MS + 750, `stale ${stale - stalledAt} ms after the stall began`);
      const fresh = await tokenOf(user);
      assert.equal(reasonOf(await verifier.verify(fresh)), "stale", "a token never seen is refused too");
    } finally {
      proxy.resume();
    }
    await waitFor("accepted again", async () => (await verifier.verify(token)).ok, { timeoutMs: 10_000 });
    assert.equal(verifier.status().caughtUp, true);
  });

  test("the service goes away (connections dropped, refused): stale; a rotation and a revocation made meanwhile are applied before anything is accepted again", async () => {
    const [rotated, revokedOwner, untouched] = [
      await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN"),
      await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN"),
      await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN"),
    ];
    const [rotatedToken, revokedToken, untouchedToken] = await Promise.all([
      tokenOf(rotated),
      tokenOf(revokedOwner),
      tokenOf(untouched),
    ]);
    for (const t of [rotatedToken, revokedToken, untouchedToken]) assert.ok((await verifier.verify(t)).ok);
    const reconnects = verifier.metrics().reconnects;
    await proxy.cut();
    try {
      await waitFor("disconnected", () => !verifier.status().connected, { timeoutMs: 2000 });
      assert.equal(reasonOf(await verifier.verify(untouchedToken)), "stale", "disconnected: refused at once");
      await rotate(running.baseUrl, tenant.admin, rotated.clientId);
      const answer = await postForm(running.baseUrl, "/v2/auth/revoke", {
        token: revokedToken,
        client_id: revokedOwner.clientId,
        client_secret: revokedOwner.clientSecret,
      });
      assert.equal(answer.status, 200);
      await sleep(STALE_AFTER_MS + 100);
      assert.equal(reasonOf(await verifier.verify(untouchedToken)), "stale");
    } finally {
      await proxy.restore();
    }
    const seen = { rotated: new Set<string>(), revoked: new Set<string>() };
    for (;;) {
      seen.rotated.add(reasonOf(await verifier.verify(rotatedToken)));
      seen.revoked.add(reasonOf(await verifier.verify(revokedToken)));
      if ((await verifier.verify(untouchedToken)).ok) break;
      await sleep(2);
    }
    seen.rotated.add(reasonOf(await verifier.verify(rotatedToken)));
    seen.revoked.add(reasonOf(await verifier.verify(revokedToken)));
    assert.deepEqual([...seen.rotated].sort(), ["revoked", "stale"], "the rotated user's token: never accepted");
    assert.deepEqual([...seen.revoked].sort(), ["revoked", "stale"], "the revoked token: never accepted");
    assert.ok(verifier.metrics().reconnects > reconnects);
  });

  test("wrong resource-server credentials: never ready, every token stale; the errors name the status, never the secret", async () => {
    const secret = `wrong-${crypto.randomUUID()}`;
    const v = await start({ clientSecret: secret });
    const rejected = await v.ready(1500).then(
      () => assert.fail("ready with a wrong secret"),
      (error: unknown) => String(error),
    );
    assert.match(rejected, /Unauthenticated/);
    assert.match(v.status().lastError ?? "", /^Unauthenticated: /);
    assert.ok(
      !rejected.includes(secret) && !(v.status().lastError ?? "").includes(secret),
      "the secret is never shown",
    );
    const user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    assert.equal(reasonOf(await v.verify(await tokenOf(user))), "stale");
  });

  test("the auth service restarts (stopped, then a new process on the same storage): stale meanwhile, resumed from its cursor; a rotation made before the verifier reconnects is applied before anything is accepted", async () => {
    const [rotated, untouched] = [
      await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN"),
      await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN"),
    ];
    const [rotatedToken, untouchedToken] = [await tokenOf(rotated), await tokenOf(untouched)];
    for (const t of [rotatedToken, untouchedToken]) assert.ok((await verifier.verify(t)).ok);
    const snapshots = verifier.metrics().events.snapshots;
    await proxy.cut();
    await running.stop();
    await waitFor("disconnected", () => !verifier.status().connected, { timeoutMs: 2000 });
    assert.equal(reasonOf(await verifier.verify(untouchedToken)), "stale");
    running = await startTokenService({ storage: running.storage, env: ROOMY_RATE_LIMITS });
    await rotate(running.baseUrl, tenant.admin, rotated.clientId);
    proxy.retarget(Number(new URL(running.baseUrl).port));
    await proxy.restore();
    const seen = new Set<string>();
    while (!(await verifier.verify(untouchedToken)).ok) {
      seen.add(reasonOf(await verifier.verify(rotatedToken)));
      await sleep(2);
    }
    seen.add(reasonOf(await verifier.verify(rotatedToken)));
    assert.ok(seen.has("revoked") && !seen.has("ok"), `the rotated user's token: ${[...seen].join(", ")}`);
    assert.equal(verifier.metrics().events.snapshots, snapshots, "resumed from its cursor, not resynchronized");
  });

  test("fallback introspect: while not current it asks the service (batched) instead of refusing; a revoked token is still refused", async () => {
    // A bound shorter than the heartbeat period: the verifier is almost never current.
    const v = await start({ fallback: "introspect", staleAfterMs: 1, transport: "connect" });
    const user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const [good, revoked] = [await tokenOf(user), await tokenOf(user)];
    await postForm(running.baseUrl, "/v2/auth/revoke", {
      token: revoked,
      client_id: user.clientId,
      client_secret: user.clientSecret,
    });
    const outcomes = await Promise.all([v.verify(good), v.verify(revoked), v.verify(good)]);
    assert.deepEqual(outcomes.map(reasonOf), ["ok", "revoked", "ok"]);
    const { calls, tokens } = v.metrics().introspections;
    assert.ok(calls >= 1 && calls < tokens, `${calls} calls for ${tokens} tokens: batched`);
    proxy.stall();
    try {
      assert.equal(reasonOf(await v.verify(good)), "stale", "the service unreachable too: refused");
    } finally {
      proxy.resume();
    }
  });
});
