// private_key_jwt for resource servers (RFC 7523 2.2): the operator registers a resource server's
// public keys (CreateResourceServer with jwks, or SetResourceServerKeys); the server then has no
// secret and authenticates with client assertions on every call it makes — introspection over REST
// and gRPC (@grpc/grpc-js, one by one and in batches), revocation, SET polling (RFC 8936) and the
// change stream (Connect). A replayed assertion, one signed by an unregistered key and the secret
// it had before are refused, each with its reason in the log; a key removed through instance B is
// refused on instance A by the very next request.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { exportJWK, generateKeyPair, type JWK } from "jose";
import { AuthService } from "../../gen/travel/auth/v2/auth_pb.js";
import { assertion, ASSERTION_TYPE, keyPair, type KeyPair } from "../helpers/client-assertion-kit.js";
import { backend, isPostgres } from "../helpers/backend.js";
import { operatorCall, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  assertGrpcFailure,
  assertOAuthError,
  basicAuthorization,
  disposeService,
  GRPC,
  grpcClients,
  INTROSPECT_PATH,
  ISSUER,
  newTenant,
  postForm,
  postJson,
  registerResourceServer,
  ROOMY_RATE_LIMITS,
  startTokenService,
  startTwoTokenServices,
  type Tenant,
} from "../helpers/token-kit.js";

const REVOKE_PATH = "/v2/auth/revoke";
const POLL_PATH = "/v2/ssf/poll";

/** A resource server registered with keys: its client id and the keys' ids (no secret). */
interface KeyedServer {
  readonly clientId: string;
  readonly keyIds: string[];
  readonly audiences: string[];
}

const createWithKeys = (baseUrl: string, name: string, keys: readonly JWK[]) =>
  operatorCall<KeyedServer>(baseUrl, "CreateResourceServer", {
    name,
    audiences: [`https://${name.toLowerCase()}-${crypto.randomUUID()}.platform.test/api`],
    jwks: JSON.stringify({ keys }),
  });

const setServerKeys = (baseUrl: string, clientId: string, keys: readonly JWK[]) =>
  operatorCall<{ clientId: string; keyIds: string[] }>(baseUrl, "SetResourceServerKeys", {
    clientId,
    jwks: JSON.stringify({ keys }),
  });

/** The two form fields of private_key_jwt. */
const assertionFields = (jwt: string) => ({ client_assertion_type: ASSERTION_TYPE, client_assertion: jwt });

const introspect = (baseUrl: string, token: string, jwt: string) =>
  postForm(baseUrl, INTROSPECT_PATH, { token, ...assertionFields(jwt) });

