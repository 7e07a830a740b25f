// private_key_jwt (RFC 7523 2.2): API users that registered public keys get tokens with client
// assertions from the client libraries their users have, unmodified (oauth4webapi, openid-client,
// authlib's PrivateKeyJWT), over REST, gRPC and Connect; and every assertion an attacker could bring is
// refused with its reason in the log, never the assertion.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { exportJWK, exportPKCS8, generateKeyPair, type JWK } from "jose";
import * as oauth from "oauth4webapi";
import * as client from "openid-client";
import { AuthService } from "../../gen/travel/auth/v2/auth_pb.js";
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
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";
import { dropStorage, operatorCall, type RunningService } from "../helpers/service.js";
import {
  assertGrpcFailure,
  assertOAuthError,
  GRPC,
  disposeService,
  grpcClients,
  newApiUser,
  newTenant,
  postForm,
  ROOMY_RATE_LIMITS,
  startServiceAtOwnAddress,
  startTokenService,
  TOKEN_PATH,
  type Client,
} from "../helpers/token-kit.js";

/** A JWS by hand (for `alg: none` and HMAC, which jose will not make with these keys). */
function handMade(header: object, payload: object, sign: (input: string) => string): string {
  const input = `${Buffer.from(JSON.stringify(header)).toString("base64url")}.${Buffer.from(JSON.stringify(payload)).toString("base64url")}`;
  return `${input}.${sign(input)}`;
}

