// The client_credentials grant of POST /v2/auth/oauth2-token (spec 2.9, 2.10, 4.1, 5, 7) and of
// AuthService.FetchOauth2Token over grpc-js: client_secret_post and client_secret_basic, the
// response and its headers, the access token as an independent verifier sees it (RFC 9068, JWKS,
// RFC 8414 metadata), scopes per role, audiences, and the token-endpoint errors.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from "jose";
import { operatorCall, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  assertGrpcFailure,
  assertOAuthError,
  AUDIENCE,
  basicAuthorization,
  clientCredentials,
  COMPANY_ADMIN_SCOPES,
  disposeService,
  GRPC,
  grpcClients,
  ISSUER,
  newApiUser,
  newTenant,
  partsOf,
  percentEncodeAll,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TMC_ADMIN_SCOPES,
  TOKEN_PATH,
  type Client,
  type GrpcClients,
  type HttpReply,
  type Tenant,
} from "../helpers/token-kit.js";

const PARTNER_AUDIENCE = "https://partner.api.test/v1";

let running: RunningService;
let baseUrl: string;
let tenant: Tenant;
let admin: Client;
let companyAdmin: Client;
let grpcs: GrpcClients;

before(async () => {
  running = await startTokenService({ env: { ...ROOMY_RATE_LIMITS, ALLOWED_AUDIENCES: PARTNER_AUDIENCE } });
  baseUrl = running.baseUrl;
  tenant = await newTenant(baseUrl);
  admin = tenant.admin;
  companyAdmin = await newApiUser(baseUrl, tenant.tmcId, "COMPANY_ADMIN", tenant.orgId);
  grpcs = grpcClients(baseUrl);
});

after(async () => {
  grpcs?.close();
  await disposeService(running);
});

/** What an independent resource server would do: fetch the JWKS and verify per RFC 9068. */
async function verifyIndependently(token: string, audience = AUDIENCE) {
  const jwks = createRemoteJWKSet(new URL(`${baseUrl}/.well-known/jwks.json`));
  return jwtVerify(token, jwks, { issuer: ISSUER, audience, typ: "at+jwt", algorithms: ["EdDSA"] });
}

function assertTokenResponse(res: HttpReply, scopes: readonly string[]): void {
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(
    Object.keys(res.body).sort(),
    ["access_token", "expires_in", "scope", "token_type"],
    "no refresh_token for client_credentials",
  );
  assert.equal(res.body.token_type, "Bearer");
  assert.equal(res.body.expires_in, 3600);
  assert.ok(Number.isInteger(res.body.expires_in));
  assert.deepEqual(res.body.scope.split(" ").sort(), [...scopes].sort());
  assert.equal(res.headers.get("cache-control"), "no-store");
  assert.equal(res.headers.get("pragma"), "no-cache");
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
}

