import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { Code } from "@connectrpc/connect";
import { tenantScope } from "../../../src/domain/shared/tenant-scope.js";
import { ApiUserRole } from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import { ErrorResponseSchema } from "../../../gen/travel/common/v1/error_pb.js";
import {
  accessToken,
  asOperator,
  asRequest,
  bearer,
  connectErrorOf,
  provisionTmc,
  rejectsWithRpc,
  startRpc,
  type RpcHarness,
} from "./harness.js";

const EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";
const ALL_TMC_ADMIN_SCOPES = "api-users users:read users:write air-credits:read air-credits:write scim openid";

/** The response headers of a successful call. */
async function withHeaders<T>(
  call: (options: { onHeader: (headers: Headers) => void }) => Promise<T>,
): Promise<{ response: T; headers: Headers }> {
  let headers = new Headers();
  const response = await call({ onHeader: (h) => (headers = h) });
  return { response, headers };
}

/** RateLimit: "default";r=<remaining>;t=<seconds> — the seconds depend on the wall clock, so only their range is checked. */
function rateLimitOf(headers: Headers): { remaining: number; seconds: number } {
  const match = /^"default";r=(\d+);t=(\d+)$/.exec(headers.get("ratelimit") ?? "");
  assert.ok(match, `RateLimit header: ${headers.get("ratelimit")}`);
  return { remaining: Number(match[1]), seconds: Number(match[2]) };
}