describe(`private_key_jwt at the token endpoint (${backend})`, () => {
  let running: RunningService;
  let baseUrl: string;
  let admin: Client;
  let tmcId: string;
  const keys: Record<string, KeyPair> = {};
  let clientId: string;

  before(async () => {
    running = await startServiceAtOwnAddress();
    baseUrl = running.baseUrl;
    const tenant = await newTenant(baseUrl);
    admin = tenant.admin;
    tmcId = tenant.tmcId;
    for (const alg of ["EdDSA", "ES256", "RS256", "PS256"] as const) keys[alg] = await keyPair(alg);
    const user = await newApiUser(baseUrl, tmcId, "TMC_ADMIN");
    clientId = user.clientId;
    const registered = await setKeys(
      baseUrl,
      admin,
      clientId,
      Object.values(keys).map((k) => k.jwk),
    );
    assert.equal(registered.status, 200, await registered.clone().text());
    assert.deepEqual((await registered.json()) as object, {
      clientId,
      keyIds: Object.values(keys).map((k) => k.jwk.kid),
    });
    // The former secret is gone: a user with keys has no secret at all.
    const bySecret = await postForm(baseUrl, TOKEN_PATH, {
      grant_type: "client_credentials",
      client_id: clientId,
      client_secret: user.clientSecret,
    });
    assert.equal(bySecret.status, 403, "the secret it had before is refused");
  });
  after(() => disposeService(running));

  test("the metadata lists private_key_jwt and its algorithms (none and HMAC are not among them)", async () => {
    const metadata = (await (await fetch(`${baseUrl}/.well-known/oauth-authorization-server`)).json()) as any;
    assert.ok(metadata.token_endpoint_auth_methods_supported.includes("private_key_jwt"));
    assert.deepEqual(metadata.token_endpoint_auth_signing_alg_values_supported, [
      "EdDSA",
      "Ed25519",
      "ES256",
      "PS256",
      "RS256",
    ]);
  });

  test("oauth4webapi: PrivateKeyJwt, client credentials, each allowed algorithm", async () => {
    const issuer = new URL(baseUrl);
    const options = { [oauth.allowInsecureRequests]: true };
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: "oauth2", ...options }),
    );
    for (const key of Object.values(keys)) {
      const auth = oauth.PrivateKeyJwt({ key: key.privateKey, kid: key.jwk.kid });
      const response = await oauth.clientCredentialsGrantRequest(
        as,
        { client_id: clientId },
        auth,
        new URLSearchParams({ scope: "users:read" }),
        options,
      );
      const tokens = await oauth
        .processClientCredentialsResponse(as, { client_id: clientId }, response)
        .catch((error: unknown) => assert.fail(`${key.alg}: ${String(error)}; ${refusalsIn(running.logs())}`));
      assert.equal(tokens.token_type.toLowerCase(), "bearer", key.alg);
      assert.equal(tokens.scope, "users:read");
    }
  });

  test("openid-client: PrivateKeyJwt with discovery, client credentials and introspection", async () => {
    const key = keys.ES256!;
    const config = await client.discovery(
      new URL(baseUrl),
      clientId,
      undefined,
      client.PrivateKeyJwt({ key: key.privateKey, kid: key.jwk.kid }),
      { execute: [client.allowInsecureRequests] },
    );
    const tokens = await client.clientCredentialsGrant(config, { scope: "users:read" });
    assert.equal(tokens.scope, "users:read");
    const introspected = await client.tokenIntrospection(config, tokens.access_token);
    assert.equal(introspected.active, true);
    assert.equal(introspected.client_id, clientId);
  });

  test("authlib (python3-authlib): PrivateKeyJWT builds the request body; the token comes back", async () => {
    const pem = await exportPKCS8(keys.RS256!.privateKey);
    // authlib's PrivateKeyJWT as its requests integration calls it (auth, method, uri, headers,
    // body); the body is sent with urllib (Debian's python3 has no requests module). authlib's
    // assertions live an hour by default: its documented `claims` bring exp within 5 minutes.
    const script = [
      "import json, sys, time, urllib.request",
      "from authlib.oauth2.rfc7523 import PrivateKeyJWT",
      "class Auth: pass",
      "auth = Auth(); auth.client_id = sys.argv[1]; auth.client_secret = sys.stdin.read()",
      "url = sys.argv[2]",
      "_, headers, body = PrivateKeyJWT(url, headers={'kid': sys.argv[3]}, claims={'exp': int(time.time()) + 60})(auth, 'POST', url, {}, 'grant_type=client_credentials')",
      "request = urllib.request.Request(url, data=body.encode(), headers={'Content-Type': 'application/x-www-form-urlencoded'})",
      "print(json.load(urllib.request.urlopen(request))['token_type'])",
    ].join("\n");
    // Not spawnSync: the service answering python runs in this process.
    const python = spawn(
      "/usr/bin/python3",
      ["-c", script, clientId, `${baseUrl}${TOKEN_PATH}`, keys.RS256!.jwk.kid!],
      {
        timeout: 30_000,
      },
    );
    python.stdin.end(pem);
    let [stdout, stderr] = ["", ""];
    python.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    python.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const [status] = (await once(python, "close")) as [number | null];
    assert.equal(status, 0, `${stderr.slice(-300)}; ${refusalsIn(running.logs())}`);
    assert.equal(stdout.trim(), "Bearer");
  });

  test("gRPC (@grpc/grpc-js): FetchOauth2Token with a client assertion", async () => {
    const grpc = grpcClients(baseUrl);
    try {
      const request = (jwt: string) => ({
        grantType: "client_credentials",
        clientAssertionType: ASSERTION_TYPE,
        clientAssertion: jwt,
      });
      const jwt = await assertion(keys.EdDSA!, clientId, baseUrl);
      const outcome = await grpc.call("auth", "FetchOauth2Token", request(jwt));
      assert.ok(outcome.ok, JSON.stringify(outcome));
      assert.equal(outcome.response?.tokenType, "Bearer");
      assertGrpcFailure(
        await grpc.call("auth", "FetchOauth2Token", request(jwt)),
        GRPC.PERMISSION_DENIED,
        "INVALID_CLIENT",
      );
      const elsewhere = await assertion(keys.EdDSA!, clientId, "https://elsewhere.example");
      assertGrpcFailure(
        await grpc.call("auth", "FetchOauth2Token", request(elsewhere)),
        GRPC.PERMISSION_DENIED,
        "INVALID_CLIENT",
      );
    } finally {
      grpc.close();
    }
  });

  test("Connect (@connectrpc/connect-node): a token, then introspection, each with its own assertion; a replay refused", async () => {
    const auth = createClient(AuthService, createConnectTransport({ baseUrl, httpVersion: "1.1" }));
    const jwt = await assertion(keys.ES256!, clientId, baseUrl);
    const issued = await auth.fetchOauth2Token({
      grantType: "client_credentials",
      clientAssertionType: ASSERTION_TYPE,
      clientAssertion: jwt,
    });
    assert.equal(issued.tokenType, "Bearer");
    const introspected = await auth.introspectToken({
      token: issued.accessToken,
      clientAssertionType: ASSERTION_TYPE,
      clientAssertion: await assertion(keys.EdDSA!, clientId, baseUrl),
    });
    assert.equal(introspected.active, true);
    assert.equal(introspected.clientId, clientId);
    await assert.rejects(
      auth.fetchOauth2Token({
        grantType: "client_credentials",
        clientAssertionType: ASSERTION_TYPE,
        clientAssertion: jwt,
      }),
      (error: unknown) => error instanceof ConnectError && error.code === Code.PermissionDenied,
    );
    assert.match(running.logs(), /assertion jti already used/);
  });

  describe("attacks: each refused as invalid_client, the reason in the log, never the assertion", () => {
    /** Posts `jwt`, expects 403 invalid_client and a log line with `reason`. */
    async function refused(jwt: string, reason: RegExp) {
      const res = await tokenWith(baseUrl, jwt);
      assertOAuthError(res, 403, "INVALID_CLIENT", "invalid_client");
      const logs = running.logs();
      assert.match(logs, reason);
      const signature = jwt.split(".")[2]!;
      assert.ok(
        !logs.includes(jwt) && (signature === "" || !logs.includes(signature)),
        "the assertion is never logged",
      );
    }

    test("a replayed assertion: the first use works, the second is refused", async () => {
      const jwt = await assertion(keys.EdDSA!, clientId, `${baseUrl}${TOKEN_PATH}`);
      assert.equal((await tokenWith(baseUrl, jwt)).status, 200);
      await refused(jwt, /assertion jti already used/);
    });

    test("a wrong audience", () =>
      assertion(keys.EdDSA!, clientId, "https://other-server.example/token").then((jwt) =>
        refused(jwt, /assertion claim aud/),
      ));

    test("exp more than 5 minutes ahead", async () => {
      const jwt = await assertion(keys.EdDSA!, clientId, baseUrl, { exp: Math.floor(Date.now() / 1000) + 3600 });
      await refused(jwt, /assertion exp more than 300 s ahead/);
    });

    test("an expired assertion", async () => {
      const jwt = await assertion(keys.EdDSA!, clientId, baseUrl, { exp: Math.floor(Date.now() / 1000) - 120 });
      await refused(jwt, /assertion expired/);
    });

    test("iss or sub not the client", async () => {
      const jwt = await assertion(keys.EdDSA!, clientId, baseUrl, { iss: "someone-else" });
      await refused(jwt, /assertion claim iss/);
    });

    test("alg: none", async () => {
      const now = Math.floor(Date.now() / 1000);
      const jwt = handMade(
        { alg: "none" },
        { iss: clientId, sub: clientId, aud: baseUrl, jti: crypto.randomUUID(), exp: now + 60 },
        () => "",
      );
      await refused(jwt, /assertion algorithm not allowed: none/);
    });

    test("HS256 with the registered public key as the HMAC secret", async () => {
      const now = Math.floor(Date.now() / 1000);
      const secret = JSON.stringify(keys.RS256!.jwk);
      const jwt = handMade(
        { alg: "HS256", kid: keys.RS256!.jwk.kid },
        { iss: clientId, sub: clientId, aud: baseUrl, jti: crypto.randomUUID(), exp: now + 60 },
        (input) => crypto.createHmac("sha256", secret).update(input).digest("base64url"),
      );
      await refused(jwt, /assertion algorithm not allowed: HS256/);
    });

    test("signed by a key that is not registered (under a registered kid, and under none)", async () => {
      const stranger = await keyPair("EdDSA", keys.EdDSA!.jwk.kid as ReturnType<typeof crypto.randomUUID>);
      await refused(await assertion(stranger, clientId, baseUrl), /assertion signature does not verify/);
      const unnamed = await keyPair("ES256");
      await refused(await assertion(unnamed, clientId, baseUrl), /assertion signed by no registered key/);
    });

    test("an assertion for a client that registered no keys", async () => {
      const other = await newApiUser(baseUrl, tmcId, "TMC_ADMIN");
      await refused(
        await assertion(keys.EdDSA!, other.clientId, baseUrl),
        /assertion from a client with no registered keys/,
      );
    });

    test("a secret and an assertion together, or another assertion type: 400 invalid_request", async () => {
      const jwt = await assertion(keys.EdDSA!, clientId, baseUrl);
      const both = await tokenWith(baseUrl, jwt, { client_secret: "x" });
      assertOAuthError(both, 400, "INVALID_REQUEST", "invalid_request");
      const otherType = await postForm(baseUrl, TOKEN_PATH, {
        grant_type: "client_credentials",
        client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:saml2-bearer",
        client_assertion: jwt,
      });
      assertOAuthError(otherType, 400, "INVALID_REQUEST", "invalid_request");
    });
  });

  test("registration refuses a private key, HMAC keys and short RSA keys", async () => {
    const { privateKey } = await generateKeyPair("EdDSA", { extractable: true });
    const rsa1024 = crypto.generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ format: "jwk" });
    for (const jwk of [await exportJWK(privateKey), { kty: "oct", k: "c2VjcmV0" }, rsa1024]) {
      const res = await setKeys(baseUrl, admin, clientId, [jwk as JWK]);
      assert.equal(res.status, 400, JSON.stringify(jwk.kty));
    }
  });

  test("the operator CLI's RPC registers keys too (SetApiUserKeys)", async () => {
    const user = await newApiUser(baseUrl, tmcId, "TMC_ADMIN");
    const key = await keyPair("EdDSA");
    const answer = await operatorCall<{ keyIds: string[] }>(baseUrl, "SetApiUserKeys", {
      tmcId,
      clientId: user.clientId,
      jwks: JSON.stringify({ keys: [key.jwk] }),
    });
    assert.deepEqual(answer.keyIds, [key.jwk.kid]);
    assert.equal((await tokenWith(baseUrl, await assertion(key, user.clientId, baseUrl))).status, 200);
  });
});

