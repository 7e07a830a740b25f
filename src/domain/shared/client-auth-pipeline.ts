import { DomainError } from "../../errors/domain-error.js";
import type { ApiUser } from "../api-users/model.js";
import type { AuditSink } from "../audit/model.js";
import { tighterOf, tooManyRequests, type RateLimitDecision } from "../rate-limit/model.js";
import { isResourceServerId, type ResourceServer } from "../resource-servers/model.js";
import { admitted, UNAUTHENTICATED, type Admission, type Party as AdmittedParty } from "./admission.js";
import { claimedClientId, type ClientCredentials } from "./client-credentials.js";
import type { LabelledCounter } from "./observability.js";
import type {
  AuthenticatedClient,
  ClientAttempt,
  ClientAuthentication,
  HeldClient,
  TokenRequestLimiter,
} from "../tokens/ports.js";

/** What the endpoints know about the call besides its parameters. */
export interface TokenCall {
  readonly requestId: string;
  readonly remoteAddress: string;
  /** Told the rate-limit decision as soon as it is made (the edge turns it into headers, 429 or not). */
  readonly onRateLimit: (decision: RateLimitDecision) => void;
  /** Aborted when the caller goes away (or its deadline passes): its work still queued for a slot is dropped. */
  readonly signal?: AbortSignal;
}

/** One kind of client the pipeline admits: how it authenticates, its budgets, and whose share its work takes. */
export interface ClientKind<C extends AuthenticatedClient, A extends ClientAttempt<C> = ClientAttempt<C>> {
  readonly authentication: ClientAuthentication<C, A>;
  readonly limiter: TokenRequestLimiter;
  /** Whose share of the instance an authenticated caller's work takes: its TMC's, or the resource server's own. */
  readonly party: (client: C) => AdmittedParty;
  /** The TMC the audit trail names for it (a resource server serves the platform: none). */
  readonly tmcOf: (client: C) => string | null;
}

/**
 * The pipeline's one decision: the admitted client, or the refusal with the client when it had
 * authenticated before its own budget refused (the audit names it).
 */
export type Admitted<C> =
  | { readonly ok: true; readonly client: C }
  | { readonly ok: false; readonly client: C | undefined; readonly error: unknown };

/** The audited refusals of the endpoints (a rate-limited one is audited TOKEN_RATE_LIMITED instead). */
export type RefusalAction = "TOKEN_REFUSED" | "TOKEN_INTROSPECTION_REFUSED" | "TOKEN_REVOCATION_REFUSED";

/**
 * How a resource-server-only call refuses: `only`, the message for an API user's credentials;
 * `details`, the audit's; `action`, its audited action (TOKEN_INTROSPECTION_REFUSED unless named).
 */
export interface ResourceServerOnlyRefusal {
  readonly only?: string;
  readonly details: Record<string, string>;
  readonly action?: RefusalAction;
}

/** What the pipeline is built from: both kinds' authentication and budgets, the audit, the instance's admission. */
export interface ClientAuthPipelineDeps {
  readonly apiUsers: { readonly authentication: ClientAuthentication<ApiUser>; readonly limiter: TokenRequestLimiter };
  readonly resourceServers: {
    readonly authentication: ClientAuthentication<ResourceServer>;
    /** Resource servers' budgets: their own sizes, counted apart from API users'. */
    readonly limiter: TokenRequestLimiter;
  };
  readonly audit: AuditSink;
  /**
   * The instance's fair-share admission: a client lookup runs in the unauthenticated share, the
   * work after authentication in the client's TMC's or the resource server's.
   */
  readonly admission: Admission;
  /** Counts which path decided each request: one_round_trip or step_by_step. */
  readonly admissions: LabelledCounter<"path">;
}

/**
 * Client authentication for every endpoint that takes a client credential (node-oidc-provider's
 * client_auth shared by its token, introspection and revocation actions), in one pass per
 * request: rate limit the address → check the request → authenticate the client → spend its
 * budget, and one decision returned. For a client whose record this instance holds, that is one
 * round trip to the shared store; otherwise, or when the store cannot vouch for the record, step
 * by step with the same budgets. A failed authentication also spends the failure budget.
 */
