import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import type { RateLimitDecision, RateLimits } from "../../../src/domain/rate-limit/model.js";
import { TokenRateLimiter } from "../../../src/domain/rate-limit/token-rate-limiter.js";
import { ClientAuthenticator, type ClientAttempt } from "../../../src/domain/tokens/client-authenticator.js";
import { ResourceServerAuthenticator } from "../../../src/domain/resource-servers/resource-server-authenticator.js";
import { FairAdmission, type Admission, type Party } from "../../../src/domain/shared/admission.js";
import { ClientAuthPipeline, type TokenCall } from "../../../src/domain/shared/client-auth-pipeline.js";
import { IntrospectionEndpoint } from "../../../src/domain/tokens/introspection-endpoint.js";
import { TokenEndpoint } from "../../../src/domain/tokens/token-endpoint.js";
import { DpopNonces, DpopProofs } from "../../../src/domain/tokens/dpop-proofs.js";

const NO_DPOP = { proof: undefined, target: undefined };
import { DomainError } from "../../../src/errors/domain-error.js";
import { memoryBudgetCounters } from "../../../src/store/memory/budget-counters.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import {
  basicHeader,
  createPgliteFixture,
  LEGACY_TTL,
  newApiUser,
  newTenant,
  postCredentials,
  tokenRequest,
  type PgliteDomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";
import { RecordingAuditSink, RecordingLabelledCounter } from "../../fakes/observability.js";

const LIMITS: RateLimits = {
  perClient: { points: 5, durationSeconds: 60 },
  perAddress: { points: 100, durationSeconds: 60 },
  failures: { points: 3, durationSeconds: 900 },
};
const invalidClient = { code: "INVALID_CLIENT", message: "Client authentication failed" } as const;

/** The real ClientAuthenticator, counting its secret comparisons (`verify`). */
class CountingAuthenticator extends ClientAuthenticator {
  verifications = 0;
  override verify(attempt: ClientAttempt) {
    this.verifications += 1;
    return super.verify(attempt);
  }
}

