// private_key_jwt for resource servers with a jwks_uri: the operator registers a resource server's
// key set by URL (CreateResourceServer or SetResourceServerKeys with jwksUri), served here by a
// loopback http server (JWKS_URI_ALLOW_HTTP_LOOPBACK) and fetched by the API users' machinery
// (RemoteKeySets): checked at registration (an unusable URL registers nothing), held per instance,
// refetched for an unknown kid, and failing closed (401 invalid_client, the reason in the log).
// Moving between inline keys and a URL, or to another URL, is a rotation seen by every instance.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { JWK } from "jose";
import { assertion, ASSERTION_TYPE, keyPair, type KeyPair } from "../helpers/client-assertion-kit.js";
import { backend, isPostgres } from "../helpers/backend.js";
import { startJwksServer, type JwksServer } from "../helpers/jwks-server.js";
import { operatorCall, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  assertGrpcFailure,
  assertOAuthError,
  disposeService,
  GRPC,
  grpcClients,
  INTROSPECT_PATH,
  ISSUER,
  newTenant,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  startTwoTokenServices,
  type Tenant,
} from "../helpers/token-kit.js";

/** Short bounds, so the tests can wait them out: 0.5 s per fetch, 1 s cooldown, sets held 1 to 2 s. */
const JWKS_URI_ENV = {
  ...ROOMY_RATE_LIMITS,
  TOKEN_ISSUER: ISSUER,
  JWKS_URI_ALLOW_HTTP_LOOPBACK: "true",
  JWKS_FETCH_TIMEOUT_MS: "500",
  JWKS_COOLDOWN_MS: "1000",
  JWKS_CACHE_MIN_AGE_MS: "1000",
  JWKS_CACHE_MAX_AGE_MS: "2000",
};
const COOLDOWN_MS = 1000;
const MAX_AGE_MS = 2000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Registered {
  readonly clientId: string;
  readonly clientSecret?: string;
  readonly keyIds: string[];
  readonly jwksUri?: string;
  readonly audiences: string[];
}

const audienceOf = (name: string) => `https://${name}-${crypto.randomUUID()}.platform.test/api`;

const createServer = (baseUrl: string, name: string, keys: { jwks?: string; jwksUri?: string }) =>
  operatorCall<Registered>(baseUrl, "CreateResourceServer", { name, audiences: [audienceOf(name)], ...keys });

const setServerKeys = (baseUrl: string, clientId: string, keys: { jwks?: string; jwksUri?: string }) =>
  operatorCall<{ clientId: string; keyIds: string[]; jwksUri?: string }>(baseUrl, "SetResourceServerKeys", {
    clientId,
    ...keys,
  });

const inline = (...keys: KeyPair[]) => ({ jwks: JSON.stringify({ keys: keys.map((k) => k.jwk) }) });

const introspect = async (baseUrl: string, token: string, by: KeyPair, clientId: string) =>
  postForm(baseUrl, INTROSPECT_PATH, {
    token,
    client_assertion_type: ASSERTION_TYPE,
    client_assertion: await assertion(by, clientId, ISSUER),
  });