describe("client authentication", () => {
  test("client_secret_post: form fields client_id and client_secret", async () => {
    const res = await clientCredentials(baseUrl, admin);
    assertTokenResponse(res, TMC_ADMIN_SCOPES);
  });

  test("client_secret_basic: Authorization: Basic with the form-urlencoded id and secret (RFC 6749 2.3.1)", async () => {
    const res = await postForm(
      baseUrl,
      TOKEN_PATH,
      { grant_type: "client_credentials" },
      { authorization: basicAuthorization(admin.clientId, admin.clientSecret) },
    );
    assertTokenResponse(res, TMC_ADMIN_SCOPES);
    assert.equal(partsOf(res.body.access_token).payload.sub, admin.clientId);
  });

  test("client_secret_basic: every character of id and secret percent-encoded is decoded before comparing", async () => {
    const authorization = basicAuthorization(admin.clientId, admin.clientSecret, percentEncodeAll);
    assert.ok(authorization.length > 0);
    const res = await postForm(baseUrl, TOKEN_PATH, { grant_type: "client_credentials" }, { authorization });
    assertTokenResponse(res, TMC_ADMIN_SCOPES);
    assert.equal(partsOf(res.body.access_token).payload.client_id, admin.clientId);
  });

  test("client_secret_basic: the scheme name is case-insensitive", async () => {
    const authorization = basicAuthorization(admin.clientId, admin.clientSecret).replace(/^Basic/, "basic");
    const res = await postForm(baseUrl, TOKEN_PATH, { grant_type: "client_credentials" }, { authorization });
    assertTokenResponse(res, TMC_ADMIN_SCOPES);
  });

  test("client_secret_basic with a wrong secret → 403 INVALID_CLIENT", async () => {
    const res = await postForm(
      baseUrl,
      TOKEN_PATH,
      { grant_type: "client_credentials" },
      { authorization: basicAuthorization(admin.clientId, `${admin.clientSecret}x`) },
    );
    assertOAuthError(res, 403, "INVALID_CLIENT", "invalid_client");
  });

  test("Basic together with client_secret in the body → 400 INVALID_REQUEST", async () => {
    const res = await postForm(
      baseUrl,
      TOKEN_PATH,
      { grant_type: "client_credentials", client_id: admin.clientId, client_secret: admin.clientSecret },
      { authorization: basicAuthorization(admin.clientId, admin.clientSecret) },
    );
    assertOAuthError(res, 400, "INVALID_REQUEST", "invalid_request");
  });

  test("Basic together with a different client_id in the body → 400 INVALID_REQUEST", async () => {
    const other = await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN");
    const res = await postForm(
      baseUrl,
      TOKEN_PATH,
      { grant_type: "client_credentials", client_id: other.clientId },
      { authorization: basicAuthorization(admin.clientId, admin.clientSecret) },
    );
    assertOAuthError(res, 400, "INVALID_REQUEST", "invalid_request");
  });

  test("wrong secret and unknown client → 403 with identical bodies apart from debugIdentifier", async () => {
    const wrong = await clientCredentials(baseUrl, {
      ...admin,
      clientSecret: `${admin.clientSecret.slice(0, -1)}${admin.clientSecret.endsWith("A") ? "B" : "A"}`,
    });
    const unknown = await clientCredentials(baseUrl, { ...admin, clientId: "unknownclientid0000000000000" });
    const empty = await clientCredentials(baseUrl, { ...admin, clientSecret: "not-even-close" });
    for (const res of [wrong, unknown, empty]) assertOAuthError(res, 403, "INVALID_CLIENT", "invalid_client");
    const { debugIdentifier: a, ...wrongBody } = wrong.body;
    const { debugIdentifier: b, ...unknownBody } = unknown.body;
    const { debugIdentifier: c, ...emptyBody } = empty.body;
    assert.notEqual(a, b);
    assert.notEqual(b, c);
    assert.deepEqual(wrongBody, unknownBody);
    assert.deepEqual(wrongBody, emptyBody);
  });

  test("a SCIM_TOKEN API user cannot use the token endpoint (its scimToken is no client secret) → 403 INVALID_CLIENT", async () => {
    const scim = await operatorCall<{ clientId: string; scimToken: string }>(baseUrl, "CreateApiUser", {
      tmcId: tenant.tmcId,
      orgId: tenant.orgId,
      role: "COMPANY_ADMIN",
      credentialType: "SCIM_TOKEN",
    });
    assert.match(scim.scimToken, /\S/);
    const res = await clientCredentials(baseUrl, {
      clientId: scim.clientId,
      clientSecret: scim.scimToken,
      tmcId: tenant.tmcId,
      role: "COMPANY_ADMIN",
    });
    assertOAuthError(res, 403, "INVALID_CLIENT", "invalid_client");
  });

  test("a missing client_secret is refused with an RFC 6749 error (no token)", async () => {
    const res = await postForm(baseUrl, TOKEN_PATH, { grant_type: "client_credentials", client_id: admin.clientId });
    // Malformed (no client authentication at all), not a failed authentication.
    assertOAuthError(res, 400, "INVALID_REQUEST", "invalid_request");
    assert.equal(res.body.access_token, undefined);
  });
});

