// private_key_jwt with a jwks_uri: an API user's key set registered by URL, served here by a
// loopback http server (JWKS_URI_ALLOW_HTTP_LOOPBACK), fetched by the service within its limits
// (size, time, no redirect), held for a bounded time, refetched for an unknown kid at most once
// per cooldown per client; every failure refuses the assertion (invalid_client), never a 500.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { JWK } from "jose";
import * as oauth from "oauth4webapi";
import {
  assertion,
  ASSERTION_TYPE,
  keyPair,
  refusalsIn,
  setKeys,
  tokenWith,
  type KeyPair,
} from "../helpers/client-assertions.js";
import { backend, isPostgres, newStorage, type Storage } from "../helpers/backend.js";
import { COOLDOWN_MS, JWKS_URI_ENV, startJwksServer, type JwksServer } from "../helpers/jwks-server.js";
import { dropStorage, operatorCall, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  assertGrpcFailure,
  assertOAuthError,
  disposeService,
  GRPC,
  grpcClients,
  newApiUser,
  newTenant,
  ROOMY_RATE_LIMITS,
  startServiceAtOwnAddress,
  startTokenService,
  type Client,
} from "../helpers/token-kit.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe(`private_key_jwt with a jwks_uri (${backend})`, () => {
  let running: RunningService;
  let baseUrl: string;
  let jwks: JwksServer;
  let admin: Client;
  let tmcId: string;

  const serve = (path: string, served: KeyPair[], headers: Record<string, string> = {}) =>
    jwks.answers.set(path, { body: JSON.stringify({ keys: served.map((k) => k.jwk) }), headers });
  /** A new API user whose keys (`served`) are served at `path` and registered by its URL. */
  async function userAt(path: string, served: KeyPair[], headers: Record<string, string> = {}) {
    serve(path, served, headers);
    const user = await newApiUser(baseUrl, tmcId, "TMC_ADMIN");
    const registered = await setKeys(baseUrl, admin, user.clientId, { jwksUri: jwks.url(path) });
    assert.equal(registered.status, 200, await registered.clone().text());
    return user.clientId;
  }

  before(async () => {
    jwks = await startJwksServer();
    running = await startServiceAtOwnAddress({ env: JWKS_URI_ENV });
    baseUrl = running.baseUrl;
    ({ admin, tmcId } = await newTenant(baseUrl));
  });
  after(async () => {
    await disposeService(running);
    await jwks?.close();
  });

  test("registration answers the served kids and the URL; oauth4webapi's PrivateKeyJwt gets a token", async () => {
    const key = await keyPair("ES256");
    jwks.keys = [key.jwk];
    const user = await newApiUser(baseUrl, tmcId, "TMC_ADMIN");
    const registered = await setKeys(baseUrl, admin, user.clientId, { jwksUri: jwks.url() });
    assert.equal(registered.status, 200, await registered.clone().text());
    assert.deepEqual(await registered.json(), { clientId: user.clientId, keyIds: [key.jwk.kid], jwksUri: jwks.url() });

    const issuer = new URL(baseUrl);
    const options = { [oauth.allowInsecureRequests]: true };
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: "oauth2", ...options }),
    );
    const client = { client_id: user.clientId };
    const auth = oauth.PrivateKeyJwt({ key: key.privateKey, kid: key.jwk.kid });
    const response = await oauth.clientCredentialsGrantRequest(as, client, auth, new URLSearchParams(), options);
    const tokens = await oauth
      .processClientCredentialsResponse(as, client, response)
      .catch((error: unknown) => assert.fail(`${String(error)}; ${refusalsIn(running.logs())}`));
    assert.equal(tokens.token_type.toLowerCase(), "bearer");
  });

  test("a key added at the URL (a new kid) is picked up by the unknown-kid refetch, before the set expires", async () => {
    const [first, next] = [await keyPair("EdDSA"), await keyPair("ES256")];
    const clientId = await userAt("/rotated.json", [first]);
    assert.equal((await tokenWith(baseUrl, await assertion(first, clientId, baseUrl))).status, 200);
    const fetched = jwks.requests("/rotated.json");
    serve("/rotated.json", [first, next]);
    await sleep(COOLDOWN_MS + 100); // past the cooldown, well within the set's 3 s
    const rotated = await tokenWith(baseUrl, await assertion(next, clientId, baseUrl));
    assert.equal(rotated.status, 200, refusalsIn(running.logs()));
    assert.equal(jwks.requests("/rotated.json"), fetched + 1, "one refetch, for the unknown kid");
  });

  test("unknown kids refetch at most once per cooldown per client (requests counted at the server)", async () => {
    const [key, stranger] = [await keyPair("EdDSA"), await keyPair("EdDSA")];
    const clientId = await userAt("/limited.json", [key]);
    assert.equal((await tokenWith(baseUrl, await assertion(key, clientId, baseUrl))).status, 200);
    await sleep(COOLDOWN_MS + 100);
    const before = jwks.requests("/limited.json");
    const forged = () =>
      assertion({ ...stranger, jwk: { ...stranger.jwk, kid: crypto.randomUUID() } }, clientId, baseUrl);
    const burst = await Promise.all(Array.from({ length: 20 }, async () => tokenWith(baseUrl, await forged())));
    for (const res of burst) assertOAuthError(res, 403, "INVALID_CLIENT", "invalid_client");
    for (let i = 0; i < 5; i++) assert.equal((await tokenWith(baseUrl, await forged())).status, 403);
    assert.equal(jwks.requests("/limited.json"), before + 1, "25 unknown kids, one fetch");
    assert.equal(
      (await tokenWith(baseUrl, await assertion(key, clientId, baseUrl))).status,
      200,
      "the key still works",
    );
  });

  test("a key removed at the URL stops working once its set expires (Cache-Control max-age=1 honoured)", async () => {
    const [kept, removed] = [await keyPair("EdDSA"), await keyPair("ES256")];
    const clientId = await userAt("/removed.json", [kept, removed], { "cache-control": "max-age=1" });
    assert.equal((await tokenWith(baseUrl, await assertion(removed, clientId, baseUrl))).status, 200);
    serve("/removed.json", [kept], { "cache-control": "max-age=1" });
    await sleep(1_200);
    const refused = await tokenWith(baseUrl, await assertion(removed, clientId, baseUrl));
    assertOAuthError(refused, 403, "INVALID_CLIENT", "invalid_client");
    assert.match(refusalsIn(running.logs()), /assertion signed by no registered key/);
    assert.equal((await tokenWith(baseUrl, await assertion(kept, clientId, baseUrl))).status, 200);
  });

  test("registration refuses a URL it cannot use, with the reason, and registers nothing", async () => {
    const key = await keyPair("EdDSA");
    const user = await newApiUser(baseUrl, tmcId, "TMC_ADMIN");
    jwks.answers.set("/big.json", { body: JSON.stringify({ keys: [key.jwk], pad: "x".repeat(70_000) }) });
    jwks.answers.set("/slow.json", { delayMs: 1_500 });
    jwks.answers.set("/text", { body: "<html>not a key set</html>", headers: { "content-type": "text/html" } });
    jwks.answers.set("/moved", { status: 302, headers: { location: jwks.url() } });
    jwks.answers.set("/gone", { status: 404, body: "{}" });
    jwks.answers.set("/private.json", { body: JSON.stringify({ keys: [{ ...key.jwk, d: "AAAA" }] }) });
    const cases: Array<[object, RegExp]> = [
      [{ jwksUri: jwks.url("/big.json") }, /more than 65536 bytes/],
      [{ jwksUri: jwks.url("/slow.json") }, /did not answer within 500 ms/],
      [{ jwksUri: jwks.url("/text") }, /did not answer JSON/],
      [{ jwksUri: jwks.url("/moved") }, /redirect \(302\), which is not followed/],
      [{ jwksUri: jwks.url("/gone") }, /answered HTTP 404/],
      [{ jwksUri: jwks.url("/private.json") }, /not a usable JWK Set: .*public key/],
      [{ jwksUri: "http://jwks.example.com/jwks.json" }, /must use https \(http only on a loopback host\)/],
      [{ jwksUri: "ftp://127.0.0.1/jwks.json" }, /must use https/],
      [{ jwksUri: "https://user:pass@jwks.example.com/jwks.json" }, /must not carry user info/],
      [{ jwksUri: "https://jwks.example.com/jwks.json#x" }, /must not carry a fragment/],
      [{ jwksUri: "/jwks.json" }, /must be an absolute URL/],
      [{ jwksUri: jwks.url(), keys: [key.jwk] }, /either jwks or jwks_uri/],
      [{ jwksUri: "" }, /either jwks or jwks_uri/],
    ];
    for (const [body, reason] of cases) {
      const res = await setKeys(baseUrl, admin, user.clientId, body as { jwksUri: string });
      const text = await res.text();
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${text}`);
      assert.match(text, reason, JSON.stringify(body));
    }
    // Nothing was registered: the user still has its secret (and no keys).
    const bySecret = await tokenWith(baseUrl, await assertion(key, user.clientId, baseUrl));
    assertOAuthError(bySecret, 403, "INVALID_CLIENT", "invalid_client");
  });

  test("another TMC's API user: 404, and the URL is not fetched", async () => {
    const other = await newTenant(baseUrl);
    const foreign = await newApiUser(baseUrl, other.tmcId, "TMC_ADMIN");
    const res = await setKeys(baseUrl, admin, foreign.clientId, { jwksUri: jwks.url("/foreign.json") });
    assert.equal(res.status, 404, await res.clone().text());
    assert.equal(jwks.requests("/foreign.json"), 0);
  });

  test("a URL that fails later refuses the assertion (invalid_client, reason logged), and stalls nobody else", async () => {
    const [key, other] = [await keyPair("EdDSA"), await keyPair("ES256")];
    const clientId = await userAt("/flaky.json", [key], { "cache-control": "no-store" });
    const otherId = await userAt("/steady.json", [other]);
    assert.equal((await tokenWith(baseUrl, await assertion(key, clientId, baseUrl))).status, 200);
    assert.equal((await tokenWith(baseUrl, await assertion(other, otherId, baseUrl))).status, 200);

    jwks.answers.set("/flaky.json", { status: 500, body: "{}" });
    await sleep(1_100); // the set fetched with no-store lives the lower bound, 1 s
    assertOAuthError(
      await tokenWith(baseUrl, await assertion(key, clientId, baseUrl)),
      403,
      "INVALID_CLIENT",
      "invalid_client",
    );
    assert.match(refusalsIn(running.logs()), /assertion key set unavailable: jwks_uri answered HTTP 500/);
    // Within the cooldown after a failure, no new fetch: refused at once.
    const fetched = jwks.requests("/flaky.json");
    assert.equal((await tokenWith(baseUrl, await assertion(key, clientId, baseUrl))).status, 403);
    assert.equal(jwks.requests("/flaky.json"), fetched);

    await sleep(COOLDOWN_MS + 100);
    jwks.answers.set("/flaky.json", { delayMs: 2_000 });
    const slow = tokenWith(baseUrl, await assertion(key, clientId, baseUrl));
    const started = performance.now();
    assert.equal((await tokenWith(baseUrl, await assertion(other, otherId, baseUrl))).status, 200);
    assert.ok(performance.now() - started < 400, "another client is answered while the slow URL is fetched");
    assertOAuthError(await slow, 403, "INVALID_CLIENT", "invalid_client");
    assert.match(refusalsIn(running.logs()), /jwks_uri did not answer within 500 ms/);

    await sleep(COOLDOWN_MS + 100);
    jwks.answers.set("/flaky.json", { body: JSON.stringify({ keys: [key.jwk], pad: "x".repeat(70_000) }) });
    assertOAuthError(
      await tokenWith(baseUrl, await assertion(key, clientId, baseUrl)),
      403,
      "INVALID_CLIENT",
      "invalid_client",
    );
    assert.match(refusalsIn(running.logs()), /jwks_uri answered more than 65536 bytes/);
    assert.doesNotMatch(running.logs(), /"statusCode":500|INTERNAL_ERROR/);
  });

  test("gRPC (@grpc/grpc-js): SetClientKeys with a jwks_uri, then FetchOauth2Token with an assertion", async () => {
    const key = await keyPair("EdDSA");
    serve("/grpc.json", [key]);
    const user = await newApiUser(baseUrl, tmcId, "TMC_ADMIN");
    const grpc = grpcClients(baseUrl);
    try {
      const adminToken = await accessTokenOf(baseUrl, admin);
      const registration = { clientId: user.clientId, jwksUri: jwks.url("/grpc.json") };
      const registered = await grpc.call("apiUser", "SetClientKeys", registration, adminToken);
      assert.ok(registered.ok, JSON.stringify(registered));
      assert.deepEqual(registered.response?.keyIds, [key.jwk.kid]);
      const refused = { clientId: user.clientId, jwksUri: "http://jwks.example.com/jwks.json" };
      assertGrpcFailure(
        await grpc.call("apiUser", "SetClientKeys", refused, adminToken),
        GRPC.INVALID_ARGUMENT,
        "API_VALIDATION_FAILED",
      );
      const token = await grpc.call("auth", "FetchOauth2Token", {
        grantType: "client_credentials",
        clientAssertionType: ASSERTION_TYPE,
        clientAssertion: await assertion(key, user.clientId, baseUrl),
      });
      assert.ok(token.ok, `${JSON.stringify(token)}; ${refusalsIn(running.logs())}`);
    } finally {
      grpc.close();
    }
  });

  test("the operator's SetApiUserKeys registers a jwks_uri too, and switching to inline keys drops it", async () => {
    const [byUrl, inline] = [await keyPair("EdDSA"), await keyPair("EdDSA")];
    jwks.answers.set("/operator.json", { body: JSON.stringify({ keys: [byUrl.jwk] }) });
    const user = await newApiUser(baseUrl, tmcId, "TMC_ADMIN");
    const answer = await operatorCall<{ keyIds: string[]; jwksUri: string }>(baseUrl, "SetApiUserKeys", {
      tmcId,
      clientId: user.clientId,
      jwksUri: jwks.url("/operator.json"),
    });
    assert.deepEqual(answer, {
      tmcId,
      clientId: user.clientId,
      keyIds: [byUrl.jwk.kid],
      jwksUri: jwks.url("/operator.json"),
    });
    assert.equal((await tokenWith(baseUrl, await assertion(byUrl, user.clientId, baseUrl))).status, 200);
    await operatorCall(baseUrl, "SetApiUserKeys", {
      tmcId,
      clientId: user.clientId,
      jwks: JSON.stringify({ keys: [inline.jwk] }),
    });
    assert.equal((await tokenWith(baseUrl, await assertion(byUrl, user.clientId, baseUrl))).status, 403);
    assert.equal((await tokenWith(baseUrl, await assertion(inline, user.clientId, baseUrl))).status, 200);
  });
});

describe("http jwks_uri without JWKS_URI_ALLOW_HTTP_LOOPBACK (the default)", () => {
  let running: RunningService;
  let jwks: JwksServer;
  before(async () => {
    jwks = await startJwksServer([(await keyPair("EdDSA")).jwk]);
    running = await startServiceAtOwnAddress();
  });
  after(async () => {
    await disposeService(running);
    await jwks?.close();
  });

  test("a loopback http URL is refused too: https only", async () => {
    const { admin, tmcId } = await newTenant(running.baseUrl);
    const user = await newApiUser(running.baseUrl, tmcId, "TMC_ADMIN");
    const res = await setKeys(running.baseUrl, admin, user.clientId, { jwksUri: jwks.url() });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /jwks_uri must use https"/);
    assert.equal(jwks.requests(), 0, "nothing fetched");
  });
});

describe(
  "switching between jwks_uri and inline keys across two instances",
  { skip: !isPostgres && "two instances need a shared Postgres and Redis" },
  () => {
    let storage: Storage;
    let a: RunningService;
    let b: RunningService;
    let jwks: JwksServer;
    const audience = "http://auth.test";
    before(async () => {
      storage = newStorage();
      jwks = await startJwksServer();
      const env = {
        ...ROOMY_RATE_LIMITS,
        ...JWKS_URI_ENV,
        JWKS_CACHE_MIN_AGE_MS: "60000",
        JWKS_CACHE_MAX_AGE_MS: "60000",
        TOKEN_ISSUER: audience,
      };
      [a, b] = await Promise.all([startTokenService({ storage, env }), startTokenService({ storage, env })]);
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      if (storage) await dropStorage(storage);
      await jwks?.close();
    });

    test("a registration through B replaces what A holds by the very next request", async () => {
      const { admin, tmcId } = await newTenant(a.baseUrl);
      const user = await newApiUser(a.baseUrl, tmcId, "TMC_ADMIN");
      const [byUrl, inline] = [await keyPair("EdDSA"), await keyPair("ES256")];
      jwks.keys = [byUrl.jwk] as JWK[];
      assert.equal((await setKeys(b.baseUrl, admin, user.clientId, { jwksUri: jwks.url() })).status, 200);
      assert.equal(
        (await tokenWith(a.baseUrl, await assertion(byUrl, user.clientId, audience))).status,
        200,
        "A holds the set",
      );

      assert.equal((await setKeys(b.baseUrl, admin, user.clientId, [inline.jwk])).status, 200);
      assertOAuthError(
        await tokenWith(a.baseUrl, await assertion(byUrl, user.clientId, audience)),
        403,
        "INVALID_CLIENT",
        "invalid_client",
      );
      assert.equal((await tokenWith(a.baseUrl, await assertion(inline, user.clientId, audience))).status, 200);

      // And back: the URL again, now serving another key; A fetches anew although it held the URL's set for a minute.
      const fresh = await keyPair("EdDSA");
      jwks.keys = [fresh.jwk];
      assert.equal((await setKeys(b.baseUrl, admin, user.clientId, { jwksUri: jwks.url() })).status, 200);
      assert.equal((await tokenWith(a.baseUrl, await assertion(inline, user.clientId, audience))).status, 403);
      assert.equal((await tokenWith(a.baseUrl, await assertion(byUrl, user.clientId, audience))).status, 403);
      assert.equal((await tokenWith(a.baseUrl, await assertion(fresh, user.clientId, audience))).status, 200);
    });
  },
);
