import { DomainError } from "../../errors/domain-error.js";
import type { ApiUser } from "../api-users/model.js";
import { admitted, UNAUTHENTICATED, type Admission, type Party as AdmittedParty } from "../shared/admission.js";
import { isResourceServerId, type ResourceServer } from "../resource-servers/model.js";
import type { AuditSink } from "../audit/model.js";
import type { LabelledCounter } from "../shared/observability.js";
import type { RateLimitDecision } from "../rate-limit/model.js";
import { ClientAuthenticator } from "./client-authenticator.js";
import type { ChangeStreamEvent, CredentialChangeStream } from "./credential-change-stream.js";
import type { IssuedToken, PresentedCredentials, Principal, TokenRequest } from "./model.js";
import { invalidClient, tooManyRequests } from "./oauth-errors.js";
import { tighterOf } from "../rate-limit/model.js";
import type { ResourceServerAuthentication, TokenRequestLimiter } from "./ports.js";
import type { SecurityEventPoll, SecurityEventPollRequest, SecurityEventPollResult } from "./security-event-poll.js";
import type { TokenRevocation } from "./token-revocation.js";
import { TokenService } from "./token-service.js";

/** What the token endpoint knows about the call besides its parameters. */
export interface TokenCall {
  readonly requestId: string;
  readonly remoteAddress: string;
  /** Told the rate-limit decision as soon as it is made (the edge turns it into headers, 429 or not). */
  readonly onRateLimit: (decision: RateLimitDecision) => void;
}

/**
 * The token endpoints as a short list of named steps (node-oidc-provider's shape):
 * rate limit → check the grant type → authenticate the client → grant → audit.
 * Every outcome (issued, refused with its errorCode, rate limited) is audited off the request
 * path; a failed client authentication also spends the failure budget.
 */
export class TokenEndpoint {
  constructor(
    private readonly limiter: TokenRequestLimiter,
    private readonly clients: ClientAuthenticator,
    private readonly tokens: TokenService,
    private readonly audit: AuditSink,
    private readonly wiring: {
      /** RFC 7009 revocation (revoke()). */
      readonly revocation?: TokenRevocation;
      /** Counts which path decided each request: one_round_trip or step_by_step. */
      readonly admissions?: LabelledCounter<"path">;
      /** Resource servers' authentication (introspection by the protected services). */
      readonly resourceServers?: ResourceServerAuthentication;
      /** Resource servers' budgets (their own sizes, counted apart from API users'); absent: the API users' limiter. */
      readonly resourceServerLimiter?: TokenRequestLimiter;
      /** Tokens introspected by each resource server, by answer (no log line per token at that volume). */
      readonly introspections?: LabelledCounter<"resource_server" | "active">;
      /** The credential-change stream resource servers watch (watchChanges()). */
      readonly changeStream?: CredentialChangeStream;
      /** The same changes as Security Event Tokens, polled (pollSecurityEvents()). */
      readonly securityEvents?: SecurityEventPoll;
      /**
       * The instance's fair-share admission: a client lookup runs in the unauthenticated share,
       * the work after authentication in the client's TMC's or the resource server's. Absent: none.
       */
      readonly admission?: Admission;
    } = {},
  ) {}

  /** POST /v2/auth/oauth2-token (FetchOauth2Token). */
  fetchToken(request: TokenRequest, call: TokenCall): Promise<IssuedToken> {
    return this.audited(request.credentials, request.grantType.slice(0, 80), call, async (authenticated) => {
      const client = await this.admit(request.credentials, call, authenticated, () =>
        TokenService.checkGrantType(request.grantType),
      );
      return this.admitted(tmcOf(client), () => this.tokens.grant(client, request));
    });
  }

  /** The deprecated /get-auth-token: JSON credentials only, the documented legacy lifetime. */
  legacyToken(credentials: PresentedCredentials, call: TokenCall): Promise<IssuedToken> {
    return this.audited(credentials, "legacy", call, async (authenticated) => {
      const client = await this.admit(credentials, call, authenticated);
      return this.admitted(tmcOf(client), () => this.tokens.legacyToken(client));
    });
  }