describe(`private_key_jwt for resource servers (${backend})`, () => {
  let running: RunningService;
  let baseUrl: string;
  let tenant: Tenant;
  let key: KeyPair;
  let server: KeyedServer;
  /** A fresh assertion of `server` signed with `key` (or `by`), for `audience`. */
  const signed = (by: KeyPair = key, audience = ISSUER) => assertion(by, server.clientId, audience);
  const tokenForServer = () => accessTokenOf(baseUrl, tenant.admin, { resource: server.audiences[0]! });

  before(async () => {
    running = await startTokenService({ env: ROOMY_RATE_LIMITS });
    baseUrl = running.baseUrl;
    tenant = await newTenant(baseUrl);
    key = await keyPair("EdDSA");
    server = await createWithKeys(baseUrl, "Bookings", [key.jwk]);
  });
  after(() => disposeService(running));

  test("registered with keys, it has no secret: none is answered, and no secret authenticates it", async () => {
    assert.ok(!("clientSecret" in server), "no secret is shown, for there is none");
    assert.deepEqual(server.keyIds, [key.jwk.kid]);
    const { resourceServer } = await operatorCall<{ resourceServer: { keyIds: string[] } }>(
      baseUrl,
      "GetResourceServer",
      { clientId: server.clientId },
    );
    assert.deepEqual(resourceServer.keyIds, [key.jwk.kid], "the operator reads which keys it has");
    const token = await tokenForServer();
    for (const secret of ["x".repeat(43), crypto.randomUUID()]) {
      const reply = await postForm(
        baseUrl,
        INTROSPECT_PATH,
        { token },
        { authorization: basicAuthorization(server.clientId, secret) },
      );
      assertOAuthError(reply, 401, "RESOURCE_SERVER_AUTHENTICATION_FAILED", "invalid_client");
    }
  });

  test("the metadata lists private_key_jwt for introspection and revocation, with the algorithms", async () => {
    const metadata = (await (await fetch(`${baseUrl}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      string[]
    >;
    for (const endpoint of ["introspection", "revocation"]) {
      assert.ok(metadata[`${endpoint}_endpoint_auth_methods_supported`]!.includes("private_key_jwt"), endpoint);
      assert.deepEqual(metadata[`${endpoint}_endpoint_auth_signing_alg_values_supported`], [
        "EdDSA",
        "Ed25519",
        "ES256",
        "PS256",
        "RS256",
      ]);
    }
  });

  test("introspects over REST with an assertion whose aud is the issuer or the introspection endpoint", async () => {
    const token = await tokenForServer();
    for (const audience of [ISSUER, `${ISSUER}${INTROSPECT_PATH}`]) {
      const reply = await introspect(baseUrl, token, await signed(key, audience));
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      assert.equal(reply.body.active, true, audience);
      assert.equal(reply.body.client_id, tenant.admin.clientId);
    }
  });

  test("introspects over gRPC (@grpc/grpc-js): IntrospectToken and IntrospectTokens", async () => {
    const grpc = grpcClients(baseUrl);
    try {
      const token = await tokenForServer();
      const one = await grpc.call("auth", "IntrospectToken", {
        token,
        clientAssertionType: ASSERTION_TYPE,
        clientAssertion: await signed(),
      });
      assert.ok(one.ok, JSON.stringify(one));
      assert.equal(one.response?.active, true);
      const batch = await grpc.call("auth", "IntrospectTokens", {
        tokens: [token, "not-a-token"],
        clientAssertionType: ASSERTION_TYPE,
        clientAssertion: await signed(),
      });
      assert.ok(batch.ok, JSON.stringify(batch));
      assert.deepEqual(
        (batch.response?.results as Array<{ active: boolean }>).map((r) => r.active),
        [true, false],
      );
      const stranger = await keyPair("EdDSA");
      assertGrpcFailure(
        await grpc.call("auth", "IntrospectToken", {
          token,
          clientAssertionType: ASSERTION_TYPE,
          clientAssertion: await signed(stranger),
        }),
        GRPC.UNAUTHENTICATED,
        "RESOURCE_SERVER_AUTHENTICATION_FAILED",
      );
    } finally {
      grpc.close();
    }
  });

  test("polls its SETs (RFC 8936, REST) with the assertion in the body", async () => {
    const reply = await postJson(baseUrl, POLL_PATH, { returnImmediately: true, ...assertionFields(await signed()) });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.equal(typeof reply.body.sets, "object");
    const replayed = await postJson(baseUrl, POLL_PATH, { returnImmediately: true, ...assertionFields("x.y.z") });
    assertOAuthError(replayed, 401, "RESOURCE_SERVER_AUTHENTICATION_FAILED", "invalid_client");
  });

  test("opens the change stream (Connect) and receives its snapshot", async () => {
    const client = createClient(AuthService, createConnectTransport({ baseUrl, httpVersion: "1.1" }));
    const abort = new AbortController();
    const stream = client.watchCredentialChanges(
      { clientAssertionType: ASSERTION_TYPE, clientAssertion: await signed() },
      { signal: abort.signal },
    );
    try {
      for await (const event of stream) {
        assert.equal(event.event.case, "snapshot");
        break;
      }
    } finally {
      abort.abort();
    }
  });

  test("revokes an access token addressed to its audience (REST, aud the revocation endpoint): inactive at once; another audience's is left alone", async () => {
    const token = await tokenForServer();
    const others = await accessTokenOf(baseUrl, tenant.admin);
    for (const revoked of [token, others]) {
      const jwt = await signed(key, `${ISSUER}${REVOKE_PATH}`);
      const reply = await postForm(baseUrl, REVOKE_PATH, { token: revoked, ...assertionFields(jwt) });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
    }
    const after = await introspect(baseUrl, token, await signed());
    assert.deepEqual(after.body, { active: false }, "revoked on the spot");
    const own = await postForm(baseUrl, INTROSPECT_PATH, {
      token: others,
      client_id: tenant.admin.clientId,
      client_secret: tenant.admin.clientSecret,
    });
    assert.equal(own.body.active, true, "a token of the service's own audience is not the resource server's to revoke");
  });

  test("a replayed assertion is refused, the reason in the log and never the assertion", async () => {
    const token = await tokenForServer();
    const jwt = await signed();
    assert.equal((await introspect(baseUrl, token, jwt)).status, 200);
    const replayed = await introspect(baseUrl, token, jwt);
    assertOAuthError(replayed, 401, "RESOURCE_SERVER_AUTHENTICATION_FAILED", "invalid_client");
    const logs = running.logs();
    assert.match(logs, /"refusalReason":"assertion jti already used"/);
    assert.ok(!logs.includes(jwt.split(".")[2]!), "the assertion is never logged");
  });

  test("signed by a key that is not registered (under a registered kid, and under none), or for another audience: refused", async () => {
    const token = await tokenForServer();
    const impostor = await keyPair("EdDSA", key.jwk.kid);
    const unnamed = await keyPair("ES256");
    for (const [jwt, reason] of [
      [await signed(impostor), /assertion signature does not verify/],
      [await signed(unnamed), /assertion signed by no registered key/],
      [await signed(key, "https://elsewhere.example/introspect"), /assertion claim aud/],
    ] as const) {
      assertOAuthError(
        await introspect(baseUrl, token, jwt),
        401,
        "RESOURCE_SERVER_AUTHENTICATION_FAILED",
        "invalid_client",
      );
      assert.match(running.logs(), reason);
    }
  });

  test("keys set on a server that had a secret replace it; a secret rotation goes back to a secret and drops the keys", async () => {
    const audience = `https://invoices-${crypto.randomUUID()}.platform.test/api`;
    const withSecret = await registerResourceServer(baseUrl, "Invoices", [audience]);
    const token = await accessTokenOf(baseUrl, tenant.admin, { resource: audience });
    const bySecret = () =>
      postForm(
        baseUrl,
        INTROSPECT_PATH,
        { token },
        { authorization: basicAuthorization(withSecret.clientId, withSecret.clientSecret) },
      );
    assert.equal((await bySecret()).status, 200);
    const keys = await setServerKeys(baseUrl, withSecret.clientId, [key.jwk]);
    assert.deepEqual(keys.keyIds, [key.jwk.kid]);
    const trail = await operatorCall<{ events: Array<{ action: string; actor: string }> }>(baseUrl, "ListAuditEvents", {
      platform: true,
      clientId: withSecret.clientId,
      actions: ["RESOURCE_SERVER_KEYS_SET"],
    });
    assert.deepEqual(
      trail.events.map((e) => [e.action, e.actor]),
      [["RESOURCE_SERVER_KEYS_SET", "operator"]],
    );
    assertOAuthError(await bySecret(), 401, "RESOURCE_SERVER_AUTHENTICATION_FAILED", "invalid_client");
    const byKey = () => assertion(key, withSecret.clientId, ISSUER).then((jwt) => introspect(baseUrl, token, jwt));
    assert.equal((await byKey()).body.active, true);
    const rotated = await operatorCall<{ clientSecret: string }>(baseUrl, "RotateResourceServerSecret", {
      clientId: withSecret.clientId,
    });
    assertOAuthError(await byKey(), 401, "RESOURCE_SERVER_AUTHENTICATION_FAILED", "invalid_client");
    assert.match(running.logs(), /assertion from a client with no registered keys/);
    const again = await postForm(
      baseUrl,
      INTROSPECT_PATH,
      { token },
      { authorization: basicAuthorization(withSecret.clientId, rotated.clientSecret) },
    );
    assert.equal(again.body.active, true);
  });

  test("SetResourceServerKeys refuses a private key or a document that is not JSON (400 naming jwks); the keys stay", async () => {
    const { privateKey } = await generateKeyPair("EdDSA", { extractable: true });
    for (const jwks of [JSON.stringify({ keys: [await exportJWK(privateKey)] }), "{not json"])
      await assert.rejects(
        operatorCall(baseUrl, "SetResourceServerKeys", { clientId: server.clientId, jwks }),
        /failed with 400: .*"jwks"/,
      );
    assert.equal((await introspect(baseUrl, await tokenForServer(), await signed())).body.active, true);
  });
});

describe(
  "resource-server key rotation across two instances",
  { skip: !isPostgres && "two instances need a shared Postgres and Redis" },
  () => {
    let instances: Awaited<ReturnType<typeof startTwoTokenServices>> | undefined;
    before(async () => {
      instances = await startTwoTokenServices({ ...ROOMY_RATE_LIMITS, TOKEN_ISSUER: ISSUER });
    });
    after(() => instances?.stop());

    test("a key removed from the set through B is refused on A by the very next request", async () => {
      const { a, b } = instances!;
      const tenant = await newTenant(a.baseUrl);
      const [first, second] = [await keyPair("EdDSA"), await keyPair("ES256")];
      const server = await createWithKeys(b.baseUrl, "Bookings", [first.jwk, second.jwk]);
      const token = await accessTokenOf(a.baseUrl, tenant.admin, { resource: server.audiences[0]! });
      const onA = (by: KeyPair) =>
        assertion(by, server.clientId, ISSUER).then((jwt) => introspect(a.baseUrl, token, jwt));
      assert.equal((await onA(first)).body.active, true, "A holds the set");
      await setServerKeys(b.baseUrl, server.clientId, [second.jwk]);
      assertOAuthError(await onA(first), 401, "RESOURCE_SERVER_AUTHENTICATION_FAILED", "invalid_client");
      assert.equal((await onA(second)).body.active, true);
    });
  },
);