export class ClientAuthPipeline {
  readonly apiUsers: ClientKind<ApiUser>;
  readonly resourceServers: ClientKind<ResourceServer>;

  constructor(private readonly deps: ClientAuthPipelineDeps) {
    this.apiUsers = { ...deps.apiUsers, party: tmcOf, tmcOf: (client) => client.tmcId };
    this.resourceServers = { ...deps.resourceServers, party: serverOf, tmcOf: () => null };
  }

  /**
   * The caller the credentials admit, or the refusal. `checkRequest` checks the request's own
   * parameters after the address budget (a malformed request spends nothing else).
   */
  async admit<C extends AuthenticatedClient, A extends ClientAttempt<C>>(
    kind: ClientKind<C, A>,
    credentials: ClientCredentials,
    call: TokenCall,
    checkRequest?: () => void,
  ): Promise<Admitted<C>> {
    let client: C | undefined;
    try {
      const held = kind.limiter.oneRoundTrip && passes(checkRequest) && (await kind.authentication.held(credentials));
      if (held) {
        const decided = await this.admitHeld(kind, held, call);
        if (decided) return decided;
      }
      this.deps.admissions.inc({ path: "step_by_step" });
      const addressBudget = await this.limitAddress(call, kind.limiter);
      checkRequest?.();
      client = await this.authenticate(kind, credentials, call);
      const decision = await kind.limiter.consumeClient(client.clientId);
      call.onRateLimit(tighterOf(addressBudget, decision));
      // Only an authenticated client spends its own budget: nobody without its secret can exhaust it.
      if (!decision.allowed) throw tooManyRequests(decision);
      return { ok: true, client };
    } catch (error) {
      return { ok: false, client, error };
    }
  }

  /**
   * RFC 7662 section 4: the resource server the credentials admit, held to budgets and a lockout
   * of the same rules as an API user's (address, then its own failure budget, then its own
   * budget), sized and counted apart; or the refusal, audited as a refused introspection with
   * `refusal.details`. With `refusal.only`, credentials naming an API user are refused first
   * (403 unauthorized_client); no credentials at all stay 401 like anywhere else.
   */
  async admitResourceServer(
    credentials: ClientCredentials,
    call: TokenCall,
    refusal: ResourceServerOnlyRefusal,
  ): Promise<ResourceServer> {
    const claimed = claimedClientId(credentials);
    const decision =
      refusal.only !== undefined && claimed !== undefined && !isResourceServerId(claimed)
        ? { ok: false as const, client: undefined, error: new DomainError("UNAUTHORIZED_CLIENT", refusal.only) }
        : await this.admit(this.resourceServers, credentials, call);
    if (decision.ok) return decision.client;
    throw this.refused(
      refusal.action ?? "TOKEN_INTROSPECTION_REFUSED",
      this.resourceServers,
      credentials,
      decision,
      call,
      refusal.details,
    );
  }

  /** `work` in a slot of `party`'s share of the instance; dropped from the queue when `signal` aborts. */
  slot<T>(party: AdmittedParty, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return admitted(this.deps.admission, party, work, signal);
  }

  /**
   * A refusal in the trail: who claimed to call (never the secret), the errorCode, rate limited
   * or not. Returns the error, for the endpoint to throw.
   */
  refused<C extends AuthenticatedClient>(
    action: RefusalAction,
    kind: ClientKind<C>,
    credentials: ClientCredentials,
    refusal: { readonly client: C | undefined; readonly error: unknown },
    call: TokenCall,
    details: Record<string, string>,
  ): unknown {
    const { client, error } = refusal;
    const errorCode = error instanceof DomainError ? error.code : "INTERNAL_ERROR";
    const limited = errorCode === "TOO_MANY_REQUESTS";
    this.deps.audit.record({
      action: limited ? "TOKEN_RATE_LIMITED" : action,
      outcome: limited ? "RATE_LIMITED" : "FAILURE",
      actor: client?.clientId ?? claimedClientId(credentials)?.slice(0, 128) ?? null,
      tmcId: client ? kind.tmcOf(client) : null,
      targetClientId: client?.clientId ?? null,
      debugIdentifier: call.requestId,
      details: { ...details, errorCode, remoteAddress: call.remoteAddress },
    });
    return error;
  }