describe("AuthService through the transport", () => {
  let h: RpcHarness;
  let tenant: Awaited<ReturnType<typeof provisionTmc>>;
  let adminToken: string;
  before(async () => {
    h = await startRpc({ TOKEN_RATE_LIMIT_PER_CLIENT: "3/60", TOKEN_FAILURE_LIMIT: "2/900" });
    tenant = await provisionTmc(h, 20);
    adminToken = (
      await asRequest("setup", "10.9.9.9", () =>
        h.auth.fetchOauth2Token({
          grantType: "client_credentials",
          clientId: tenant.clientId,
          clientSecret: tenant.clientSecret,
        }),
      )
    ).accessToken;
  });

  /** A fresh API user, so each test starts with whole budgets. */
  const newClient = () => h.apiUsers.createApiUser({}, bearer(adminToken));

  test("client_credentials: the token response, no-store, and the rate-limit headers of the tightest budget", async () => {
    const client = await newClient();
    const { response, headers } = await withHeaders((options) =>
      asRequest("req-1", "10.2.0.1", () =>
        h.auth.fetchOauth2Token(
          { grantType: "client_credentials", clientId: client.clientId, clientSecret: client.clientSecret },
          options,
        ),
      ),
    );
    assert.deepEqual(
      { ...response, accessToken: response.accessToken.split(".").length },
      {
        $typeName: "travel.auth.v2.FetchOauth2TokenResponse",
        accessToken: 3,
        tokenType: "Bearer",
        expiresIn: 3600,
        scope: ALL_TMC_ADMIN_SCOPES,
        refreshToken: "",
        issuedTokenType: "",
      },
    );
    assert.equal(headers.get("cache-control"), "no-store");
    assert.equal(headers.get("pragma"), "no-cache");
    assert.equal(headers.get("ratelimit-policy"), '"default";q=3;w=60');
    const { remaining, seconds } = rateLimitOf(headers);
    assert.equal(remaining, 2);
    assert.ok(seconds >= 1 && seconds <= 60);
    assert.equal(headers.get("retry-after"), null);
  });

  test("HTTP Basic works too; Basic and a body secret together are invalid_request", async () => {
    const client = await newClient();
    const basic = {
      headers: {
        authorization: `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString("base64")}`,
      },
    };
    assert.equal((await h.auth.fetchOauth2Token({ grantType: "client_credentials" }, basic)).tokenType, "Bearer");
    await rejectsWithRpc(
      h.auth.fetchOauth2Token({ grantType: "client_credentials", clientSecret: client.clientSecret }, basic),
      {
        code: Code.InvalidArgument,
        errorCode: "INVALID_REQUEST",
        message: "Use either HTTP Basic or client_secret in the body, not both",
        error: "invalid_request",
        errorDescription: "Use either HTTP Basic or client_secret in the body, not both",
      },
    );
  });

  test("OAuth errors carry RFC 6749's error and error_description next to the ErrorResponse, and the rate-limit headers", async () => {
    const client = await newClient();
    const { error } = await rejectsWithRpc(
      asRequest("req-bad", "10.2.0.2", () =>
        h.auth.fetchOauth2Token({ grantType: "client_credentials", clientId: client.clientId, clientSecret: "wrong" }),
      ),
      {
        code: Code.PermissionDenied,
        errorCode: "INVALID_CLIENT",
        message: "Client authentication failed",
        error: "invalid_client",
        errorDescription: "Client authentication failed",
        debugIdentifier: "req-bad",
      },
    );
    assert.equal(error.metadata.get("cache-control"), "no-store");
    // Not authenticated: only the address's budget (the default 300/60) applied; the client's is spent once it has authenticated.
    assert.equal(error.metadata.get("ratelimit-policy"), '"default";q=300;w=60');
    assert.equal(rateLimitOf(error.metadata).remaining, 299);

    const other = await newClient();
    const oauth = (fields: object) =>
      h.auth.fetchOauth2Token({
        grantType: "client_credentials",
        clientId: other.clientId,
        clientSecret: other.clientSecret,
        ...fields,
      });
    await rejectsWithRpc(oauth({ grantType: "password" }), {
      code: Code.InvalidArgument,
      errorCode: "UNSUPPORTED_GRANT_TYPE",
      message: 'Unsupported grant_type "password"',
      params: [{ name: "grant_type", value: "password" }],
      error: "unsupported_grant_type",
      errorDescription: 'Unsupported grant_type "password"',
    });
    await rejectsWithRpc(oauth({ scope: "root" }), {
      code: Code.InvalidArgument,
      errorCode: "INVALID_SCOPE",
      message: "Scope not allowed: root",
      error: "invalid_scope",
      errorDescription: "Scope not allowed: root",
    });
    await rejectsWithRpc(oauth({ audience: "http://evil.test" }), {
      code: Code.InvalidArgument,
      errorCode: "INVALID_TARGET",
      message: "The requested audience is not allowed",
      params: [{ name: "audience", value: "http://evil.test" }],
      error: "invalid_target",
      errorDescription: "The requested audience is not allowed",
    });
  });

  test("exchange and refresh: issued_token_type and a refresh token; a reused refresh token is invalid_grant", async () => {
    const actor = await newClient();
    const exchanged = await h.auth.fetchOauth2Token({
      grantType: EXCHANGE,
      clientId: actor.clientId,
      clientSecret: actor.clientSecret,
      subjectToken: adminToken,
      subjectTokenType: ACCESS_TOKEN_TYPE,
      scope: "users:read",
    });
    assert.deepEqual(
      [exchanged.issuedTokenType, exchanged.scope, exchanged.refreshToken.length],
      [ACCESS_TOKEN_TYPE, "users:read", 43],
    );
    const refreshed = await h.auth.fetchOauth2Token({
      grantType: "refresh_token",
      clientId: actor.clientId,
      clientSecret: actor.clientSecret,
      refreshToken: exchanged.refreshToken,
    });
    assert.notEqual(refreshed.refreshToken, exchanged.refreshToken);
    await rejectsWithRpc(
      h.auth.fetchOauth2Token({
        grantType: "refresh_token",
        clientId: actor.clientId,
        clientSecret: actor.clientSecret,
        refreshToken: exchanged.refreshToken,
      }),
      {
        code: Code.InvalidArgument,
        errorCode: "INVALID_GRANT",
        message: "The refresh token was already used; its family is revoked",
        error: "invalid_grant",
        errorDescription: "The refresh token was already used; its family is revoked",
      },
    );
  });

  test("the per-client budget: 429 slow_down with Retry-After equal to the RateLimit reset", async () => {
    const client = await newClient();
    const fetch = () =>
      asRequest("req-rl", "10.2.0.3", () =>
        h.auth.fetchOauth2Token({
          grantType: "client_credentials",
          clientId: client.clientId,
          clientSecret: client.clientSecret,
        }),
      );
    for (let i = 0; i < 3; i++) await fetch();
    const refusal = await connectErrorOf(fetch());
    // The body's retryAfterSeconds and the Retry-After header come from the same decision.
    const { error } = await rejectsWithRpc(Promise.reject(refusal), {
      code: Code.ResourceExhausted,
      errorCode: "TOO_MANY_REQUESTS",
      message: "Rate limit exceeded; retry later with exponential backoff",
      params: [{ name: "retryAfterSeconds", value: refusal.metadata.get("retry-after") ?? "<no Retry-After>" }],
      error: "slow_down",
      errorDescription: "Rate limit exceeded; retry later with exponential backoff",
    });
    const retryAfter = Number(error.metadata.get("retry-after"));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60);
    assert.deepEqual(rateLimitOf(error.metadata), { remaining: 0, seconds: retryAfter });
    assert.equal(error.metadata.get("ratelimit-policy"), '"default";q=3;w=60');
  });

  test("failed authentications lock a client out at that address only; the operator sees the lockout and lifts it", async () => {
    const client = await newClient();
    const fetch = (secret: string, address: string) =>
      asRequest("req-f", address, () =>
        h.auth.fetchOauth2Token({ grantType: "client_credentials", clientId: client.clientId, clientSecret: secret }),
      );
    const attacker = "10.3.0.1";
    for (let i = 0; i < 2; i++) {
      await rejectsWithRpc(fetch("wrong", attacker), {
        code: Code.PermissionDenied,
        errorCode: "INVALID_CLIENT",
        message: "Client authentication failed",
        error: "invalid_client",
        errorDescription: "Client authentication failed",
      });
    }
    const shown = await h.operator.getTokenLockout({ clientId: client.clientId, address: attacker }, asOperator);
    assert.deepEqual(
      {
        clientId: shown.clientId,
        address: shown.address,
        failures: shown.failures,
        limit: shown.limit,
        lockedOut: shown.lockedOut,
      },
      { clientId: client.clientId, address: attacker, failures: 2, limit: 2, lockedOut: true },
    );
    assert.ok(shown.resetSeconds > 800 && shown.resetSeconds <= 900, `resetSeconds ${shown.resetSeconds}`);

    const refusal = await connectErrorOf(fetch("wrong-again", attacker));
    await rejectsWithRpc(Promise.reject(refusal), {
      code: Code.ResourceExhausted,
      errorCode: "TOO_MANY_REQUESTS",
      message: "Rate limit exceeded; retry later with exponential backoff",
      params: [{ name: "retryAfterSeconds", value: refusal.metadata.get("retry-after") ?? "<no Retry-After>" }],
      error: "slow_down",
      errorDescription: "Rate limit exceeded; retry later with exponential backoff",
    });
    assert.equal(
      refusal.metadata.get("ratelimit-policy"),
      '"default";q=2;w=900',
      "the headers of the failure budget that refused",
    );
    assert.equal((await fetch(client.clientSecret, attacker)).tokenType, "Bearer", "the right secret passes there");
    assert.equal(
      (await fetch(client.clientSecret, "10.3.0.2")).tokenType,
      "Bearer",
      "the client elsewhere is not locked out",
    );

    const unknown = await h.operator.getTokenLockout({ clientId: "", address: attacker }, asOperator);
    assert.deepEqual(
      [unknown.failures, unknown.lockedOut],
      [0, false],
      "unknown client ids at that address: a separate count",
    );
    await h.operator.resetTokenLockout({ clientId: client.clientId, address: attacker }, asOperator);
    const lifted = await h.operator.getTokenLockout({ clientId: client.clientId, address: attacker }, asOperator);
    assert.deepEqual([lifted.failures, lifted.lockedOut, lifted.resetSeconds], [0, false, 0]);
    assert.equal((await fetch(client.clientSecret, attacker)).tokenType, "Bearer", "lifted at once");
  });

  test("made-up client ids from an address lock out only further made-up ids there", async () => {
    const client = await newClient();
    const nat = "10.3.1.1";
    const guess = (id: string) =>
      asRequest("req-g", nat, () =>
        h.auth.fetchOauth2Token({ grantType: "client_credentials", clientId: id, clientSecret: "guess" }),
      );
    for (let i = 0; i < 2; i++) assert.equal((await connectErrorOf(guess(`made-up-${i}`))).code, Code.PermissionDenied);
    assert.equal((await connectErrorOf(guess("made-up-2"))).code, Code.ResourceExhausted);
    const shown = await h.operator.getTokenLockout({ address: nat }, asOperator);
    assert.deepEqual([shown.clientId, shown.limit, shown.lockedOut], ["", 2, true]);
    const issued = await asRequest("req-g", nat, () =>
      h.auth.fetchOauth2Token({
        grantType: "client_credentials",
        clientId: client.clientId,
        clientSecret: client.clientSecret,
      }),
    );
    assert.equal(issued.tokenType, "Bearer");
  });

  test("a lockout's address must be an IP address; the lockout RPCs are the operator's", async () => {
    const invalid = await connectErrorOf(h.operator.getTokenLockout({ address: "not-an-ip" }, asOperator));
    assert.equal(invalid.code, Code.InvalidArgument);
    const [body] = invalid.findDetails(ErrorResponseSchema);
    assert.deepEqual(
      [body?.errorMessages[0]?.errorCode, body?.errorMessages[0]?.errorParameters.map((p) => p.name)],
      ["API_VALIDATION_FAILED", ["address"]],
    );
    assert.equal(
      (await connectErrorOf(h.operator.resetTokenLockout({ address: "10.3.2.1" }, bearer(adminToken)))).code,
      Code.Unauthenticated,
    );
  });

  test("protovalidate: API_VALIDATION_FAILED with one errorParameter per field, in the OAuth dialect, before any rate limiting", async () => {
    const { error } = await rejectsWithRpc(
      asRequest("req-v", "10.2.0.4", () =>
        h.auth.fetchOauth2Token({ grantType: "x".repeat(257), clientId: "c".repeat(257), clientSecret: "s" }),
      ),
      {
        code: Code.InvalidArgument,
        errorCode: "API_VALIDATION_FAILED",
        message: "The request is invalid",
        params: [
          { name: "grant_type", value: "must be at most 256 characters" },
          { name: "client_id", value: "must be at most 256 characters" },
        ],
        error: "invalid_request",
        errorDescription: "The request is invalid",
        debugIdentifier: "req-v",
      },
    );
    assert.equal(error.metadata.get("ratelimit"), null, "validation runs before the handler's rate limiting");
  });

  test("introspection: active for a token of the caller's TMC, only {active:false} otherwise", async () => {
    const peer = await newClient();
    const active = await h.auth.introspectToken({
      token: adminToken,
      clientId: peer.clientId,
      clientSecret: peer.clientSecret,
    });
    assert.deepEqual(
      [
        active.active,
        active.clientId,
        active.sub,
        active.tmcId,
        active.role,
        active.tokenType,
        active.aud,
        active.iss,
        active.scope,
      ],
      [
        true,
        tenant.clientId,
        tenant.clientId,
        tenant.tmcId,
        "TMC_ADMIN",
        "Bearer",
        ["http://auth.test/v2"],
        "http://auth.test",
        ALL_TMC_ADMIN_SCOPES,
      ],
    );
    const foreign = await provisionTmc(h);
    const inactive = await h.auth.introspectToken({
      token: adminToken,
      clientId: foreign.clientId,
      clientSecret: foreign.clientSecret,
    });
    assert.deepEqual(
      { ...inactive },
      {
        $typeName: "travel.auth.v2.IntrospectTokenResponse",
        active: false,
        scope: "",
        clientId: "",
        tokenType: "",
        exp: 0,
        iat: 0,
        sub: "",
        aud: [],
        iss: "",
        jti: "",
        tmcId: "",
        role: "",
        orgId: "",
      },
    );
  });

  test('no client authentication at all: 401 invalid_client with WWW-Authenticate: Basic realm="token" on oauth2-token and introspection', async () => {
    const required = {
      code: Code.Unauthenticated,
      errorCode: "CLIENT_AUTHENTICATION_REQUIRED",
      message: "Client authentication is required (HTTP Basic, or client_id and client_secret)",
      error: "invalid_client",
      errorDescription: "Client authentication is required (HTTP Basic, or client_id and client_secret)",
    } as const;
    const refusals = [
      await rejectsWithRpc(
        asRequest("req-401", "10.5.0.1", () => h.auth.fetchOauth2Token({ grantType: "client_credentials" })),
        { ...required, debugIdentifier: "req-401" },
      ),
      await rejectsWithRpc(
        h.auth.fetchOauth2Token({ grantType: EXCHANGE, subjectToken: adminToken, subjectTokenType: ACCESS_TOKEN_TYPE }),
        required,
      ),
      await rejectsWithRpc(h.auth.introspectToken({ token: adminToken }), required),
    ];
    for (const { error } of refusals) {
      assert.equal(error.metadata.get("www-authenticate"), 'Basic realm="token"');
      assert.equal(error.metadata.get("cache-control"), "no-store");
    }
    // The legacy endpoint: the same 401 (it takes JSON credentials only, so its challenge is not asserted here; see the report).
    await rejectsWithRpc(h.auth.getAuthToken({}), required);
  });

  test("only one of client_id and client_secret is 400 invalid_request; a wrong secret 403 invalid_client: neither carries WWW-Authenticate", async () => {
    const client = await newClient();
    const { error: halfway } = await rejectsWithRpc(
      h.auth.fetchOauth2Token({ grantType: "client_credentials", clientId: client.clientId }),
      {
        code: Code.InvalidArgument,
        errorCode: "INVALID_REQUEST",
        message: "Client authentication is required (client_id and client_secret)",
        params: [{ name: "client_id", value: "invalid" }],
        error: "invalid_request",
        errorDescription: "Client authentication is required (client_id and client_secret)",
      },
    );
    assert.equal(halfway.metadata.get("www-authenticate"), null);
    const { error: wrong } = await rejectsWithRpc(
      h.auth.introspectToken({ token: adminToken, clientId: client.clientId, clientSecret: "wrong" }),
      {
        code: Code.PermissionDenied,
        errorCode: "INVALID_CLIENT",
        message: "Client authentication failed",
        error: "invalid_client",
        errorDescription: "Client authentication failed",
      },
    );
    assert.equal(wrong.metadata.get("www-authenticate"), null);
  });

  test("requested_token_type: the access-token type is honoured by an exchange; anything else is invalid_request naming it", async () => {
    // Two clients: each has a budget of 3 requests a minute here.
    const actor = await newClient();
    const fields = { clientId: actor.clientId, clientSecret: actor.clientSecret };
    const other = await newClient();
    const otherFields = { clientId: other.clientId, clientSecret: other.clientSecret };
    const exchanged = await h.auth.fetchOauth2Token({
      grantType: EXCHANGE,
      ...fields,
      subjectToken: adminToken,
      subjectTokenType: ACCESS_TOKEN_TYPE,
      requestedTokenType: ACCESS_TOKEN_TYPE,
    });
    assert.equal(exchanged.issuedTokenType, ACCESS_TOKEN_TYPE);
    const refused = {
      code: Code.InvalidArgument,
      errorCode: "INVALID_REQUEST",
      message:
        "requested_token_type: only urn:ietf:params:oauth:token-type:access_token can be issued, by token exchange",
      params: [{ name: "requested_token_type", value: "invalid" }],
      error: "invalid_request",
      errorDescription:
        "requested_token_type: only urn:ietf:params:oauth:token-type:access_token can be issued, by token exchange",
    } as const;
    await rejectsWithRpc(
      h.auth.fetchOauth2Token({
        grantType: "refresh_token",
        ...fields,
        refreshToken: exchanged.refreshToken,
        requestedTokenType: ACCESS_TOKEN_TYPE,
      }),
      refused,
    );
    await rejectsWithRpc(
      h.auth.fetchOauth2Token({ grantType: "client_credentials", ...fields, requestedTokenType: ACCESS_TOKEN_TYPE }),
      refused,
    );
    await rejectsWithRpc(
      h.auth.fetchOauth2Token({
        grantType: EXCHANGE,
        ...otherFields,
        subjectToken: adminToken,
        subjectTokenType: ACCESS_TOKEN_TYPE,
        requestedTokenType: "urn:ietf:params:oauth:token-type:refresh_token",
      }),
      refused,
    );
    await rejectsWithRpc(
      h.auth.fetchOauth2Token({
        grantType: EXCHANGE,
        ...otherFields,
        subjectToken: adminToken,
        subjectTokenType: ACCESS_TOKEN_TYPE,
        requestedTokenType: "urn:example:unknown",
      }),
      refused,
    );
  });

  test("a company admin may neither exchange nor introspect a TMC admin's token; a colleague's it may", async () => {
    const admin = bearer(adminToken);
    const companyAdmin = await h.apiUsers.createApiUser(
      { orgId: tenant.orgId, role: ApiUserRole.COMPANY_ADMIN },
      admin,
    );
    const colleague = await h.apiUsers.createApiUser({ orgId: tenant.orgId, role: ApiUserRole.COMPANY_ADMIN }, admin);
    const fields = { clientId: companyAdmin.clientId, clientSecret: companyAdmin.clientSecret };
    await rejectsWithRpc(
      h.auth.fetchOauth2Token({
        grantType: EXCHANGE,
        ...fields,
        subjectToken: adminToken,
        subjectTokenType: ACCESS_TOKEN_TYPE,
      }),
      {
        code: Code.InvalidArgument,
        errorCode: "INVALID_REQUEST",
        message: "The caller may not obtain a token for the subject of this subject_token",
        params: [{ name: "subject_token", value: "invalid" }],
        error: "invalid_request",
        errorDescription: "The caller may not obtain a token for the subject of this subject_token",
      },
    );
    const inactive = await h.auth.introspectToken({ token: adminToken, ...fields });
    assert.deepEqual([inactive.active, inactive.sub, inactive.clientId], [false, "", ""]);

    const colleagueToken = await accessToken(h, colleague.clientId, colleague.clientSecret);
    const exchanged = await h.auth.fetchOauth2Token({
      grantType: EXCHANGE,
      ...fields,
      subjectToken: colleagueToken,
      subjectTokenType: ACCESS_TOKEN_TYPE,
      scope: "users:read",
    });
    assert.deepEqual([exchanged.issuedTokenType, exchanged.scope], [ACCESS_TOKEN_TYPE, "users:read"]);
    const sameCompany = await h.apiUsers.createApiUser({ orgId: tenant.orgId, role: ApiUserRole.COMPANY_ADMIN }, admin); // a fresh budget
    const active = await h.auth.introspectToken({
      token: colleagueToken,
      clientId: sameCompany.clientId,
      clientSecret: sameCompany.clientSecret,
    });
    assert.deepEqual([active.active, active.sub, active.clientId], [true, colleague.clientId, colleague.clientId]);
  });

  test("every introspection is audited TOKEN_INTROSPECTED with its request id", async () => {
    const client = await newClient();
    await asRequest("req-introspect", "10.4.0.3", () =>
      h.auth.introspectToken({ token: adminToken, clientId: client.clientId, clientSecret: client.clientSecret }),
    );
    await h.domain.auditLog.flush();
    const events = await h.store.repositories.audit.list(h.store.uow.direct, tenantScope(tenant.tmcId), 1000);
    const introspected = events.find((e) => e.debugIdentifier === "req-introspect");
    assert.deepEqual(
      [
        introspected?.action,
        introspected?.outcome,
        introspected?.actor,
        introspected?.targetClientId,
        introspected?.details,
      ],
      ["TOKEN_INTROSPECTED", "SUCCESS", client.clientId, tenant.clientId, { active: true, remoteAddress: "10.4.0.3" }],
    );
    assert.equal(JSON.stringify(events).includes(adminToken), false);
  });

  test("the legacy /get-auth-token: the documented shape, 86400 seconds, Deprecation and Link headers", async () => {
    const client = await newClient();
    const { response, headers } = await withHeaders((options) =>
      h.auth.getAuthToken({ clientId: client.clientId, clientSecret: client.clientSecret }, options),
    );
    assert.deepEqual(
      [response.type, response.expiryTimeInSeconds, response.token.split(".").length],
      ["Bearer", 86400, 3],
    );
    assert.equal(headers.get("deprecation"), "@1767225600");
    assert.equal(headers.get("link"), '</v2/auth/oauth2-token>; rel="successor-version"');
    assert.equal(headers.get("cache-control"), "no-store");
  });

  test("every token request is audited with its request id, in batches written off the request path", async () => {
    const client = await newClient();
    await asRequest("req-audit-ok", "10.4.0.1", () =>
      h.auth.fetchOauth2Token({
        grantType: "client_credentials",
        clientId: client.clientId,
        clientSecret: client.clientSecret,
      }),
    );
    await connectErrorOf(
      asRequest("req-audit-bad", "10.4.0.2", () =>
        h.auth.fetchOauth2Token({ grantType: "client_credentials", clientId: client.clientId, clientSecret: "nope" }),
      ),
    );
    await h.domain.auditLog.flush();
    const events = await h.store.repositories.audit.list(h.store.uow.direct, tenantScope(tenant.tmcId), 1000);
    const issued = events.find((e) => e.debugIdentifier === "req-audit-ok");
    assert.deepEqual(
      [issued?.action, issued?.actor, issued?.details],
      ["TOKEN_ISSUED", client.clientId, { grantType: "client_credentials", remoteAddress: "10.4.0.1" }],
    );
    // A refused request has no authenticated tenant: it is not in the TMC's trail but is written.
    const stored = (await h.store.db("audit_events").orderBy("id")) as Array<{
      action: string;
      outcome: string;
      actor: string | null;
      tmc_id: string | null;
      debug_identifier: string | null;
      details: unknown;
    }>;
    const found = stored.find((e) => e.debug_identifier === "req-audit-bad");
    const refused = found && { ...found, tmcId: found.tmc_id };
    assert.deepEqual(
      [refused?.action, refused?.outcome, refused?.actor, refused?.tmcId, refused?.details],
      [
        "TOKEN_REFUSED",
        "FAILURE",
        client.clientId,
        null,
        { grantType: "client_credentials", errorCode: "INVALID_CLIENT", remoteAddress: "10.4.0.2" },
      ],
    );
    assert.equal(JSON.stringify(stored).includes(client.clientSecret), false);
  });
});