describe("the access token as an independent verifier sees it", () => {
  test("RFC 9068 JWT: typ at+jwt, EdDSA, a kid published in the JWKS, and the documented claims", async () => {
    const before = Math.floor(Date.now() / 1000);
    const token = await accessTokenOf(baseUrl, admin);
    const header = decodeProtectedHeader(token);
    assert.equal(header.typ, "at+jwt");
    assert.equal(header.alg, "EdDSA");
    assert.equal(typeof header.kid, "string");

    const jwks = (await (await fetch(`${baseUrl}/.well-known/jwks.json`)).json()) as {
      keys: Array<Record<string, string>>;
    };
    assert.ok(Array.isArray(jwks.keys) && jwks.keys.length >= 1);
    const published = jwks.keys.find((k) => k.kid === header.kid);
    assert.ok(published, "the token's kid is in the JWKS");
    assert.equal(published.kty, "OKP");
    assert.equal(published.crv, "Ed25519");
    for (const k of jwks.keys) assert.equal(k.d, undefined, "no private key material in the JWKS");

    const { payload, protectedHeader } = await verifyIndependently(token);
    assert.equal(protectedHeader.typ, "at+jwt");
    assert.equal(payload.iss, ISSUER);
    assert.equal(payload.sub, admin.clientId);
    assert.equal(payload.aud, AUDIENCE);
    assert.equal(payload.client_id, admin.clientId);
    assert.equal(payload.tmc_id, tenant.tmcId);
    assert.equal(payload.role, "TMC_ADMIN");
    assert.equal(payload.gen, 1);
    assert.deepEqual(String(payload.scope).split(" ").sort(), [...TMC_ADMIN_SCOPES].sort());
    assert.equal(typeof payload.jti, "string");
    assert.ok(payload.iat! >= before - 1 && payload.iat! <= Math.floor(Date.now() / 1000) + 1);
    assert.equal(payload.exp! - payload.iat!, 3600);
  });

  test("each token has its own jti", async () => {
    const a = partsOf(await accessTokenOf(baseUrl, admin)).payload.jti;
    const b = partsOf(await accessTokenOf(baseUrl, admin)).payload.jti;
    assert.notEqual(a, b);
  });

  test("RFC 8414 metadata names the token endpoint, the JWKS, the grants and the auth methods", async () => {
    const res = await fetch(`${baseUrl}/.well-known/oauth-authorization-server`);
    assert.equal(res.status, 200);
    const meta = (await res.json()) as Record<string, any>;
    assert.equal(meta.issuer, ISSUER);
    assert.equal(meta.token_endpoint, `${ISSUER}/v2/auth/oauth2-token`);
    assert.equal(meta.jwks_uri, `${ISSUER}/.well-known/jwks.json`);
    for (const grant of ["client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange", "refresh_token"]) {
      assert.ok(meta.grant_types_supported.includes(grant), `grant ${grant}`);
    }
    assert.ok(meta.token_endpoint_auth_methods_supported.includes("client_secret_basic"));
    assert.ok(meta.token_endpoint_auth_methods_supported.includes("client_secret_post"));
    // openid is granted but not advertised: there are no OpenID Connect endpoints.
    assert.deepEqual([...meta.scopes_supported].sort(), TMC_ADMIN_SCOPES.filter((s) => s !== "openid").sort());
    assert.deepEqual(meta.response_types_supported, ["none"]);
    assert.equal(meta.introspection_endpoint, `${ISSUER}/v2/auth/introspect`);
  });
});