  /**
   * The hot path: the secret was compared to the held record (or the assertion verified with its
   * keys and its jti spent); one atomic call checks that the
   * record is current and spends the address point, the client point or a failure point (a
   * spent failure budget refuses the attempt whatever the secret). Undefined — nothing spent —
   * sends the request the step-by-step way.
   */
  private async admitHeld<C extends AuthenticatedClient, A extends ClientAttempt<C>>(
    kind: ClientKind<C, A>,
    held: HeldClient<C>,
    call: TokenCall,
  ): Promise<Admitted<C> | undefined> {
    const { record } = held;
    const admission = await kind.limiter.admitHeldClient(record.clientId, call.remoteAddress, {
      generation: record.credentialGeneration,
      knownChange: held.knownChange,
      authenticated: held.authenticated,
    });
    if (admission.kind === "unknown") return undefined;
    this.deps.admissions.inc({ path: "one_round_trip" });
    call.onRateLimit(admission.decision);
    if (admission.kind === "admitted") return { ok: true, client: record };
    if (admission.kind === "refused")
      return { ok: false, client: undefined, error: held.refusal ?? kind.authentication.wrongSecret(record.clientId) };
    const error = tooManyRequests(admission.decision);
    return { ok: false, client: admission.kind === "client-limited" ? record : undefined, error };
  }

  /** Every request spends a point of its source address's budget, first. */
  private async limitAddress(call: TokenCall, limiter: TokenRequestLimiter): Promise<RateLimitDecision> {
    const decision = await limiter.consumeAddress(call.remoteAddress);
    call.onRateLimit(decision);
    if (!decision.allowed) throw tooManyRequests(decision);
    return decision;
  }

  /**
   * Authenticates the client. The attempt first reserves a failure point — of this client at this
   * address, or of unknown client ids at this address — and gives it back only on success. A spent
   * budget answers 429: without evaluating the attempt for unknown ids (or once the client's
   * locked-guess budget is spent too), and otherwise for a wrong secret only — the right one passes.
   */
  private async authenticate<C extends AuthenticatedClient, A extends ClientAttempt<C>>(
    kind: ClientKind<C, A>,
    credentials: ClientCredentials,
    call: TokenCall,
  ): Promise<C> {
    const { authentication, limiter } = kind;
    const attempt = await this.slot(UNAUTHENTICATED, () => authentication.lookUp(credentials), call.signal);
    const reservation = await limiter.reserveAttempt(
      attempt.clientId,
      attempt.client !== undefined,
      call.remoteAddress,
    );
    const refuse = () => {
      call.onRateLimit(reservation.decision);
      return tooManyRequests(reservation.decision);
    };
    if (!reservation.evaluate) throw refuse();
    let client: C;
    try {
      client = authentication.verify(authentication.prove ? await authentication.prove(attempt) : attempt);
    } catch (error) {
      throw reservation.decision.allowed ? error : refuse();
    }
    await reservation.release();
    return client;
  }
}

/** Whether the request's own check passes (the one-round-trip path leaves a failing one to the step-by-step path). */
function passes(checkRequest: (() => void) | undefined): boolean {
  try {
    checkRequest?.();
    return true;
  } catch {
    return false;
  }
}

const tmcOf = (client: ApiUser): AdmittedParty => ({ kind: "tmc", id: client.tmcId });
const serverOf = (server: ResourceServer): AdmittedParty => ({ kind: "resource-server", id: server.clientId });