describe("TokenEndpoint", () => {
  let f: PgliteDomainFixture;
  let tmcId: string;
  let client: ProvisionedApiUser;
  let audit: RecordingAuditSink;
  let clients: CountingAuthenticator;
  let limiter: TokenRateLimiter;
  let endpoint: TokenEndpoint;
  let introspection: IntrospectionEndpoint;
  /** A fresh limiter (budgets as `limits`), pipeline and endpoints; the fixture's domain stays. */
  const useLimits = (limits: RateLimits, admission: Admission = { enter: () => Promise.resolve(() => {}) }) => {
    limiter = new TokenRateLimiter(limits, memoryBudgetCounters("t:"));
    const resourceServers = new ResourceServerAuthenticator({
      uow: f.uow,
      servers: f.repos.resourceServers,
      pepper: f.keys.secretPepper,
    });
    const pipeline = new ClientAuthPipeline({
      apiUsers: { authentication: clients, limiter },
      resourceServers: { authentication: resourceServers, limiter },
      audit,
      admission,
      admissions: new RecordingLabelledCounter<"path">(),
    });
    // These requests carry no DPoP proof: the replay store is never asked.
    const dpop = new DpopProofs({
      nonces: new DpopNonces(f.keys.dpopNonceKey),
      replay: { useOnce: () => Promise.reject(new Error("no proof expected")) },
      now: f.clock.now,
    });
    endpoint = new TokenEndpoint({ pipeline, tokens: f.tokenService, audit, dpop });
    introspection = new IntrospectionEndpoint({
      pipeline,
      tokens: f.tokenService,
      audit,
      introspections: new RecordingLabelledCounter<"resource_server" | "active">(),
    });
  };
  beforeEach(async () => {
    f = await createPgliteFixture();
    ({ tmcId } = await newTenant(f));
    client = await newApiUser(f, tmcId);
    audit = new RecordingAuditSink();
    clients = new CountingAuthenticator({ uow: f.uow, apiUsers: f.repos.apiUsers, pepper: f.keys.secretPepper });
    useLimits(LIMITS);
  });

  /**
   * A call from `address`; `decisions` receives each rate-limit decision with whether this call
   * had looked the client up yet and how many secret comparisons had been made by then.
   */
  const call = (address: string, requestId = "req-1") => {
    const decisions: Array<RateLimitDecision & { authenticatedYet: boolean; verificationsSoFar: number }> = [];
    const lookUpsBefore = f.store.calls.filter((c) => c === "apiUsers.findActive").length;
    const tokenCall: TokenCall = {
      requestId,
      remoteAddress: address,
      onRateLimit: (decision) =>
        decisions.push({
          ...decision,
          authenticatedYet: f.store.calls.filter((c) => c === "apiUsers.findActive").length > lookUpsBefore,
          verificationsSoFar: clients.verifications,
        }),
    };
    return { tokenCall, decisions };
  };
  const fetch = (
    clientId: string,
    secret: string,
    address: string,
    fields: Parameters<typeof tokenRequest>[0] = {},
  ) => {
    const c = call(address);
    return {
      promise: endpoint.fetchToken(
        tokenRequest({ credentials: postCredentials(clientId, secret), ...fields }),
        c.tokenCall,
        NO_DPOP,
      ),
      decisions: c.decisions,
    };
  };
  /**
   * TOO_MANY_REQUESTS whose retryAfterSeconds is the refusing decision's — the last one reported
   * (a whole number of seconds within the window). Returns that decision.
   */
  const rateLimited = async <D extends RateLimitDecision>(
    promise: Promise<unknown>,
    decisions: readonly D[],
  ): Promise<D> => {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    const refusal = decisions.at(-1);
    assert.ok(error instanceof DomainError, `expected TOO_MANY_REQUESTS, got ${String(error)}`);
    assert.ok(refusal && !refusal.allowed, "the refusal was reported through onRateLimit");
    assert.deepEqual(
      { code: error.code, message: error.message, params: error.params, detail: error.detail },
      {
        code: "TOO_MANY_REQUESTS",
        message: "Rate limit exceeded; retry later with exponential backoff",
        params: [{ name: "retryAfterSeconds", value: String(refusal.retryAfterSeconds) }],
        detail: "",
      },
    );
    const retryAfter = refusal.retryAfterSeconds!;
    assert.ok(
      Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= refusal.windowSeconds,
      `retryAfterSeconds ${retryAfter}`,
    );
    assert.equal(retryAfter, refusal.resetSeconds);
    return refusal;
  };
  const issued = async (promise: Promise<{ tokenType: string }>) => assert.equal((await promise).tokenType, "Bearer");
  /** The operator's view of a lockout, without the (time-dependent) reset. */
  const lockoutOf = async (clientId: string | undefined, address: string) => {
    const { resetSeconds, ...rest } = await limiter.lockout(clientId, address);
    assert.ok(resetSeconds >= 0 && resetSeconds <= LIMITS.failures.durationSeconds);
    return rest;
  };
  const withoutTime = <T extends { resetSeconds: number }>(d: T) => ({ ...d, resetSeconds: "<s>" });

  test("an issued token: the address budget is reported before authentication, the tighter of it and the client's after; TOKEN_ISSUED is audited", async () => {
    f.store.calls.length = 0;
    const { promise, decisions } = fetch(client.clientId, client.secret, "198.51.100.1");
    const issued = await promise;
    assert.equal(issued.tokenType, "Bearer");
    assert.deepEqual(decisions.map(withoutTime), [
      {
        allowed: true,
        limit: 100,
        remaining: 99,
        resetSeconds: "<s>",
        windowSeconds: 60,
        retryAfterSeconds: undefined,
        exhausted: undefined,
        authenticatedYet: false,
        verificationsSoFar: 0,
      },
      {
        allowed: true,
        limit: 5,
        remaining: 4,
        resetSeconds: "<s>",
        windowSeconds: 60,
        retryAfterSeconds: undefined,
        exhausted: undefined,
        authenticatedYet: true,
        verificationsSoFar: 1,
      },
    ]);
    for (const d of decisions) assert.ok(d.resetSeconds >= 1 && d.resetSeconds <= 60);
    assert.deepEqual(audit.events, [
      {
        action: "TOKEN_ISSUED",
        outcome: "SUCCESS",
        actor: client.clientId,
        tmcId,
        targetClientId: client.clientId,
        debugIdentifier: "req-1",
        details: { grantType: "client_credentials", remoteAddress: "198.51.100.1" },
      },
    ]);
    assert.equal(clients.verifications, 1);
    assert.deepEqual(
      await lockoutOf(client.clientId, "198.51.100.1"),
      { failures: 0, limit: 3, lockedOut: false },
      "the success gave its point back",
    );
  });

  test("a caller gone while its request waits for its TMC's slot is dropped from the queue: no token, no introspection, the token refusal audited CANCELED", async () => {
    // A pool of 2 at half each: the TMC runs one call at a time, and the test holds that slot.
    const fair = new FairAdmission(
      { partyShare: 0.5, unauthenticatedShare: 0.5, queuePerParty: 4, queueWaitMs: 10_000, limitMax: 100 },
      2,
    );
    let queued: (() => void) | undefined;
    useLimits(LIMITS, {
      enter: (party: Party, signal?: AbortSignal) => {
        const entering = fair.enter(party, signal);
        if (party.kind === "tmc") queued?.();
        return entering;
      },
    });
    const { accessToken } = await endpoint.fetchToken(
      tokenRequest({ credentials: postCredentials(client.clientId, client.secret) }),
      call("198.51.100.9").tokenCall,
      NO_DPOP,
    );
    const held = await fair.enter({ kind: "tmc", id: tmcId });
    audit.events.length = 0;
    const closed = new DomainError("CANCELED", "The client closed the request");
    const calls = [
      (tokenCall: TokenCall) =>
        endpoint.fetchToken(
          tokenRequest({ credentials: postCredentials(client.clientId, client.secret) }),
          tokenCall,
          NO_DPOP,
        ),
      (tokenCall: TokenCall) =>
        introspection.introspect(postCredentials(client.clientId, client.secret), accessToken, tokenCall),
    ];
    for (const [index, start] of calls.entries()) {
      const gone = new AbortController();
      const inQueue = new Promise<void>((resolve) => (queued = resolve));
      const answer = start({ ...call("198.51.100.9", `req-gone-${index}`).tokenCall, signal: gone.signal }).catch(
        (error: unknown) => error,
      );
      await inQueue;
      gone.abort(closed);
      const settled = await Promise.race([answer, new Promise((r) => setTimeout(r, 2_000, "still queued"))]);
      assert.equal(settled, closed, "the call left the queue with the caller's reason");
    }
    held();
    // The token endpoint audits every refusal; introspection audits the answers it gives, and gave none.
    assert.deepEqual(
      audit.events.map((e) => [e.action, e.debugIdentifier, e.details?.errorCode]),
      [["TOKEN_REFUSED", "req-gone-0", "CANCELED"]],
    );
    assert.deepEqual({ running: fair.state.running, parties: fair.state.parties }, { running: 0, parties: 0 });
  });

  test("the per-client budget is spent only by authenticated requests: wrong secrets never exhaust it; the sixth in the window is 429, audited TOKEN_RATE_LIMITED", async () => {
    for (let i = 0; i < 10; i++)
      await rejectsWith(fetch(client.clientId, "wrong", `203.0.113.${i}`).promise, invalidClient);
    for (let i = 0; i < 5; i++) await issued(fetch(client.clientId, client.secret, `198.51.100.${i}`).promise);
    const { promise, decisions } = fetch(client.clientId, client.secret, "198.51.100.99");
    await rateLimited(promise, decisions);
    assert.deepEqual(
      decisions.map(({ retryAfterSeconds: _r, ...d }) => withoutTime(d)),
      [
        {
          allowed: true,
          limit: 100,
          remaining: 99,
          resetSeconds: "<s>",
          windowSeconds: 60,
          exhausted: undefined,
          authenticatedYet: false,
          verificationsSoFar: 15,
        },
        {
          allowed: false,
          limit: 5,
          remaining: 0,
          resetSeconds: "<s>",
          windowSeconds: 60,
          exhausted: "client",
          authenticatedYet: true,
          verificationsSoFar: 16,
        },
      ],
    );
    assert.deepEqual(audit.events.at(-1), {
      action: "TOKEN_RATE_LIMITED",
      outcome: "RATE_LIMITED",
      actor: client.clientId,
      tmcId,
      targetClientId: client.clientId,
      debugIdentifier: "req-1",
      details: { grantType: "client_credentials", errorCode: "TOO_MANY_REQUESTS", remoteAddress: "198.51.100.99" },
    });
    assert.deepEqual(
      await lockoutOf(client.clientId, "198.51.100.99"),
      { failures: 0, limit: 3, lockedOut: false },
      "authenticated: not a failure",
    );
  });

  test("every request spends its address's budget first: once spent, 429 before the client is even looked up", async () => {
    useLimits({
      perClient: { points: 1000, durationSeconds: 60 },
      perAddress: { points: 3, durationSeconds: 60 },
      failures: { points: 10, durationSeconds: 900 },
    });
    const host = "198.51.100.30";
    await rejectsWith(fetch("made-up", "guess", host).promise, invalidClient);
    await rejectsWith(fetch(client.clientId, "wrong", host).promise, invalidClient);
    await issued(fetch(client.clientId, client.secret, host).promise);
    f.store.calls.length = 0;
    const { promise, decisions } = fetch(client.clientId, client.secret, host);
    await rateLimited(promise, decisions);
    assert.deepEqual(
      decisions.map(({ retryAfterSeconds: _r, ...d }) => withoutTime(d)),
      [
        {
          allowed: false,
          limit: 3,
          remaining: 0,
          resetSeconds: "<s>",
          windowSeconds: 60,
          exhausted: "address",
          authenticatedYet: false,
          verificationsSoFar: 3,
        },
      ],
    );
    assert.deepEqual(f.store.calls, [], "never reached the database");
    assert.deepEqual(
      [audit.events.at(-1)?.action, audit.events.at(-1)?.tmcId, audit.events.at(-1)?.details],
      [
        "TOKEN_RATE_LIMITED",
        null,
        { grantType: "client_credentials", errorCode: "TOO_MANY_REQUESTS", remoteAddress: host },
      ],
    );
    await issued(fetch(client.clientId, client.secret, "198.51.100.31").promise);
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
    assert.equal(clients.verifications, 1, "only the well-formed request was evaluated");
    assert.deepEqual(await lockoutOf(client.clientId, "192.0.2.20"), { failures: 0, limit: 3, lockedOut: false });
    assert.deepEqual(await lockoutOf(undefined, "192.0.2.20"), { failures: 0, limit: 3, lockedOut: false });
  });

  test("every outcome is audited and no audit event holds a secret or a token", async () => {
    const scimUser = await newApiUser(f, tmcId, {
      role: "COMPANY_ADMIN",
      credentialType: "SCIM_TOKEN",
      orgId: (await f.tenants.createCompany(tmcId, "X")).id,
    });
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
    await rejectsWith(fetch(client.clientId, client.secret, "192.0.2.30", { scope: "root" }).promise, {
      code: "INVALID_SCOPE",
      message: "Scope not allowed: root",
    });
    const basic = call("192.0.2.33");
    await endpoint.fetchToken(
      tokenRequest({
        credentials: {
          formClientId: "",
          formClientSecret: "",
          authorization: basicHeader(client.clientId, client.secret),
        },
      }),
      basic.tokenCall,
      NO_DPOP,
    );

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
    assert.deepEqual(
      audit.events.map((e) => e.details?.remoteAddress),
      ["192.0.2.30", "192.0.2.30", "192.0.2.31", "192.0.2.32", "192.0.2.30", "192.0.2.33"],
      "every event carries the source address",
    );
    const written = JSON.stringify(audit.events);
    for (const secret of secrets)
      assert.equal(written.includes(secret), false, `audit must not contain ${secret.slice(0, 12)}…`);
  });

  test("an internal failure is audited as INTERNAL_ERROR and rethrown unchanged; a huge claimed id is cut to 128 characters", async () => {
    f.store.failNext("apiUsers.findActive", new Error("connection terminated unexpectedly"));
    await assert.rejects(fetch(client.clientId, client.secret, "192.0.2.40").promise, {
      message: "connection terminated unexpectedly",
    });
    assert.deepEqual(audit.events.at(-1)?.details, {
      grantType: "client_credentials",
      errorCode: "INTERNAL_ERROR",
      remoteAddress: "192.0.2.40",
    });
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
    assert.deepEqual(
      [c.decisions.length, audit.events.at(-1)?.details, audit.events.at(-1)?.debugIdentifier],
      [2, { grantType: "legacy", remoteAddress: "192.0.2.50" }, "req-legacy"],
    );
    for (let i = 0; i < 3; i++)
      await rejectsWith(
        endpoint.legacyToken(postCredentials(client.clientId, "wrong"), call("192.0.2.51").tokenCall),
        invalidClient,
      );
    const locked = call("192.0.2.51", "req-legacy-locked");
    const refusal = await rateLimited(
      endpoint.legacyToken(postCredentials(client.clientId, "wrong"), locked.tokenCall),
      locked.decisions,
    );
    assert.equal(refusal.exhausted, "client-at-address-failures", "the same lockout as the token endpoint's");
    assert.deepEqual(audit.events.at(-1)?.details, {
      grantType: "legacy",
      errorCode: "TOO_MANY_REQUESTS",
      remoteAddress: "192.0.2.51",
    });
    await endpoint.legacyToken(postCredentials(client.clientId, client.secret), call("192.0.2.51").tokenCall); // the right secret still passes
  });

  test("introspection: active only for a valid token of the caller's TMC; rate limited; every answer audited TOKEN_INTROSPECTED", async () => {
    const token = (await fetch(client.clientId, client.secret, "192.0.2.60").promise).accessToken;
    const eventsBefore = audit.events.length;
    const peer = await newApiUser(f, tmcId);
    const foreignTmc = (await newTenant(f)).tmcId;
    const foreign = await newApiUser(f, foreignTmc);
    const introspect = (who: ProvisionedApiUser, t: string, requestId: string) => {
      const c = call("192.0.2.61", requestId);
      return {
        promise: introspection.introspect(postCredentials(who.clientId, who.secret), t, c.tokenCall),
        decisions: c.decisions,
      };
    };
    const own = introspect(peer, token, "req-i1");
    assert.equal((await own.promise)?.clientId, client.clientId);
    assert.deepEqual(
      own.decisions.map((d) => [d.allowed, d.limit, d.authenticatedYet]),
      [
        [true, 100, false],
        [true, 5, true],
      ],
      "the address's budget, then the client's",
    );
    assert.equal(await introspect(foreign, token, "req-i2").promise, undefined);
    assert.equal(await introspect(peer, "not-a-token", "req-i3").promise, undefined);
    await rejectsWith(
      introspection.introspect(postCredentials(peer.clientId, "wrong"), token, call("192.0.2.62", "req-i4").tokenCall),
      invalidClient,
    );
    assert.deepEqual(
      audit.events.slice(eventsBefore),
      [
        {
          action: "TOKEN_INTROSPECTED",
          outcome: "SUCCESS",
          actor: peer.clientId,
          tmcId,
          targetClientId: client.clientId,
          debugIdentifier: "req-i1",
          details: { active: true, remoteAddress: "192.0.2.61" },
        },
        {
          action: "TOKEN_INTROSPECTED",
          outcome: "SUCCESS",
          actor: foreign.clientId,
          tmcId: foreignTmc,
          targetClientId: null,
          debugIdentifier: "req-i2",
          details: { active: false, remoteAddress: "192.0.2.61" },
        },
        {
          action: "TOKEN_INTROSPECTED",
          outcome: "SUCCESS",
          actor: peer.clientId,
          tmcId,
          targetClientId: null,
          debugIdentifier: "req-i3",
          details: { active: false, remoteAddress: "192.0.2.61" },
        },
        {
          action: "TOKEN_INTROSPECTION_REFUSED",
          outcome: "FAILURE",
          actor: peer.clientId,
          tmcId: null,
          targetClientId: null,
          debugIdentifier: "req-i4",
          details: { errorCode: "INVALID_CLIENT", remoteAddress: "192.0.2.62" },
        },
      ],
      "one event per answered introspection and one for the refused caller; never the token",
    );
    assert.equal(JSON.stringify(audit.events).includes(token), false);
  });

  test("introspection by a company admin: a TMC admin's token is inactive to it, audited active false", async () => {
    const orgId = (await f.tenants.createCompany(tmcId, "Acme")).id;
    const companyAdmin = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", orgId });
    const colleague = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", orgId });
    const adminToken = (await fetch(client.clientId, client.secret, "192.0.2.63").promise).accessToken;
    const colleagueToken = (await fetch(colleague.clientId, colleague.secret, "192.0.2.63").promise).accessToken;
    const eventsBefore = audit.events.length;
    assert.equal(
      await introspection.introspect(
        postCredentials(companyAdmin.clientId, companyAdmin.secret),
        adminToken,
        call("192.0.2.64", "req-ca1").tokenCall,
      ),
      undefined,
    );
    assert.equal(
      (
        await introspection.introspect(
          postCredentials(companyAdmin.clientId, companyAdmin.secret),
          colleagueToken,
          call("192.0.2.64", "req-ca2").tokenCall,
        )
      )?.clientId,
      colleague.clientId,
    );
    assert.deepEqual(
      audit.events
        .slice(eventsBefore)
        .map((e) => [e.action, e.outcome, e.actor, e.tmcId, e.targetClientId, e.debugIdentifier, e.details]),
      [
        [
          "TOKEN_INTROSPECTED",
          "SUCCESS",
          companyAdmin.clientId,
          tmcId,
          null,
          "req-ca1",
          { active: false, remoteAddress: "192.0.2.64" },
        ],
        [
          "TOKEN_INTROSPECTED",
          "SUCCESS",
          companyAdmin.clientId,
          tmcId,
          colleague.clientId,
          "req-ca2",
          { active: true, remoteAddress: "192.0.2.64" },
        ],
      ],
    );
  });

  test("no client authentication at all: CLIENT_AUTHENTICATION_REQUIRED, audited as refused, no failure point spent", async () => {
    const noAuthentication = {
      code: "CLIENT_AUTHENTICATION_REQUIRED",
      message: "Client authentication is required (HTTP Basic, or client_id and client_secret)",
    } as const;
    const address = "192.0.2.65";
    f.store.calls.length = 0;
    for (let i = 0; i < 4; i++) await rejectsWith(fetch("", "", address).promise, noAuthentication);
    await rejectsWith(endpoint.legacyToken(postCredentials("", ""), call(address).tokenCall), noAuthentication);
    await rejectsWith(
      introspection.introspect(postCredentials("", ""), "x", call(address).tokenCall),
      noAuthentication,
    );
    assert.deepEqual(f.store.calls, [], "refused before any lookup");
    assert.equal(clients.verifications, 0);
    assert.deepEqual(
      audit.events.map((e) => [e.action, e.outcome, e.actor, e.tmcId, e.targetClientId, e.details]),
      [
        ...Array.from({ length: 4 }, () => [
          "TOKEN_REFUSED",
          "FAILURE",
          null,
          null,
          null,
          { grantType: "client_credentials", errorCode: "CLIENT_AUTHENTICATION_REQUIRED", remoteAddress: address },
        ]),
        [
          "TOKEN_REFUSED",
          "FAILURE",
          null,
          null,
          null,
          { grantType: "legacy", errorCode: "CLIENT_AUTHENTICATION_REQUIRED", remoteAddress: address },
        ],
        [
          "TOKEN_INTROSPECTION_REFUSED",
          "FAILURE",
          null,
          null,
          null,
          { errorCode: "CLIENT_AUTHENTICATION_REQUIRED", remoteAddress: address },
        ],
      ],
    );
    assert.deepEqual(
      await lockoutOf(undefined, address),
      { failures: 0, limit: 3, lockedOut: false },
      "more refusals than the failure budget, none counted",
    );
    await issued(fetch(client.clientId, client.secret, address).promise);
  });

  describe("lockout: failures count per (client, address) for a client, per address for unknown ids", () => {
    /** Request budgets out of the way: only the failure budget (3 per 900 s) decides. */
    const ROOMY: RateLimits = {
      perClient: { points: 1000, durationSeconds: 60 },
      perAddress: { points: 1000, durationSeconds: 60 },
      failures: { points: 3, durationSeconds: 900 },
    };
    beforeEach(() => useLimits(ROOMY));
    const tooMany = {
      code: "TOO_MANY_REQUESTS",
      message: "Rate limit exceeded; retry later with exponential backoff",
    } as const;
    /** The outcome of a settled attempt: "issued", an error code, or the unexpected error. */
    const outcomeOf = (settled: PromiseSettledResult<unknown>) =>
      settled.status === "fulfilled"
        ? "issued"
        : settled.reason instanceof DomainError
          ? settled.reason.code
          : String(settled.reason);

    test("unknown client ids from an address never lock out a real client at that address", async () => {
      const nat = "198.51.100.7";
      const revoked = await newApiUser(f, tmcId);
      await f.admin.revoke({ clientId: client.clientId, tmcId }, revoked.clientId, "r");
      const scimUser = await newApiUser(f, tmcId, {
        role: "COMPANY_ADMIN",
        credentialType: "SCIM_TOKEN",
        orgId: (await f.tenants.createCompany(tmcId, "S")).id,
      });
      // A made-up id, a revoked client's and a SCIM-token user's: none is a client of the token endpoint.
      for (const [id, secret] of [
        ["made-up-0", "guess"],
        [revoked.clientId, revoked.secret],
        [scimUser.clientId, scimUser.secret],
      ] as const) {
        await rejectsWith(fetch(id, secret, nat).promise, invalidClient);
      }
      assert.equal(clients.verifications, 3, "each was evaluated");
      assert.deepEqual(await lockoutOf(undefined, nat), { failures: 3, limit: 3, lockedOut: true });
      assert.deepEqual(
        await lockoutOf(revoked.clientId, nat),
        { failures: 0, limit: 3, lockedOut: false },
        "counted for the address, not for the ids",
      );

      const guess = fetch("made-up-1", "guess", nat);
      const refusal = await rateLimited(guess.promise, guess.decisions);
      assert.deepEqual(
        [refusal.exhausted, refusal.limit, refusal.windowSeconds, refusal.remaining, refusal.verificationsSoFar],
        ["unknown-client-failures", 3, 900, 0, 3],
        "the guesser is stopped before its guess is evaluated",
      );

      await issued(fetch(client.clientId, client.secret, nat).promise);
      await rejectsWith(fetch(client.clientId, "typo", nat).promise, invalidClient); // its own budget, not the address's
      await issued(fetch(client.clientId, client.secret, nat).promise);
      assert.deepEqual(await lockoutOf(client.clientId, nat), { failures: 1, limit: 3, lockedOut: false });
      const other = await newApiUser(f, tmcId);
      await issued(fetch(other.clientId, other.secret, nat).promise);
      assert.equal(clients.verifications, 7);
    });

    test("a client's failures at one address lock it out there only: elsewhere it keeps getting tokens; others at that address are unaffected", async () => {
      const attacker = "203.0.113.9";
      for (let i = 0; i < 3; i++)
        await rejectsWith(fetch(client.clientId, `wrong-${i}`, attacker).promise, invalidClient);
      assert.deepEqual(
        audit.events.map((e) => [e.action, e.outcome, e.actor, e.tmcId, e.targetClientId, e.details]),
        Array.from({ length: 3 }, () => [
          "TOKEN_REFUSED",
          "FAILURE",
          client.clientId,
          null,
          null,
          { grantType: "client_credentials", errorCode: "INVALID_CLIENT", remoteAddress: attacker },
        ]),
      );
      assert.deepEqual(await lockoutOf(client.clientId, attacker), { failures: 3, limit: 3, lockedOut: true });

      const locked = fetch(client.clientId, "wrong-again", attacker);
      assert.equal(
        (await rateLimited(locked.promise, locked.decisions)).exhausted,
        "client-at-address-failures",
        "a wrong secret, where the guessing happens",
      );
      await issued(fetch(client.clientId, client.secret, attacker).promise); // the right one passes: a stranger at the address cannot lock the client out

      for (const office of ["192.0.2.20", "192.0.2.21"])
        await issued(fetch(client.clientId, client.secret, office).promise);
      await rejectsWith(fetch(client.clientId, "typo", "192.0.2.20").promise, invalidClient);
      assert.deepEqual(await lockoutOf(client.clientId, "192.0.2.20"), { failures: 1, limit: 3, lockedOut: false });
      const other = await newApiUser(f, tmcId);
      await issued(fetch(other.clientId, other.secret, attacker).promise);
      await rejectsWith(fetch("made-up", "guess", attacker).promise, invalidClient); // unknown ids at that address: their own budget
      assert.deepEqual(await lockoutOf(undefined, attacker), { failures: 1, limit: 3, lockedOut: false });
    });

    test("past the lockout, guesses stay bounded by the client's locked-guess budget (10 × the failure limit, all addresses); then locked addresses are refused unevaluated", async () => {
      const shared = "198.51.100.77";
      for (let i = 0; i < 3; i++)
        await rejectsWith(fetch(client.clientId, `wrong-${i}`, shared).promise, invalidClient);
      const guess = async (secret: string) => {
        const attempt = fetch(client.clientId, secret, shared);
        await rateLimited(attempt.promise, attempt.decisions);
      };
      for (let i = 0; i < 29; i++) await guess(`guess-${i}`);
      await issued(fetch(client.clientId, client.secret, shared).promise); // the right secret gives its locked-guess point back
      await guess("guess-29");
      const verified = clients.verifications;
      const spent = fetch(client.clientId, client.secret, shared);
      const refusal = await rateLimited(spent.promise, spent.decisions);
      assert.equal(
        clients.verifications,
        verified,
        "3 + 30 guesses evaluated; now not even the right secret is, at this address",
      );
      assert.equal(refusal.exhausted, "client-locked-guesses");
      await issued(fetch(client.clientId, client.secret, "192.0.2.33").promise); // an address that is not locked out is unaffected
    });

    test("a spent budget answers a wrong secret 429, reports the decision through onRateLimit, and is audited as rate limited", async () => {
      const attacker = "203.0.113.10";
      for (let i = 0; i < 3; i++) await rejectsWith(fetch(client.clientId, "wrong", attacker).promise, invalidClient);
      assert.equal(clients.verifications, 3);
      const { promise, decisions } = fetch(client.clientId, "wrong", attacker);
      await rateLimited(promise, decisions);
      assert.equal(clients.verifications, 4, "evaluated against the client's locked-guess budget");
      assert.deepEqual(
        decisions.map(({ retryAfterSeconds: _r, ...d }) => withoutTime(d)),
        [
          // The address's request budget, before authentication…
          {
            allowed: true,
            limit: 1000,
            remaining: 996,
            resetSeconds: "<s>",
            windowSeconds: 60,
            exhausted: undefined,
            authenticatedYet: false,
            verificationsSoFar: 3,
          },
          // …then the failure budget of this client at this address, once the client was looked up.
          {
            allowed: false,
            limit: 3,
            remaining: 0,
            resetSeconds: "<s>",
            windowSeconds: 900,
            exhausted: "client-at-address-failures",
            authenticatedYet: true,
            verificationsSoFar: 4,
          },
        ],
      );
      assert.ok(
        decisions[1]!.retryAfterSeconds! > 800,
        `retry after ${decisions[1]!.retryAfterSeconds} of a 900 s window just opened`,
      );
      assert.deepEqual(audit.events.at(-1), {
        action: "TOKEN_RATE_LIMITED",
        outcome: "RATE_LIMITED",
        actor: client.clientId,
        tmcId: null,
        targetClientId: null,
        debugIdentifier: "req-1",
        details: { grantType: "client_credentials", errorCode: "TOO_MANY_REQUESTS", remoteAddress: attacker },
      });
      // Introspection authenticates the same way: a wrong secret is refused there too.
      const peer = await newApiUser(f, tmcId);
      const token = (await fetch(peer.clientId, peer.secret, "192.0.2.70").promise).accessToken;
      const introspecting = call(attacker);
      await rateLimited(
        introspection.introspect(postCredentials(client.clientId, "wrong"), token, introspecting.tokenCall),
        introspecting.decisions,
      );
      assert.equal(clients.verifications, 6);
    });

    test("a success gives its point back: 25 successes in a row with a failure budget of 2 stay allowed; only failures count", async () => {
      useLimits({ ...ROOMY, failures: { points: 2, durationSeconds: 900 } });
      const office = "192.0.2.99";
      for (let i = 0; i < 25; i++) await issued(fetch(client.clientId, client.secret, office).promise);
      assert.deepEqual(await lockoutOf(client.clientId, office), { failures: 0, limit: 2, lockedOut: false });
      await rejectsWith(fetch(client.clientId, "typo", office).promise, invalidClient);
      for (let i = 0; i < 25; i++) await issued(fetch(client.clientId, client.secret, office).promise);
      assert.deepEqual(
        await lockoutOf(client.clientId, office),
        { failures: 1, limit: 2, lockedOut: false },
        "the failure stays counted",
      );
      await rejectsWith(fetch(client.clientId, "typo", office).promise, invalidClient);
      const { promise, decisions } = fetch(client.clientId, "typo", office);
      assert.equal(
        (await rateLimited(promise, decisions)).exhausted,
        "client-at-address-failures",
        "the second failure spent the budget",
      );
      assert.equal(clients.verifications, 53);
    });

    test("concurrent attempts never overshoot the budget: exactly as many are answered INVALID_CLIENT as it has points", async () => {
      const attacker = "203.0.113.50";
      const guesses = await Promise.allSettled(
        Array.from({ length: 30 }, (_, i) => fetch(client.clientId, `wrong-${i}`, attacker).promise),
      );
      const outcomes = guesses.map(outcomeOf);
      assert.equal(outcomes.filter((o) => o === "INVALID_CLIENT").length, 3, `outcomes: ${outcomes.join(",")}`);
      assert.equal(outcomes.filter((o) => o === "TOO_MANY_REQUESTS").length, 27, `outcomes: ${outcomes.join(",")}`);
      assert.equal(
        clients.verifications,
        30,
        "27 more compared against the locked-guess budget (3 × 10), answered 429",
      );
      for (const refused of guesses) {
        if (refused.status !== "rejected" || outcomeOf(refused) !== "TOO_MANY_REQUESTS") continue;
        const error = refused.reason as DomainError;
        assert.deepEqual(
          [error.message, error.detail, error.params.map((p) => p.name)],
          [tooMany.message, "", ["retryAfterSeconds"]],
        );
        const retryAfter = Number(error.params[0]!.value);
        assert.ok(
          Number.isInteger(retryAfter) && retryAfter > 800 && retryAfter <= 900,
          `retryAfterSeconds ${retryAfter}`,
        );
      }

      const nat = "198.51.100.50";
      const madeUp = await Promise.allSettled(
        Array.from({ length: 30 }, (_, i) => fetch(`made-up-${i}`, "guess", nat).promise),
      );
      const madeUpOutcomes = madeUp.map(outcomeOf);
      assert.deepEqual(
        [
          madeUpOutcomes.filter((o) => o === "INVALID_CLIENT").length,
          madeUpOutcomes.filter((o) => o === "TOO_MANY_REQUESTS").length,
        ],
        [3, 27],
        `outcomes: ${madeUpOutcomes.join(",")}`,
      );
      assert.equal(clients.verifications, 33, "unknown ids: 27 never compared");
      await issued(fetch(client.clientId, client.secret, nat).promise);
    });

    test("exact errors: a failure is INVALID_CLIENT, a lockout TOO_MANY_REQUESTS with retryAfterSeconds; malformed credentials are INVALID_REQUEST and reserve nothing", async () => {
      const address = "203.0.113.60";
      await rejectsWith(fetch(client.clientId, "wrong", address).promise, {
        code: "INVALID_CLIENT",
        message: "Client authentication failed",
        params: [],
        detail: "",
      });
      await rejectsWith(fetch("made-up", "guess", address).promise, {
        code: "INVALID_CLIENT",
        message: "Client authentication failed",
        params: [],
        detail: "",
      });
      await rejectsWith(fetch(client.clientId, "", address).promise, {
        code: "INVALID_REQUEST",
        message: "Client authentication is required (client_id and client_secret)",
        params: [{ name: "client_id", value: "invalid" }],
      });
      assert.deepEqual(
        [await lockoutOf(client.clientId, address), await lockoutOf(undefined, address)],
        [
          { failures: 1, limit: 3, lockedOut: false },
          { failures: 1, limit: 3, lockedOut: false },
        ],
      );
      for (let i = 0; i < 2; i++) await rejectsWith(fetch(client.clientId, "wrong", address).promise, invalidClient);
      const refused = fetch(client.clientId, "wrong", address);
      const refusal = await rateLimited(refused.promise, refused.decisions);
      assert.deepEqual(
        [refusal.exhausted, refusal.limit, refusal.windowSeconds],
        ["client-at-address-failures", 3, 900],
      );
      const guessed = fetch("made-up-2", "guess", address);
      await rejectsWith(guessed.promise, invalidClient); // the unknown ids' budget at this address has 2 points left
    });

    test("the operator's reset lifts a lockout at once, for that client at that address only", async () => {
      const attacker = "203.0.113.77";
      for (let i = 0; i < 3; i++) await rejectsWith(fetch(client.clientId, "wrong", attacker).promise, invalidClient);
      for (let i = 0; i < 3; i++) await rejectsWith(fetch(`made-up-${i}`, "guess", attacker).promise, invalidClient);
      await limiter.resetLockout(client.clientId, attacker);
      assert.deepEqual(await lockoutOf(client.clientId, attacker), { failures: 0, limit: 3, lockedOut: false });
      await issued(fetch(client.clientId, client.secret, attacker).promise);
      assert.deepEqual(
        await lockoutOf(undefined, attacker),
        { failures: 3, limit: 3, lockedOut: true },
        "the unknown ids' lockout stays",
      );
      const guess = fetch("made-up-9", "guess", attacker);
      await rateLimited(guess.promise, guess.decisions);
      await limiter.resetLockout(undefined, attacker);
      await rejectsWith(fetch("made-up-9", "guess", attacker).promise, invalidClient);
    });

    // A src bug (see the report): a refused reservation is never given back. rate-limiter-flexible
    // counts a refused consume (consumedPoints goes past the budget), and asBudgetCounter.consume
    // (src/store/memory/budget-counters.ts, and the Redis twin) leaves it there, although the
    // BudgetCounter port promises "nothing more is taken". So legitimate attempts that overlap —
    // a client's workers fetching tokens at once — leave one phantom failure per refusal, and the
    // client is locked out at that address for the whole window without a single failed
    // authentication. (That overlapping attempts beyond the budget are refused while the others
    // are in flight is the reservation design; that they stay counted afterwards is the bug.)
    test("concurrent successes leave no failure behind: once they have settled, the client is not locked out", async () => {
      useLimits({ ...ROOMY, failures: { points: 2, durationSeconds: 900 } });
      const office = "192.0.2.120";
      const attempts = await Promise.allSettled(
        Array.from({ length: 25 }, () => fetch(client.clientId, client.secret, office).promise),
      );
      const outcomes = attempts.map(outcomeOf);
      assert.equal(
        outcomes.filter((o) => o === "issued").length + outcomes.filter((o) => o === "TOO_MANY_REQUESTS").length,
        25,
        outcomes.join(","),
      );
      assert.ok(outcomes.includes("issued"));
      assert.deepEqual(
        await lockoutOf(client.clientId, office),
        { failures: 0, limit: 2, lockedOut: false },
        "not one authentication failed",
      );
      await issued(fetch(client.clientId, client.secret, office).promise);
    });
  });
});
