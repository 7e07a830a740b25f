// The service with a standard OAuth client library, unmodified: openid-client v6 (oauth4webapi
// underneath). Client credentials with client_secret_basic and client_secret_post, token
// exchange through genericGrantRequest, refresh, introspection, RFC 8414 discovery, and DPoP
// (RFC 9449: getDPoPHandle, with its own nonce retry, then fetchProtectedResource).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as client from "openid-client";
import { calculateJwkThumbprint, createRemoteJWKSet, exportJWK, jwtVerify } from "jose";
import { operatorCall, type RunningService } from "../helpers/service.js";
import {
  AUDIENCE,
  disposeService,
  GRANT_EXCHANGE,
  INTROSPECT_PATH,
  ISSUER,
  newApiUser,
  newTenant,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TMC_ADMIN_SCOPES,
  TOKEN_PATH,
  TYPE_ACCESS_TOKEN,
  type Client,
} from "../helpers/token-kit.js";

let running: RunningService;
let baseUrl: string;
let admin: Client;
let actor: Client;

before(async () => {
  running = await startTokenService({ env: ROOMY_RATE_LIMITS });
  baseUrl = running.baseUrl;
  const tenant = await newTenant(baseUrl);
  admin = tenant.admin;
  actor = await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN");
});

after(async () => {
  await disposeService(running);
});

/**
 * The issuer identifier is http://auth.test (TOKEN_ISSUER), which does not resolve here, so the
 * metadata a deployment would publish is given by hand with the endpoints at the test address.
 */
function configuration(who: Client, auth: "basic" | "post", secret = who.clientSecret): client.Configuration {
  const server: client.ServerMetadata = {
    issuer: ISSUER,
    token_endpoint: `${baseUrl}${TOKEN_PATH}`,
    introspection_endpoint: `${baseUrl}${INTROSPECT_PATH}`,
    jwks_uri: `${baseUrl}/.well-known/jwks.json`,
  };
  const config = new client.Configuration(
    server,
    who.clientId,
    undefined,
    auth === "basic" ? client.ClientSecretBasic(secret) : client.ClientSecretPost(secret),
  );
  client.allowInsecureRequests(config);
  return config;
}

async function verify(token: string) {
  const { payload } = await jwtVerify(token, createRemoteJWKSet(new URL(`${baseUrl}/.well-known/jwks.json`)), {
    issuer: ISSUER,
    audience: AUDIENCE,
    typ: "at+jwt",
    algorithms: ["EdDSA"],
  });
  return payload;
}