describe(
  "key rotation across two instances",
  { skip: !isPostgres && "two instances need a shared Postgres and Redis" },
  () => {
    let storage: Storage;
    let a: RunningService;
    let b: RunningService;
    before(async () => {
      storage = newStorage();
      const env = { ...ROOMY_RATE_LIMITS, TOKEN_ISSUER: "http://auth.test" };
      [a, b] = await Promise.all([startTokenService({ storage, env }), startTokenService({ storage, env })]);
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      if (storage) await dropStorage(storage);
    });

    test("a key removed from the set through B is refused on A by the very next request", async () => {
      const { admin, tmcId } = await newTenant(a.baseUrl);
      const user = await newApiUser(a.baseUrl, tmcId, "TMC_ADMIN");
      const [first, second] = [await keyPair("EdDSA"), await keyPair("ES256")];
      assert.equal((await setKeys(b.baseUrl, admin, user.clientId, [first.jwk, second.jwk])).status, 200);
      const audience = "http://auth.test";
      assert.equal(
        (await tokenWith(a.baseUrl, await assertion(first, user.clientId, audience))).status,
        200,
        "A holds the set",
      );
      assert.equal((await setKeys(b.baseUrl, admin, user.clientId, [second.jwk])).status, 200);
      const removed = await tokenWith(a.baseUrl, await assertion(first, user.clientId, audience));
      assertOAuthError(removed, 403, "INVALID_CLIENT", "invalid_client");
      assert.equal((await tokenWith(a.baseUrl, await assertion(second, user.clientId, audience))).status, 200);
    });
  },
);