describe("scopes", () => {
  test("TMC_ADMIN asking for none gets every TMC_ADMIN scope", async () => {
    assertTokenResponse(await clientCredentials(baseUrl, admin), TMC_ADMIN_SCOPES);
  });

  test("TMC_ADMIN asking for a subset gets exactly that subset, in the token too", async () => {
    const res = await clientCredentials(baseUrl, admin, { scope: "users:read air-credits:read" });
    assertTokenResponse(res, ["users:read", "air-credits:read"]);
    const { payload } = await verifyIndependently(res.body.access_token);
    assert.deepEqual(String(payload.scope).split(" ").sort(), ["air-credits:read", "users:read"]);
  });

  test("TMC_ADMIN may ask for every scope by name", async () => {
    assertTokenResponse(
      await clientCredentials(baseUrl, admin, { scope: TMC_ADMIN_SCOPES.join(" ") }),
      TMC_ADMIN_SCOPES,
    );
  });

  test("a scope outside the role's → 400 INVALID_SCOPE / invalid_scope", async () => {
    assertOAuthError(
      await clientCredentials(baseUrl, admin, { scope: "users:read superpowers" }),
      400,
      "INVALID_SCOPE",
      "invalid_scope",
    );
    assertOAuthError(
      await clientCredentials(baseUrl, admin, { scope: "Users:Read" }),
      400,
      "INVALID_SCOPE",
      "invalid_scope",
    );
  });

  test("a malformed scope parameter → 400 invalid_scope", async () => {
    assertOAuthError(
      await clientCredentials(baseUrl, admin, { scope: "users:read  users:write" }),
      400,
      "INVALID_SCOPE",
      "invalid_scope",
    );
    assertOAuthError(
      await clientCredentials(baseUrl, admin, { scope: 'users:read "x"' }),
      400,
      "INVALID_SCOPE",
      "invalid_scope",
    );
  });

  test("COMPANY_ADMIN asking for none gets every scope but api-users", async () => {
    const res = await clientCredentials(baseUrl, companyAdmin);
    assertTokenResponse(res, COMPANY_ADMIN_SCOPES);
    const { payload } = await verifyIndependently(res.body.access_token);
    assert.equal(payload.role, "COMPANY_ADMIN");
    assert.equal(payload.sub, companyAdmin.clientId);
  });

  test("COMPANY_ADMIN asking for a subset gets it", async () => {
    assertTokenResponse(await clientCredentials(baseUrl, companyAdmin, { scope: "scim openid" }), ["scim", "openid"]);
  });

  test("COMPANY_ADMIN asking for api-users → 400 invalid_scope", async () => {
    assertOAuthError(
      await clientCredentials(baseUrl, companyAdmin, { scope: "api-users" }),
      400,
      "INVALID_SCOPE",
      "invalid_scope",
    );
    assertOAuthError(
      await clientCredentials(baseUrl, companyAdmin, { scope: "users:read api-users" }),
      400,
      "INVALID_SCOPE",
      "invalid_scope",
    );
  });
});

describe("audience", () => {
  test("absent → the service's own audience", async () => {
    const { payload } = await verifyIndependently(await accessTokenOf(baseUrl, admin));
    assert.equal(payload.aud, AUDIENCE);
  });

  test("the service's own audience named explicitly is granted", async () => {
    const { payload } = await verifyIndependently(await accessTokenOf(baseUrl, admin, { audience: AUDIENCE }));
    assert.equal(payload.aud, AUDIENCE);
  });

  test("an audience from ALLOWED_AUDIENCES is granted", async () => {
    const { payload } = await verifyIndependently(
      await accessTokenOf(baseUrl, admin, { audience: PARTNER_AUDIENCE }),
      PARTNER_AUDIENCE,
    );
    assert.equal(payload.aud, PARTNER_AUDIENCE);
  });

  test("any other audience → 400 INVALID_TARGET / invalid_target", async () => {
    for (const audience of ["https://evil.example/api", `${AUDIENCE}/`, "http://auth.test", "not a url"]) {
      assertOAuthError(await clientCredentials(baseUrl, admin, { audience }), 400, "INVALID_TARGET", "invalid_target");
    }
  });

  test("resource (RFC 8707): an allowed one becomes the audience; any other, a fragment, or a conflict with audience → 400 invalid_target", async () => {
    const { payload } = await verifyIndependently(
      await accessTokenOf(baseUrl, admin, { resource: PARTNER_AUDIENCE }),
      PARTNER_AUDIENCE,
    );
    assert.equal(payload.aud, PARTNER_AUDIENCE);
    const refused: Array<Record<string, string>> = [
      { resource: "https://evil.example/api" },
      { resource: `${PARTNER_AUDIENCE}#x` },
      { resource: PARTNER_AUDIENCE, audience: AUDIENCE },
    ];
    for (const extra of refused) {
      assertOAuthError(await clientCredentials(baseUrl, admin, extra), 400, "INVALID_TARGET", "invalid_target");
    }
  });
});