describe(`private_key_jwt for resource servers with a jwks_uri (${backend})`, () => {
  let running: RunningService;
  let baseUrl: string;
  let jwks: JwksServer;
  let tenant: Tenant;

  const serve = (path: string, served: KeyPair[]) =>
    jwks.answers.set(path, { body: JSON.stringify({ keys: served.map((k) => k.jwk) }) });
  /** A resource server whose keys (`served`) are served at `path` and registered by its URL. */
  async function serverAt(path: string, served: KeyPair[]) {
    serve(path, served);
    return createServer(baseUrl, "Bookings", { jwksUri: jwks.url(path) });
  }
  const tokenFor = (server: Registered) => accessTokenOf(baseUrl, tenant.admin, { resource: server.audiences[0]! });

  before(async () => {
    jwks = await startJwksServer();
    running = await startTokenService({ env: JWKS_URI_ENV });
    baseUrl = running.baseUrl;
    tenant = await newTenant(baseUrl);
  });
  after(async () => {
    await disposeService(running);
    await jwks?.close();
  });

  test("registered by URL: no secret, the served kids and the URL answered and read back; it introspects over REST and gRPC", async () => {
    const key = await keyPair("ES256");
    const server = await serverAt("/bookings.json", [key]);
    assert.ok(!("clientSecret" in server), "no secret is shown, for there is none");
    assert.deepEqual([server.keyIds, server.jwksUri], [[key.jwk.kid], jwks.url("/bookings.json")]);
    const { resourceServer } = await operatorCall<{ resourceServer: { jwksUri: string; keyIds?: string[] } }>(
      baseUrl,
      "GetResourceServer",
      { clientId: server.clientId },
    );
    assert.equal(resourceServer.jwksUri, jwks.url("/bookings.json"));
    const listed = await operatorCall<{ resourceServers: Array<{ clientId: string; jwksUri?: string }> }>(
      baseUrl,
      "ListResourceServers",
      { limit: 1000 },
    );
    assert.equal(
      listed.resourceServers.find((s) => s.clientId === server.clientId)?.jwksUri,
      jwks.url("/bookings.json"),
    );

    const token = await tokenFor(server);
    const reply = await introspect(baseUrl, token, key, server.clientId);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.equal(reply.body.active, true);
    const grpc = grpcClients(baseUrl);
    try {
      const one = await grpc.call("auth", "IntrospectToken", {
        token,
        clientAssertionType: ASSERTION_TYPE,
        clientAssertion: await assertion(key, server.clientId, ISSUER),
      });
      assert.ok(one.ok, JSON.stringify(one));
      assert.equal(one.response?.active, true);
      const stranger = await keyPair("EdDSA");
      assertGrpcFailure(
        await grpc.call("auth", "IntrospectToken", {
          token,
          clientAssertionType: ASSERTION_TYPE,
          clientAssertion: await assertion(stranger, server.clientId, ISSUER),
        }),
        GRPC.UNAUTHENTICATED,
        "RESOURCE_SERVER_AUTHENTICATION_FAILED",
      );
    } finally {
      grpc.close();
    }
  });

  test("a key rotated at the URL (a new kid) is picked up by the unknown-kid refetch", async () => {
    const [first, next] = [await keyPair("EdDSA"), await keyPair("ES256")];
    const server = await serverAt("/rotated.json", [first]);
    const token = await tokenFor(server);
    assert.equal((await introspect(baseUrl, token, first, server.clientId)).body.active, true);
    const fetched = jwks.requests("/rotated.json");
    serve("/rotated.json", [next]);
    await sleep(COOLDOWN_MS + 100); // past the cooldown, within the held set's life
    const rotated = await introspect(baseUrl, token, next, server.clientId);
    assert.equal(rotated.body.active, true, JSON.stringify(rotated.body));
    assert.equal(jwks.requests("/rotated.json"), fetched + 1, "one refetch, for the unknown kid");
  });

  test("an unusable URL is refused at registration (400 naming jwksUri) and nothing is registered or changed", async () => {
    jwks.answers.set("/broken.json", { status: 500, body: "{}" });
    jwks.answers.set("/private.json", { body: JSON.stringify({ keys: [{ kty: "oct", k: "c2VjcmV0" }] }) });
    const before = await operatorCall<{ totalCount: number }>(baseUrl, "ListResourceServers", {});
    const audience = audienceOf("refused");
    for (const jwksUri of [jwks.url("/broken.json"), jwks.url("/private.json"), "http://example.com/jwks.json"])
      await assert.rejects(
        operatorCall(baseUrl, "CreateResourceServer", { name: "Refused", audiences: [audience], jwksUri }),
        /failed with 400: .*"jwksUri"/,
        jwksUri,
      );
    const after = await operatorCall<{ totalCount: number }>(baseUrl, "ListResourceServers", {});
    assert.equal(after.totalCount, before.totalCount, "no server was registered");
    await operatorCall(baseUrl, "CreateResourceServer", { name: "Free", audiences: [audience] });

    const key = await keyPair("EdDSA");
    const server = await createServer(baseUrl, "Inline", inline(key));
    await assert.rejects(
      setServerKeys(baseUrl, server.clientId, { jwksUri: jwks.url("/broken.json") }),
      /failed with 400/,
    );
    await assert.rejects(
      setServerKeys(baseUrl, server.clientId, { ...inline(key), jwksUri: jwks.url("/bookings.json") }),
      /failed with 400: .*both given/,
    );
    await assert.rejects(setServerKeys(baseUrl, server.clientId, {}), /failed with 400: .*neither given/);
    assert.equal((await introspect(baseUrl, await tokenFor(server), key, server.clientId)).body.active, true);
  });

  test("a URL that fails once the held set expired refuses the assertion (401 invalid_client), the reason in the log", async () => {
    const key = await keyPair("EdDSA");
    const server = await serverAt("/fading.json", [key]);
    const token = await tokenFor(server);
    assert.equal((await introspect(baseUrl, token, key, server.clientId)).body.active, true);
    jwks.answers.set("/fading.json", { status: 503, body: "down" });
    await sleep(MAX_AGE_MS + 200);
    const refused = await introspect(baseUrl, token, key, server.clientId);
    assertOAuthError(refused, 401, "RESOURCE_SERVER_AUTHENTICATION_FAILED", "invalid_client");
    assert.match(running.logs(), /"refusalReason":"assertion key set unavailable: jwks_uri [^"]+"/);
  });

  test("inline keys to a URL, to another URL and back: each switch refuses the former keys at once", async () => {
    const [a, b, c] = [await keyPair("EdDSA"), await keyPair("ES256"), await keyPair("EdDSA")];
    serve("/switch-b.json", [b]);
    serve("/switch-c.json", [c]);
    const server = await createServer(baseUrl, "Switching", inline(a));
    const token = await tokenFor(server);
    const active = async (by: KeyPair) => (await introspect(baseUrl, token, by, server.clientId)).status === 200;
    const steps: Array<[{ jwks?: string; jwksUri?: string }, KeyPair, KeyPair]> = [
      [{ jwksUri: jwks.url("/switch-b.json") }, b, a],
      [{ jwksUri: jwks.url("/switch-c.json") }, c, b],
      [inline(a), a, c],
    ];
    for (const [keys, now, former] of steps) {
      const answer = await setServerKeys(baseUrl, server.clientId, keys);
      assert.deepEqual(answer.keyIds, [now.jwk.kid]);
      assert.equal(answer.jwksUri, keys.jwksUri);
      assert.equal(await active(former), false, `former key refused after ${JSON.stringify(keys).slice(0, 60)}`);
      assert.equal(await active(now), true);
    }
  });
});