describe("Redis flushed mid-run", { skip: !isPostgres && "Redis runs with the postgres backend" }, () => {
  let redis: PrivateRedis;
  let running: RunningService;
  before(async () => {
    redis = await startPrivateRedis();
    running = await startTokenService({
      env: { ...ROOMY_RATE_LIMITS, REDIS_URL: redis.url, TOKEN_ISSUER: "http://auth.test" },
    });
  });
  after(async () => {
    await disposeService(running);
    await redis?.stop();
  });

  test("no assertion used before the flush is accepted after it; the refusal is logged", async () => {
    const { admin, tmcId } = await newTenant(running.baseUrl);
    const user = await newApiUser(running.baseUrl, tmcId, "TMC_ADMIN");
    const key = await keyPair("EdDSA");
    assert.equal((await setKeys(running.baseUrl, admin, user.clientId, [key.jwk])).status, 200);
    const jwt = await assertion(key, user.clientId, "http://auth.test");
    assert.equal((await tokenWith(running.baseUrl, jwt)).status, 200);
    await redis.command(["FLUSHALL"]);
    const replayed = await tokenWith(running.baseUrl, jwt);
    assertOAuthError(replayed, 403, "INVALID_CLIENT", "invalid_client");
    assert.match(running.logs(), /replay cache found emptied/);
  });
});