describe("audiences of registered resource servers (RFC 8707 resource, RFC 8693 audience)", () => {
  const BOOKINGS = "https://bookings.platform.test/api";
  const BOOKINGS_ADMIN = "https://bookings.platform.test/admin";
  const repeatedResources = (client: Client, resources: readonly string[]) =>
    postForm(
      baseUrl,
      TOKEN_PATH,
      new URLSearchParams([
        ["grant_type", "client_credentials"],
        ["client_id", client.clientId],
        ["client_secret", client.clientSecret],
        ...resources.map((r) => ["resource", r] as [string, string]),
      ]).toString(),
    );

  test("a registered server's audience is granted by resource or audience; repeated resources all go into aud; once the server is removed, or for an audience nobody registered → 400 invalid_target", async () => {
    const server = await operatorCall<{ clientId: string }>(baseUrl, "CreateResourceServer", {
      name: "Bookings",
      audiences: [BOOKINGS, BOOKINGS_ADMIN],
    });
    const asked: Array<Record<string, string>> = [
      { resource: BOOKINGS },
      { audience: BOOKINGS },
      { resource: BOOKINGS, audience: BOOKINGS },
    ];
    for (const extra of asked) {
      const { payload } = await verifyIndependently(await accessTokenOf(baseUrl, admin, extra), BOOKINGS);
      assert.equal(payload.aud, BOOKINGS, JSON.stringify(extra));
    }
    const both = await repeatedResources(admin, [BOOKINGS, BOOKINGS_ADMIN, BOOKINGS]);
    assert.equal(both.status, 200, JSON.stringify(both.body));
    const { payload } = await verifyIndependently(both.body.access_token as string, BOOKINGS_ADMIN);
    assert.deepEqual(payload.aud, [BOOKINGS, BOOKINGS_ADMIN], "each once, in the request's order");
    const mixed = await repeatedResources(admin, [BOOKINGS, PARTNER_AUDIENCE, AUDIENCE]);
    assert.equal(mixed.status, 200, "a registered audience, one of ALLOWED_AUDIENCES and the service's own");

    const unknown = await repeatedResources(admin, [BOOKINGS, "https://nobody.platform.test/api"]);
    assertOAuthError(unknown, 400, "INVALID_TARGET", "invalid_target");
    assert.deepEqual(unknown.body.errorMessages[0].errorParameters, [
      { name: "audience", value: "https://nobody.platform.test/api" },
    ]);
    assertOAuthError(
      await clientCredentials(baseUrl, admin, { resource: BOOKINGS, audience: BOOKINGS_ADMIN.replace("admin", "x") }),
      400,
      "INVALID_TARGET",
      "invalid_target",
    );

    await operatorCall(baseUrl, "RemoveResourceServer", { clientId: server.clientId });
    const removed: Array<Record<string, string>> = [{ resource: BOOKINGS }, { audience: BOOKINGS_ADMIN }];
    for (const extra of removed)
      assertOAuthError(await clientCredentials(baseUrl, admin, extra), 400, "INVALID_TARGET", "invalid_target");
  });

  test("more than 10 resources → 400 invalid_request naming resource; nothing is issued", async () => {
    const many = Array.from({ length: 11 }, (_, i) => `https://r${i}.platform.test/`);
    const res = await repeatedResources(admin, many);
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.equal(res.body.error, "invalid_request");
    assert.equal(res.body.errorMessages[0].errorParameters[0].name, "resource");
  });

  test("over gRPC the same: resource repeats, an unregistered one is INVALID_ARGUMENT INVALID_TARGET", async () => {
    const server = await operatorCall<{ clientId: string }>(baseUrl, "CreateResourceServer", {
      name: "Bookings over gRPC",
      audiences: ["https://grpc-bookings.platform.test/api"],
    });
    const request = {
      grantType: "client_credentials",
      clientId: admin.clientId,
      clientSecret: admin.clientSecret,
      resource: ["https://grpc-bookings.platform.test/api", PARTNER_AUDIENCE],
    };
    const issued = await grpcs.call("auth", "fetchOauth2Token", request);
    assert.equal(issued.ok, true, JSON.stringify(issued.errorResponse));
    const { payload } = await verifyIndependently(String(issued.response!.accessToken), PARTNER_AUDIENCE);
    assert.deepEqual(payload.aud, ["https://grpc-bookings.platform.test/api", PARTNER_AUDIENCE]);
    await operatorCall(baseUrl, "RemoveResourceServer", { clientId: server.clientId });
    assertGrpcFailure(await grpcs.call("auth", "fetchOauth2Token", request), GRPC.INVALID_ARGUMENT, "INVALID_TARGET");
  });
});