  /**
   * RFC 7662: undefined (inactive) unless the token is valid and of the caller's TMC. Every
   * answer is audited TOKEN_INTROSPECTED; a refused or rate-limited caller is audited too
   * (TOKEN_INTROSPECTION_REFUSED / TOKEN_RATE_LIMITED), like a refused token request.
   */
  async introspect(credentials: PresentedCredentials, token: string, call: TokenCall): Promise<Principal | undefined> {
    if (namesResourceServer(credentials)) return (await this.introspectAsResourceServer(credentials, [token], call))[0];
    let client: ApiUser | undefined;
    try {
      client = await this.admit(credentials, call, (c) => (client = c));
    } catch (error) {
      this.recordRefusal("TOKEN_INTROSPECTION_REFUSED", credentials, client, error, call, {});
      throw error;
    }
    const caller = client;
    const principal = await this.admitted(tmcOf(caller), () => this.tokens.introspect(caller, token));
    this.audit.record({
      action: "TOKEN_INTROSPECTED",
      outcome: "SUCCESS",
      actor: client.clientId,
      tmcId: client.tmcId,
      targetClientId: principal?.clientId ?? null,
      debugIdentifier: call.requestId,
      details: { active: principal !== undefined, remoteAddress: call.remoteAddress },
    });
    return principal;
  }

  /**
   * Batch introspection (IntrospectTokens), for resource servers only: each token answered as
   * introspect() answers it, in order, with one revocation check for the whole batch. An API
   * user's credentials are refused (403 unauthorized_client) before anything is looked up.
   */
  async introspectMany(
    credentials: PresentedCredentials,
    tokens: readonly string[],
    call: TokenCall,
  ): Promise<Array<Principal | undefined>> {
    return this.introspectAsResourceServer(credentials, tokens, call, {
      only: "Batch introspection is for resource servers only",
      details: { batch: "true" },
    });
  }

  /**
   * WatchCredentialChanges, for resource servers only: admitted like batch introspection (an API
   * user refused with 403 unauthorized_client; one call counted against the server's budget),
   * then the cursor is checked, all before the first event. Refusals are audited as refused
   * introspections (stream: "true").
   */
  async watchChanges(
    credentials: PresentedCredentials,
    sinceCursor: string,
    signal: AbortSignal,
    call: TokenCall,
  ): Promise<AsyncIterable<ChangeStreamEvent>> {
    const stream = this.wiring.changeStream;
    if (!stream) throw new Error("the credential-change stream is not wired");
    const server = await this.admittedResourceServer(credentials, call, {
      only: "The credential-change stream is for resource servers only",
      details: { stream: "true" },
    });
    return this.admitted(serverOf(server), () => stream.watch(sinceCursor, signal, server.clientId), signal);
  }

  /** Ends every open change stream and every waiting SET poll (at shutdown, before HTTP closes). */
  stopWatches(): void {
    this.wiring.changeStream?.stop();
    this.wiring.securityEvents?.stop();
  }

  /**
   * RFC 8936 poll delivery of Security Event Tokens, for resource servers only: admitted like the
   * change stream (an API user refused with 403 unauthorized_client; one call counted against the
   * server's budget; refusals audited as refused introspections, ssf: "true"), then its feed is
   * polled; the SETs are addressed to its client id.
   */
  async pollSecurityEvents(
    credentials: PresentedCredentials,
    request: SecurityEventPollRequest,
    signal: AbortSignal,
    call: TokenCall,
  ): Promise<SecurityEventPollResult> {
    const events = this.wiring.securityEvents;
    if (!events) throw new Error("security event polling is not wired");
    const server = await this.admittedResourceServer(credentials, call, {
      only: "Security event polling is for resource servers only",
      details: { ssf: "true" },
    });
    // A long poll waits (without a connection) far longer than any call may hold a slot: only
    // an immediate poll's work is admitted; open polls are bounded per resource server apart.
    if (!request.returnImmediately) return events.poll(server.clientId, request, signal);
    return this.admitted(serverOf(server), () => events.poll(server.clientId, request, signal), signal);
  }

  /**
   * RFC 7662 section 4: a resource server, authenticated with its own credentials and held to
   * budgets and a lockout of the same rules as an API user's (address, then its own failure
   * budget, then its own budget: strangers cannot lock out a correct one), sized and counted
   * apart, learns about the tokens addressed to one of its audiences, whatever their TMC; any
   * other token is inactive. Refusals are audited; answers are counted per resource server.
   */
  private async introspectAsResourceServer(
    credentials: PresentedCredentials,
    tokens: readonly string[],
    call: TokenCall,
    refusal: ResourceServerOnlyRefusal = { details: {} },
  ): Promise<Array<Principal | undefined>> {
    const server = await this.admittedResourceServer(credentials, call, refusal);
    const principals = await this.admitted(serverOf(server), () => this.tokens.introspectFor(server.audiences, tokens));
    const counter = this.wiring.introspections;
    if (counter) {
      const active = principals.filter((p) => p !== undefined).length;
      if (active > 0) counter.inc({ resource_server: server.clientId, active: "true" }, active);
      if (active < principals.length)
        counter.inc({ resource_server: server.clientId, active: "false" }, principals.length - active);
    }
    return principals;
  }

