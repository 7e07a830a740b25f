import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import type { RateLimitDecision, RateLimits } from "../../../src/domain/rate-limit/model.js";
import { TokenRateLimiter } from "../../../src/domain/rate-limit/token-rate-limiter.js";
import { TokenEndpoint, type TokenCall } from "../../../src/domain/tokens/token-endpoint.js";
import { DomainError } from "../../../src/errors/domain-error.js";
import { memoryBudgetCounters } from "../../../src/store/memory/budget-counters.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import {
  basicHeader,
  createDomainFixture,
  LEGACY_TTL,
  newApiUser,
  newTenant,
  postCredentials,
  tokenRequest,
  type DomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";
import { RecordingAuditSink } from "../../fakes/observability.js";

const LIMITS: RateLimits = {
  perClient: { points: 5, durationSeconds: 60 },
  perAddress: { points: 100, durationSeconds: 60 },
  failures: { points: 3, durationSeconds: 900 },
};
const invalidClient = { code: "INVALID_CLIENT", message: "Client authentication failed" } as const;

describe("TokenEndpoint", () => {
  let f: DomainFixture;
  let tmcId: string;
  let client: ProvisionedApiUser;
  let audit: RecordingAuditSink;
  let endpoint: TokenEndpoint;
  beforeEach(async () => {
    f = await createDomainFixture();
    ({ tmcId } = await newTenant(f));
    client = await newApiUser(f, tmcId);
    audit = new RecordingAuditSink();
    endpoint = new TokenEndpoint(new TokenRateLimiter(LIMITS, memoryBudgetCounters("t:")), f.clients, f.tokenService, audit);
  });

  /** A call from `address`; `decisions` receives each rate-limit decision with whether the client had been looked up yet. */
  const call = (address: string, requestId = "req-1") => {
    const decisions: Array<RateLimitDecision & { authenticatedYet: boolean }> = [];
    const tokenCall: TokenCall = {
      requestId,
      remoteAddress: address,
      onRateLimit: (decision) => decisions.push({ ...decision, authenticatedYet: f.store.calls.includes("apiUsers.findActive") }),
    };
    return { tokenCall, decisions };
  };
  const fetch = (clientId: string, secret: string, address: string, fields: Parameters<typeof tokenRequest>[0] = {}) => {
    const c = call(address);
    return { promise: endpoint.fetchToken(tokenRequest({ credentials: postCredentials(clientId, secret), ...fields }), c.tokenCall), decisions: c.decisions };
  };
  /** TOO_MANY_REQUESTS whose retryAfterSeconds is the decision's (a whole number of seconds within the window). */
  const rateLimited = async (promise: Promise<unknown>, decisions: readonly RateLimitDecision[]) => {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof DomainError, `expected TOO_MANY_REQUESTS, got ${String(error)}`);
    assert.deepEqual(
      { code: error.code, message: error.message, params: error.params, detail: error.detail },
      {
        code: "TOO_MANY_REQUESTS",
        message: "Rate limit exceeded; retry later with exponential backoff",
        params: [{ name: "retryAfterSeconds", value: String(decisions[0]?.retryAfterSeconds) }],
        detail: "",
      },
    );
    const retryAfter = decisions[0]!.retryAfterSeconds!;
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= decisions[0]!.windowSeconds, `retryAfterSeconds ${retryAfter}`);
  };
  const withoutTime = <T extends { resetSeconds: number }>(d: T) => ({ ...d, resetSeconds: "<s>" });

  test("an issued token: the decision is reported before authentication, and TOKEN_ISSUED is audited", async () => {
    f.store.calls.length = 0;
    const { promise, decisions } = fetch(client.clientId, client.secret, "198.51.100.1");
    const issued = await promise;
    assert.equal(issued.tokenType, "Bearer");
    assert.deepEqual(decisions.map(withoutTime), [
      { allowed: true, limit: 5, remaining: 4, resetSeconds: "<s>", windowSeconds: 60, retryAfterSeconds: undefined, exhausted: undefined, authenticatedYet: false },
    ]);
    assert.ok(decisions[0]!.resetSeconds >= 1 && decisions[0]!.resetSeconds <= 60);
    assert.deepEqual(audit.events, [
      {
        action: "TOKEN_ISSUED",
        outcome: "SUCCESS",
        actor: client.clientId,
        tmcId,
        targetClientId: client.clientId,
        debugIdentifier: "req-1",
        details: { grantType: "client_credentials" },
      },
    ]);
  });

  test("the per-client budget: the sixth request in the window is 429 before any authentication, audited TOKEN_RATE_LIMITED", async () => {
    for (let i = 0; i < 5; i++) await fetch(client.clientId, client.secret, `198.51.100.${i}`).promise;
    f.store.calls.length = 0;
    const { promise, decisions } = fetch(client.clientId, client.secret, "198.51.100.99");
    await rateLimited(promise, decisions);
    assert.deepEqual(decisions.map(({ retryAfterSeconds: _r, ...d }) => withoutTime(d)), [
      { allowed: false, limit: 5, remaining: 0, resetSeconds: "<s>", windowSeconds: 60, exhausted: "client", authenticatedYet: false },
    ]);
    assert.equal(decisions[0]!.retryAfterSeconds, decisions[0]!.resetSeconds);
    assert.deepEqual(f.store.calls, [], "a refused request never reaches the database");
    assert.deepEqual(audit.events.at(-1), {
      action: "TOKEN_RATE_LIMITED",
      outcome: "RATE_LIMITED",
      actor: client.clientId,
      tmcId: null,
      targetClientId: null,
      debugIdentifier: "req-1",
      details: { grantType: "client_credentials", errorCode: "TOO_MANY_REQUESTS" },
    });
  });

  test("failed authentications spend the client's failure budget: then even the right secret gets 429", async () => {
    for (let i = 0; i < 3; i++) await rejectsWith(fetch(client.clientId, `wrong-${i}`, `203.0.113.${i}`).promise, invalidClient);
    assert.deepEqual(
      audit.events.map((e) => [e.action, e.outcome, e.actor, e.tmcId, e.targetClientId, e.details]),
      Array.from({ length: 3 }, () => ["TOKEN_REFUSED", "FAILURE", client.clientId, null, null, { grantType: "client_credentials", errorCode: "INVALID_CLIENT" }]),
    );
    const { promise, decisions } = fetch(client.clientId, client.secret, "203.0.113.50");
    await rateLimited(promise, decisions);
    assert.deepEqual([decisions[0]!.exhausted, decisions[0]!.limit, decisions[0]!.windowSeconds], ["client-failures", 3, 900]);
    // Another client from an address with one failure is unaffected.
    const other = await newApiUser(f, tmcId);
    assert.equal((await fetch(other.clientId, other.secret, "203.0.113.0").promise).tokenType, "Bearer");
  });

  test("failed authentications spend the address's failure budget too, across client ids", async () => {
    for (let i = 0; i < 3; i++) await rejectsWith(fetch(`guessed-client-${i}`, "guess", "192.0.2.7").promise, invalidClient);
    const { promise, decisions } = fetch(client.clientId, client.secret, "192.0.2.7");
    await rateLimited(promise, decisions);
    assert.equal(decisions[0]!.exhausted, "address-failures");
    assert.equal((await fetch(client.clientId, client.secret, "192.0.2.8").promise).tokenType, "Bearer");
  });

  test("malformed requests are refused without spending the failure budget", async () => {
    // Four refusals in all, one more than the failure budget (the per-client budget of 5 allows exactly these five requests).
    for (let i = 0; i < 2; i++) {
      await rejectsWith(fetch(client.clientId, "", "192.0.2.20").promise, {
        code: "INVALID_REQUEST",
        message: "Client authentication is required (client_id and client_secret)",
        params: [{ name: "client_id", value: "invalid" }],
      });
    }
    // The grant type is checked before authentication: a wrong secret with a bad grant is a 400, not a failure.
    await rejectsWith(fetch(client.clientId, "wrong", "192.0.2.20", { grantType: "password" }).promise, {
      code: "UNSUPPORTED_GRANT_TYPE",
      message: 'Unsupported grant_type "password"',
      params: [{ name: "grant_type", value: "password" }],
    });
    await rejectsWith(fetch(client.clientId, "wrong", "192.0.2.20", { grantType: "" }).promise, {
      code: "INVALID_REQUEST",
      message: "grant_type is required",
      params: [{ name: "grant_type", value: "invalid" }],
    });
    assert.equal((await fetch(client.clientId, client.secret, "192.0.2.20").promise).tokenType, "Bearer");
    assert.deepEqual(
      audit.events.map((e) => e.details?.errorCode ?? e.action),
      ["INVALID_REQUEST", "INVALID_REQUEST", "UNSUPPORTED_GRANT_TYPE", "INVALID_REQUEST", "TOKEN_ISSUED"],
    );
  });

  test("every outcome is audited and no audit event holds a secret or a token", async () => {
    const scimUser = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", credentialType: "SCIM_TOKEN", orgId: (await f.tenants.createCompany(tmcId, "X")).id });
    const secrets: string[] = [client.secret, scimUser.secret, scimUser.scimToken!, "wrong-secret-value"];
    const issued = await fetch(client.clientId, client.secret, "192.0.2.30").promise;
    secrets.push(issued.accessToken);
    const exchanged = await fetch(client.clientId, client.secret, "192.0.2.30", {
      grantType: "urn:ietf:params:oauth:grant-type:token-exchange",
      subjectToken: issued.accessToken,
      subjectTokenType: "urn:ietf:params:oauth:token-type:access_token",
    }).promise;
    secrets.push(exchanged.accessToken, exchanged.refreshToken!);
    await rejectsWith(fetch(client.clientId, "wrong-secret-value", "192.0.2.31").promise, invalidClient);
    await rejectsWith(fetch(scimUser.clientId, scimUser.secret, "192.0.2.32").promise, invalidClient);
    await rejectsWith(fetch(client.clientId, client.secret, "192.0.2.30", { scope: "root" }).promise, { code: "INVALID_SCOPE", message: "Scope not allowed: root" });
    const basic = call("192.0.2.33");
    await endpoint.fetchToken(tokenRequest({ credentials: { formClientId: "", formClientSecret: "", authorization: basicHeader(client.clientId, client.secret) } }), basic.tokenCall);

    assert.deepEqual(
      audit.events.map((e) => [e.action, e.actor, e.tmcId, e.details?.grantType, e.details?.errorCode]),
      [
        ["TOKEN_ISSUED", client.clientId, tmcId, "client_credentials", undefined],
        ["TOKEN_ISSUED", client.clientId, tmcId, "urn:ietf:params:oauth:grant-type:token-exchange", undefined],
        ["TOKEN_REFUSED", client.clientId, null, "client_credentials", "INVALID_CLIENT"],
        ["TOKEN_REFUSED", scimUser.clientId, null, "client_credentials", "INVALID_CLIENT"],
        // Authenticated, then refused: the event names the tenant.
        ["TOKEN_REFUSED", client.clientId, tmcId, "client_credentials", "INVALID_SCOPE"],
        ["TOKEN_ISSUED", client.clientId, tmcId, "client_credentials", undefined],
      ],
    );
    const written = JSON.stringify(audit.events);
    for (const secret of secrets) assert.equal(written.includes(secret), false, `audit must not contain ${secret.slice(0, 12)}…`);
  });

  test("an internal failure is audited as INTERNAL_ERROR and rethrown unchanged; a huge claimed id is cut to 128 characters", async () => {
    f.store.failNext("apiUsers.findActive", new Error("connection terminated unexpectedly"));
    await assert.rejects(fetch(client.clientId, client.secret, "192.0.2.40").promise, { message: "connection terminated unexpectedly" });
    assert.deepEqual(audit.events.at(-1)?.details, { grantType: "client_credentials", errorCode: "INTERNAL_ERROR" });
    await rejectsWith(fetch("x".repeat(300), "s", "192.0.2.41", { grantType: "g".repeat(200) }).promise, {
      code: "UNSUPPORTED_GRANT_TYPE",
      message: `Unsupported grant_type "${"g".repeat(80)}"`,
      params: [{ name: "grant_type", value: "g".repeat(80) }],
    });
    assert.equal(audit.events.at(-1)?.actor, "x".repeat(128));
    assert.equal(audit.events.at(-1)?.details?.grantType, "g".repeat(80));
  });

  test("the legacy endpoint: same limits and audit, grantType 'legacy', the documented lifetime", async () => {
    const c = call("192.0.2.50", "req-legacy");
    const issued = await endpoint.legacyToken(postCredentials(client.clientId, client.secret), c.tokenCall);
    assert.equal(issued.expiresIn, LEGACY_TTL);
    assert.deepEqual([c.decisions.length, audit.events.at(-1)?.details, audit.events.at(-1)?.debugIdentifier], [1, { grantType: "legacy" }, "req-legacy"]);
  });

  test("introspection: active only for a valid token of the caller's TMC; rate limited; not audited", async () => {
    const token = (await fetch(client.clientId, client.secret, "192.0.2.60").promise).accessToken;
    const eventsBefore = audit.events.length;
    const peer = await newApiUser(f, tmcId);
    const foreign = await newApiUser(f, (await newTenant(f)).tmcId);
    const introspect = (who: ProvisionedApiUser, t: string) => {
      const c = call("192.0.2.61");
      return { promise: endpoint.introspect(postCredentials(who.clientId, who.secret), t, c.tokenCall), decisions: c.decisions };
    };
    const own = introspect(peer, token);
    assert.equal((await own.promise)?.clientId, client.clientId);
    assert.equal(own.decisions.length, 1);
    assert.equal(await introspect(foreign, token).promise, undefined);
    assert.equal(await introspect(peer, "not-a-token").promise, undefined);
    await rejectsWith(endpoint.introspect(postCredentials(peer.clientId, "wrong"), token, call("192.0.2.62").tokenCall), invalidClient);
    assert.equal(audit.events.length, eventsBefore);
  });
});