describe("grant_type errors", () => {
  test("missing grant_type → 400 INVALID_REQUEST / invalid_request", async () => {
    const res = await postForm(baseUrl, TOKEN_PATH, { client_id: admin.clientId, client_secret: admin.clientSecret });
    assertOAuthError(res, 400, "INVALID_REQUEST", "invalid_request");
  });

  test("unsupported grant types → 400 UNSUPPORTED_GRANT_TYPE / unsupported_grant_type", async () => {
    for (const grant of [
      "password",
      "authorization_code",
      "CLIENT_CREDENTIALS",
      "urn:ietf:params:oauth:grant-type:jwt-bearer",
    ]) {
      const res = await clientCredentials(baseUrl, admin, { grant_type: grant });
      assertOAuthError(res, 400, "UNSUPPORTED_GRANT_TYPE", "unsupported_grant_type");
    }
  });

  test("the grant_type is checked before the client: a bad grant with a wrong secret is still a 400", async () => {
    const res = await clientCredentials(baseUrl, { ...admin, clientSecret: "wrong" }, { grant_type: "password" });
    assertOAuthError(res, 400, "UNSUPPORTED_GRANT_TYPE", "unsupported_grant_type");
  });

  test("client_credentials with a subject_token → 400 INVALID_REQUEST", async () => {
    const res = await clientCredentials(baseUrl, admin, { subject_token: "abc" });
    assertOAuthError(res, 400, "INVALID_REQUEST", "invalid_request");
  });
});

describe("every token-endpoint ErrorResponse carries RFC 6749 error and error_description", () => {
  // Including failures found before the grant logic runs: form decoding in the gateway, protovalidate limits.

  test("a repeated form parameter (RFC 6749 3.2) → 400 with error invalid_request", async () => {
    const res = await postForm(
      baseUrl,
      TOKEN_PATH,
      `grant_type=client_credentials&client_id=${admin.clientId}&client_secret=${admin.clientSecret}&scope=openid&scope=scim`,
    );
    assert.equal(res.status, 400);
    assert.equal(res.body.access_token, undefined);
    {
      assert.equal(res.body.error, "invalid_request", JSON.stringify(res.body));
      assert.equal(typeof res.body.error_description, "string");
    }
  });

  test("an over-long grant_type → 400 with an RFC 6749 error", async () => {
    const res = await clientCredentials(baseUrl, admin, { grant_type: "x".repeat(300) });
    // The contract's max_len (256) refuses it before the grant is looked at.
    assertOAuthError(res, 400, "API_VALIDATION_FAILED", "invalid_request");
    assert.deepEqual(
      res.body.errorMessages[0].errorParameters.map((p: { name: string }) => p.name),
      ["grant_type"],
    );
  });

  test("an over-long client_secret → 400 with an RFC 6749 error (no authentication attempted)", async () => {
    const res = await clientCredentials(baseUrl, { ...admin, clientSecret: "s".repeat(2000) });
    // The contract's max_len (1024) refuses it: a validation error, not a failed authentication.
    assertOAuthError(res, 400, "API_VALIDATION_FAILED", "invalid_request");
    assert.deepEqual(
      res.body.errorMessages[0].errorParameters.map((p: { name: string }) => p.name),
      ["client_secret"],
    );
  });
});