  /**
   * The resource server the credentials admit, or the refusal, audited with `refusal.details`.
   * With `refusal.only`, credentials naming an API user are refused first (403
   * unauthorized_client); no credentials at all stay 401 like anywhere else.
   */
  private async admittedResourceServer(
    credentials: PresentedCredentials,
    call: TokenCall,
    refusal: ResourceServerOnlyRefusal,
  ): Promise<ResourceServer> {
    let server: ResourceServer | undefined;
    try {
      const claimed = ClientAuthenticator.claimedClientId(credentials);
      if (refusal.only !== undefined && claimed !== undefined && !isResourceServerId(claimed))
        throw new DomainError("UNAUTHORIZED_CLIENT", refusal.only);
      server = await this.admitResourceServer(credentials, call, (s) => (server = s));
    } catch (error) {
      const party = server && platformParty(server);
      this.recordRefusal("TOKEN_INTROSPECTION_REFUSED", credentials, party, error, call, refusal.details);
      throw error;
    }
    return server;
  }

  /** admit() for a resource server: its held record in one round trip, else step by step with the same budgets. */
  private async admitResourceServer(
    credentials: PresentedCredentials,
    call: TokenCall,
    authenticated: (server: ResourceServer) => void,
  ): Promise<ResourceServer> {
    const servers = this.wiring.resourceServers;
    if (!servers) throw new Error("resource-server authentication is not wired");
    const limiter = this.wiring.resourceServerLimiter ?? this.limiter;
    const attempt = servers.heldAttempt(credentials);
    const held =
      attempt &&
      (await this.admitHeldRecord(
        attempt,
        call,
        authenticated,
        () => servers.wrongSecret(attempt.record.clientId),
        limiter,
      ));
    if (held) return held;
    this.wiring.admissions?.inc({ path: "step_by_step" });
    const addressBudget = await this.limitAddress(call, limiter);
    const server = await this.authenticateResourceServer(servers, credentials, call, limiter);
    authenticated(server);
    await this.limitClient(server.clientId, addressBudget, call, limiter);
    return server;
  }

  /** authenticate() for a resource server: the same failure budgets, keyed on its id. */
  private async authenticateResourceServer(
    servers: ResourceServerAuthentication,
    credentials: PresentedCredentials,
    call: TokenCall,
    limiter: TokenRequestLimiter,
  ): Promise<ResourceServer> {
    const attempt = await this.admitted(UNAUTHENTICATED, () => servers.lookUp(credentials));
    const reservation = await limiter.reserveAttempt(
      attempt.clientId,
      attempt.server !== undefined,
      call.remoteAddress,
    );
    const refuse = () => {
      call.onRateLimit(reservation.decision);
      return tooManyRequests(reservation.decision.retryAfterSeconds ?? 1);
    };
    if (!reservation.evaluate) throw refuse();
    let server: ResourceServer;
    try {
      server = servers.verify(attempt);
    } catch (error) {
      throw reservation.decision.allowed ? error : refuse();
    }
    await reservation.release();
    return server;
  }

  /**
   * Rate limit the address → check the request → authenticate the client → spend its budget.
   * For a client whose record this instance holds, that is one round trip to the shared store
   * (see admitHeld); otherwise, or when the store cannot vouch for the record, step by step.
   * `authenticated` learns the client as soon as it has authenticated (the audit names it even
   * when its own budget then refuses the request).
   */
  private async admit(
    credentials: PresentedCredentials,
    call: TokenCall,
    authenticated: (client: ApiUser) => void,
    checkRequest: () => void = () => {},
  ): Promise<ApiUser> {
    const held = await this.admitHeld(credentials, call, authenticated, checkRequest);
    if (held) return held;
    this.wiring.admissions?.inc({ path: "step_by_step" });
    const addressBudget = await this.limitAddress(call);
    checkRequest();
    const client = await this.authenticate(credentials, call);
    authenticated(client);
    await this.limitClient(client.clientId, addressBudget, call);
    return client;
  }