describe("openid-client", () => {
  for (const auth of ["basic", "post"] as const) {
    test(`clientCredentialsGrant with ClientSecret${auth === "basic" ? "Basic" : "Post"}`, async () => {
      const tokens = await client.clientCredentialsGrant(configuration(admin, auth));
      assert.equal(tokens.token_type, "bearer", "oauth4webapi lower-cases token_type");
      assert.equal(tokens.expires_in, 3600);
      const remaining = tokens.expiresIn()!;
      assert.ok(remaining > 3590 && remaining <= 3600, `expiresIn() ${remaining}`);
      assert.equal(tokens.refresh_token, undefined);
      assert.deepEqual(tokens.scope!.split(" ").sort(), [...TMC_ADMIN_SCOPES].sort());
      const claims = await verify(tokens.access_token);
      assert.equal(claims.sub, admin.clientId);
    });

    test(`clientCredentialsGrant with a scope, ClientSecret${auth === "basic" ? "Basic" : "Post"}`, async () => {
      const tokens = await client.clientCredentialsGrant(configuration(admin, auth), { scope: "users:read openid" });
      assert.equal(tokens.scope, "users:read openid");
    });

    test(`a wrong secret surfaces as ResponseBodyError invalid_client (${auth})`, async () => {
      await assert.rejects(
        client.clientCredentialsGrant(configuration(admin, auth, "wrong-secret")),
        (error: unknown) => {
          assert.ok(error instanceof client.ResponseBodyError, `got ${String(error)}`);
          assert.equal(error.error, "invalid_client");
          assert.equal(error.status, 403);
          assert.equal(typeof error.error_description, "string");
          return true;
        },
      );
    });
  }

  test("an invalid scope surfaces as ResponseBodyError invalid_scope", async () => {
    await assert.rejects(
      client.clientCredentialsGrant(configuration(admin, "basic"), { scope: "nope" }),
      (error: unknown) => {
        assert.ok(error instanceof client.ResponseBodyError);
        assert.equal(error.error, "invalid_scope");
        assert.equal(error.status, 400);
        return true;
      },
    );
  });

  test("genericGrantRequest performs a token exchange; refreshTokenGrant rotates the refresh token", async () => {
    const subject = await client.clientCredentialsGrant(configuration(admin, "post"));
    const config = configuration(actor, "basic");
    const exchanged = await client.genericGrantRequest(config, GRANT_EXCHANGE, {
      subject_token: subject.access_token,
      subject_token_type: TYPE_ACCESS_TOKEN,
    });
    assert.equal(exchanged.issued_token_type, TYPE_ACCESS_TOKEN);
    assert.equal(typeof exchanged.refresh_token, "string");
    const claims = await verify(exchanged.access_token);
    assert.equal(claims.sub, admin.clientId);
    assert.deepEqual(claims.act, { sub: actor.clientId });

    const refreshed = await client.refreshTokenGrant(config, exchanged.refresh_token!);
    assert.notEqual(refreshed.refresh_token, exchanged.refresh_token);
    assert.equal((await verify(refreshed.access_token)).sub, admin.clientId);

    await assert.rejects(client.refreshTokenGrant(config, exchanged.refresh_token!), (error: unknown) => {
      assert.ok(error instanceof client.ResponseBodyError);
      assert.equal(error.error, "invalid_grant");
      return true;
    });
  });

  test("a token exchange asking for a wider scope surfaces as invalid_scope", async () => {
    const subject = await client.clientCredentialsGrant(configuration(admin, "post"), { scope: "users:read" });
    await assert.rejects(
      client.genericGrantRequest(configuration(actor, "post"), GRANT_EXCHANGE, {
        subject_token: subject.access_token,
        subject_token_type: TYPE_ACCESS_TOKEN,
        scope: "users:read api-users",
      }),
      (error: unknown) => {
        assert.ok(error instanceof client.ResponseBodyError);
        assert.equal(error.error, "invalid_scope");
        return true;
      },
    );
  });

  test("tokenIntrospection (RFC 7662) reports an issued token active, garbage inactive", async () => {
    const tokens = await client.clientCredentialsGrant(configuration(admin, "basic"));
    const config = configuration(actor, "basic");
    const active = await client.tokenIntrospection(config, tokens.access_token);
    assert.equal(active.active, true);
    assert.equal(active.client_id, admin.clientId);
    assert.equal(active.sub, admin.clientId);
    assert.equal(active.iss, ISSUER);
    assert.equal(typeof active.exp, "number");
    const inactive = await client.tokenIntrospection(config, "garbage");
    assert.equal(inactive.active, false);
  });

  test("default discovery (OpenID Connect, /.well-known/openid-configuration) finds the same metadata and works for client credentials", async () => {
    const asked: string[] = [];
    const reroute: client.CustomFetch = (url, options) => {
      asked.push(new URL(url).pathname);
      return fetch(url.replace(ISSUER, baseUrl), options as RequestInit);
    };
    const config = await client.discovery(
      new URL(ISSUER),
      admin.clientId,
      undefined,
      client.ClientSecretBasic(admin.clientSecret),
      {
        execute: [client.allowInsecureRequests],
        [client.customFetch]: reroute,
      },
    );
    assert.deepEqual(asked, ["/.well-known/openid-configuration"]);
    const meta = config.serverMetadata();
    assert.equal(meta.issuer, ISSUER);
    assert.equal(meta.token_endpoint, `${ISSUER}${TOKEN_PATH}`);
    assert.equal(meta.authorization_endpoint, undefined, "no endpoint that does not exist is advertised");
    // OpenID Provider metadata requires this field (with RS256); no ID token is ever issued.
    assert.deepEqual(meta.id_token_signing_alg_values_supported, ["RS256"]);
    const oauth = (await (await fetch(`${baseUrl}/.well-known/oauth-authorization-server`)).json()) as object;
    assert.deepEqual(
      await (await fetch(`${baseUrl}/.well-known/openid-configuration`)).json(),
      { ...oauth, id_token_signing_alg_values_supported: ["RS256"] },
      "the same metadata at both addresses, in the OpenID profile at the OpenID one",
    );
    const tokens = await client.clientCredentialsGrant(config, { scope: "openid users:read" });
    assert.equal(tokens.scope, "openid users:read");
    assert.equal((await verify(tokens.access_token)).sub, admin.clientId);
  });

  test("DPoP (getDPoPHandle): a client that must use DPoP gets a DPoP-bound token after the nonce retry, and calls a protected REST path with it", async () => {
    const bound = await newApiUser(baseUrl, admin.tmcId, "TMC_ADMIN");
    await operatorCall(baseUrl, "SetApiUserDpopPolicy", {
      tmcId: admin.tmcId,
      clientId: bound.clientId,
      dpopBoundAccessTokens: true,
    });
    const config = configuration(bound, "basic");
    const answers: string[] = [];
    config[client.customFetch] = async (url, options) => {
      const response = await fetch(url, options as RequestInit);
      answers.push(`${new URL(url).pathname} ${response.status}`);
      return response;
    };
    // Without a proof, refused (RFC 9449 5.2: the policy requires one).
    await assert.rejects(client.clientCredentialsGrant(config), (error: unknown) => {
      assert.ok(error instanceof client.ResponseBodyError, String(error));
      assert.equal(error.error, "invalid_request");
      return true;
    });
    const keyPair = await client.randomDPoPKeyPair("ES256");
    const DPoP = client.getDPoPHandle(config, keyPair);
    answers.length = 0;
    const tokens = await client.clientCredentialsGrant(config, { scope: "api-users" }, { DPoP });
    assert.deepEqual(answers, [`${TOKEN_PATH} 400`, `${TOKEN_PATH} 200`], "the first proof had no nonce: retried once");
    assert.equal(tokens.token_type, "dpop");
    const claims = await verify(tokens.access_token);
    assert.deepEqual(claims.cnf, { jkt: await calculateJwkThumbprint(await exportJWK(keyPair.publicKey)) });

    const api = new URL(`${baseUrl}/v2/api-users`);
    const listed = await client.fetchProtectedResource(config, tokens.access_token, api, "GET", undefined, undefined, {
      DPoP,
    });
    assert.equal(listed.status, 200, await listed.clone().text());
    assert.ok(((await listed.json()) as { totalCount: number }).totalCount >= 1);
    // The same token without its proof (as a bearer token): refused.
    const asBearer = await fetch(api, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    assert.equal(asBearer.status, 401);
  });

  test("discovery of the RFC 8414 metadata (issuer http://auth.test reached through customFetch)", async () => {
    const reroute: client.CustomFetch = (url, options) => fetch(url.replace(ISSUER, baseUrl), options as RequestInit);
    const config = await client.discovery(
      new URL(ISSUER),
      admin.clientId,
      undefined,
      client.ClientSecretBasic(admin.clientSecret),
      {
        algorithm: "oauth2",
        execute: [client.allowInsecureRequests],
        [client.customFetch]: reroute,
      },
    );
    const meta = config.serverMetadata();
    assert.equal(meta.issuer, ISSUER);
    assert.equal(meta.token_endpoint, `${ISSUER}${TOKEN_PATH}`);
    const tokens = await client.clientCredentialsGrant(config);
    assert.equal((await verify(tokens.access_token)).sub, admin.clientId);
  });
});