describe("AuthService.FetchOauth2Token over grpc-js", () => {
  test("client_credentials succeeds with the same token shape", async () => {
    const outcome = await grpcs.call("auth", "fetchOauth2Token", {
      grantType: "client_credentials",
      clientId: admin.clientId,
      clientSecret: admin.clientSecret,
    });
    assert.equal(outcome.ok, true, JSON.stringify(outcome.errorResponse));
    const res = outcome.response!;
    assert.equal(res.tokenType, "Bearer");
    assert.equal(res.expiresIn, 3600);
    assert.equal(res.refreshToken, "", "no refresh token for client_credentials");
    assert.deepEqual(res.scope.split(" ").sort(), [...TMC_ADMIN_SCOPES].sort());
    const { payload } = await verifyIndependently(res.accessToken);
    assert.equal(payload.sub, admin.clientId);
  });

  test("a requested scope subset over gRPC", async () => {
    const outcome = await grpcs.call("auth", "fetchOauth2Token", {
      grantType: "client_credentials",
      clientId: admin.clientId,
      clientSecret: admin.clientSecret,
      scope: "users:read",
    });
    assert.equal(outcome.ok, true);
    assert.equal(outcome.response!.scope, "users:read");
  });

  test("wrong secret → PERMISSION_DENIED (7) with INVALID_CLIENT and error invalid_client", async () => {
    const outcome = await grpcs.call("auth", "fetchOauth2Token", {
      grantType: "client_credentials",
      clientId: admin.clientId,
      clientSecret: "wrong",
    });
    const body = assertGrpcFailure(outcome, GRPC.PERMISSION_DENIED, "INVALID_CLIENT");
    assert.equal(body.error, "invalid_client");
    assert.ok(body.errorDescription.length > 0);
  });

  test("unknown client → PERMISSION_DENIED (7) with INVALID_CLIENT", async () => {
    const outcome = await grpcs.call("auth", "fetchOauth2Token", {
      grantType: "client_credentials",
      clientId: "nobody",
      clientSecret: "wrong",
    });
    assertGrpcFailure(outcome, GRPC.PERMISSION_DENIED, "INVALID_CLIENT");
  });

  test("unsupported grant → INVALID_ARGUMENT (3) with UNSUPPORTED_GRANT_TYPE", async () => {
    const outcome = await grpcs.call("auth", "fetchOauth2Token", {
      grantType: "password",
      clientId: admin.clientId,
      clientSecret: admin.clientSecret,
    });
    const body = assertGrpcFailure(outcome, GRPC.INVALID_ARGUMENT, "UNSUPPORTED_GRANT_TYPE");
    assert.equal(body.error, "unsupported_grant_type");
  });

  test("missing grant_type → INVALID_ARGUMENT (3) with INVALID_REQUEST", async () => {
    const outcome = await grpcs.call("auth", "fetchOauth2Token", {
      clientId: admin.clientId,
      clientSecret: admin.clientSecret,
    });
    const body = assertGrpcFailure(outcome, GRPC.INVALID_ARGUMENT, "INVALID_REQUEST");
    assert.equal(body.error, "invalid_request");
  });

  test("a scope outside the role → INVALID_ARGUMENT (3) with INVALID_SCOPE", async () => {
    const outcome = await grpcs.call("auth", "fetchOauth2Token", {
      grantType: "client_credentials",
      clientId: companyAdmin.clientId,
      clientSecret: companyAdmin.clientSecret,
      scope: "api-users",
    });
    const body = assertGrpcFailure(outcome, GRPC.INVALID_ARGUMENT, "INVALID_SCOPE");
    assert.equal(body.error, "invalid_scope");
  });
});