  /**
   * The hot path: the secret is compared to the held record first, then one atomic call checks
   * that the record is current and spends the address point, the client point or a failure
   * point (a spent failure budget refuses the attempt whatever the secret). Undefined — nothing
   * spent — sends the request the step-by-step way, which also answers a malformed request.
   */
  private async admitHeld(
    credentials: PresentedCredentials,
    call: TokenCall,
    authenticated: (client: ApiUser) => void,
    checkRequest: () => void,
  ): Promise<ApiUser | undefined> {
    const attempt = this.clients.heldAttempt(credentials);
    if (!attempt) return undefined;
    try {
      checkRequest();
    } catch {
      return undefined;
    }
    return this.admitHeldRecord(
      { record: attempt.client, knownChange: attempt.knownChange, authenticated: attempt.authenticated },
      call,
      authenticated,
      () => invalidClient(attempt.client.clientId, "wrong secret"),
    );
  }

  /** admitHeld's one round trip for any held record (an API user's, a resource server's); `wrongSecret` is its refusal. */
  private async admitHeldRecord<R extends { readonly clientId: string; readonly credentialGeneration: number }>(
    attempt: { readonly record: R; readonly knownChange: number; readonly authenticated: boolean },
    call: TokenCall,
    authenticated: (record: R) => void,
    wrongSecret: () => DomainError,
    limiter: TokenRequestLimiter = this.limiter,
  ): Promise<R | undefined> {
    const { record } = attempt;
    const admission = await limiter.admitHeldClient(record.clientId, call.remoteAddress, {
      generation: record.credentialGeneration,
      knownChange: attempt.knownChange,
      authenticated: attempt.authenticated,
    });
    if (admission.kind === "unknown") return undefined;
    this.wiring.admissions?.inc({ path: "one_round_trip" });
    call.onRateLimit(admission.decision);
    if (admission.kind === "refused") throw wrongSecret();
    if (admission.kind === "admitted" || admission.kind === "client-limited") authenticated(record);
    if (admission.kind !== "admitted") throw tooManyRequests(admission.decision.retryAfterSeconds ?? 1);
    return record;
  }

  /**
   * RFC 7009: the authenticated client revokes a token issued to it. Rate limited and
   * authenticated like the token endpoint; every answer audited (TOKEN_REVOKED with what the
   * request did: what was revoked, nothing, or another client's token left alone; a refusal
   * TOKEN_REVOCATION_REFUSED).
   */
  async revoke(credentials: PresentedCredentials, token: string, hint: string, call: TokenCall): Promise<void> {
    if (!this.wiring.revocation) throw new Error("token revocation is not wired");
    let client: ApiUser | undefined;
    let outcome: string;
    try {
      client = await this.admit(credentials, call, (c) => (client = c));
      outcome = await this.wiring.revocation.revoke(client, token, hint);
    } catch (error) {
      this.recordRefusal("TOKEN_REVOCATION_REFUSED", credentials, client, error, call, {});
      throw error;
    }
    this.audit.record({
      action: "TOKEN_REVOKED",
      outcome: "SUCCESS",
      actor: client.clientId,
      tmcId: client.tmcId,
      targetClientId: client.clientId,
      debugIdentifier: call.requestId,
      details: { revoked: outcome, remoteAddress: call.remoteAddress },
    });
  }

  /** `work` in a slot of `party`'s share of the instance (no admission wired: as it is). */
  private admitted<T>(party: AdmittedParty, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return admitted(this.wiring.admission, party, work, signal);
  }

  /** Every request spends a point of its source address's budget, first. */
  private async limitAddress(call: TokenCall, limiter = this.limiter): Promise<RateLimitDecision> {
    const decision = await limiter.consumeAddress(call.remoteAddress);
    call.onRateLimit(decision);
    if (!decision.allowed) throw tooManyRequests(decision.retryAfterSeconds ?? 1);
    return decision;
  }

  /** Only an authenticated client spends its own budget: nobody without its secret can exhaust it. */
  private async limitClient(
    clientId: string,
    addressBudget: RateLimitDecision,
    call: TokenCall,
    limiter = this.limiter,
  ): Promise<void> {
    const decision = await limiter.consumeClient(clientId);
    call.onRateLimit(tighterOf(addressBudget, decision));
    if (!decision.allowed) throw tooManyRequests(decision.retryAfterSeconds ?? 1);
  }