describe(
  "resource-server jwks_uri across two instances",
  { skip: !isPostgres && "two instances need a shared Postgres and Redis" },
  () => {
    let instances: Awaited<ReturnType<typeof startTwoTokenServices>> | undefined;
    let jwks: JwksServer;
    before(async () => {
      jwks = await startJwksServer();
      instances = await startTwoTokenServices(JWKS_URI_ENV);
    });
    after(async () => {
      await instances?.stop();
      await jwks?.close();
    });

    test("a move to another URL through B is seen on A by the very next request", async () => {
      const { a, b } = instances!;
      const tenant = await newTenant(a.baseUrl);
      const [first, second] = [await keyPair("EdDSA"), await keyPair("ES256")];
      const served = (keys: JWK[]) => ({ body: JSON.stringify({ keys }) });
      jwks.answers.set("/one.json", served([first.jwk]));
      jwks.answers.set("/two.json", served([second.jwk]));
      const server = await createServer(b.baseUrl, "Bookings", { jwksUri: jwks.url("/one.json") });
      const token = await accessTokenOf(a.baseUrl, tenant.admin, { resource: server.audiences[0]! });
      assert.equal((await introspect(a.baseUrl, token, first, server.clientId)).body.active, true, "A holds the set");
      await setServerKeys(b.baseUrl, server.clientId, { jwksUri: jwks.url("/two.json") });
      assertOAuthError(
        await introspect(a.baseUrl, token, first, server.clientId),
        401,
        "RESOURCE_SERVER_AUTHENTICATION_FAILED",
        "invalid_client",
      );
      assert.equal((await introspect(a.baseUrl, token, second, server.clientId)).body.active, true);
    });
  },
);