  /**
   * Authenticates the client. The attempt first reserves a failure point — of this client at this
   * address, or of unknown client ids at this address — and gives it back only on success. A spent
   * budget answers 429: without evaluating the attempt for unknown ids (or once the client's
   * locked-guess budget is spent too), and otherwise for a wrong secret only — the right one passes.
   */
  private async authenticate(credentials: PresentedCredentials, call: TokenCall): Promise<ApiUser> {
    const attempt = await this.admitted(UNAUTHENTICATED, () => this.clients.lookUp(credentials));
    const reservation = await this.limiter.reserveAttempt(
      attempt.clientId,
      attempt.client !== undefined,
      call.remoteAddress,
    );
    const refuse = () => {
      call.onRateLimit(reservation.decision);
      return tooManyRequests(reservation.decision.retryAfterSeconds ?? 1);
    };
    if (!reservation.evaluate) throw refuse();
    let client: ApiUser;
    try {
      client = this.clients.verify(attempt);
    } catch (error) {
      throw reservation.decision.allowed ? error : refuse();
    }
    await reservation.release();
    return client;
  }

  /** Records the outcome in the audit trail: issued, refused (with the errorCode) or rate limited. Never the secret or the token. */
  private async audited<T>(
    credentials: PresentedCredentials,
    grantType: string,
    call: TokenCall,
    run: (authenticated: (client: ApiUser) => ApiUser) => Promise<T>,
  ): Promise<T> {
    let client: ApiUser | undefined;
    try {
      const result = await run((c) => (client = c));
      this.audit.record({
        action: "TOKEN_ISSUED",
        outcome: "SUCCESS",
        actor: client!.clientId,
        tmcId: client!.tmcId,
        targetClientId: client!.clientId,
        debugIdentifier: call.requestId,
        details: { grantType, remoteAddress: call.remoteAddress },
      });
      return result;
    } catch (error) {
      this.recordRefusal("TOKEN_REFUSED", credentials, client, error, call, { grantType });
      throw error;
    }
  }

  /** A refusal in the trail: who claimed to call (never the secret), the errorCode, rate limited or not. */
  private recordRefusal(
    action: "TOKEN_REFUSED" | "TOKEN_INTROSPECTION_REFUSED" | "TOKEN_REVOCATION_REFUSED",
    credentials: PresentedCredentials,
    client: Party | undefined,
    error: unknown,
    call: TokenCall,
    details: Record<string, string>,
  ): void {
    const errorCode = error instanceof DomainError ? error.code : "INTERNAL_ERROR";
    const limited = errorCode === "TOO_MANY_REQUESTS";
    this.audit.record({
      action: limited ? "TOKEN_RATE_LIMITED" : action,
      outcome: limited ? "RATE_LIMITED" : "FAILURE",
      actor: client?.clientId ?? ClientAuthenticator.claimedClientId(credentials)?.slice(0, 128) ?? null,
      tmcId: client?.tmcId ?? null,
      targetClientId: client?.clientId ?? null,
      debugIdentifier: call.requestId,
      details: { ...details, errorCode, remoteAddress: call.remoteAddress },
    });
  }
}

/** How a resource-server-only call refuses: `only`, the message for an API user's credentials; `details`, the audit's. */
interface ResourceServerOnlyRefusal {
  readonly only?: string;
  readonly details: Record<string, string>;
}

/** Who called, as the audit trail names it: an API user (of a TMC), or a resource server (of none). */
interface Party {
  readonly clientId: string;
  readonly tmcId: string | null;
}

const platformParty = (server: ResourceServer): Party => ({ clientId: server.clientId, tmcId: null });

/** Whose share an authenticated caller's work takes: its TMC's, or the resource server's own. */
const tmcOf = (client: ApiUser): AdmittedParty => ({ kind: "tmc", id: client.tmcId });
const serverOf = (server: ResourceServer): AdmittedParty => ({ kind: "resource-server", id: server.clientId });

/** Whether the credentials name a resource server: its ids are its own (model.ts), so the id alone says. */
function namesResourceServer(credentials: PresentedCredentials): boolean {
  const clientId = ClientAuthenticator.claimedClientId(credentials);
  return clientId !== undefined && isResourceServerId(clientId);
}
