// createVerifier: local verification of the auth service's access tokens (EdDSA JWTs, RFC 9068
// profile) with the revocations the credential-change stream pushes, failing closed when the
// stream is not known to be current.
import crypto from "node:crypto";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import type { ServerInterceptor } from "@grpc/grpc-js";
import type { FastifyReply, FastifyRequest } from "fastify";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { AuthService, type Heartbeat, type WatchCredentialChangesResponse } from "./gen/travel/auth/v2/auth_pb.js";
import * as integrations from "./integrations.js";
import { KeySet } from "./jwks.js";
import { refusalCheckOf, timeCheck, unverifiedJsonOf, verifyJws, type JwtRules, type VerifiedJws } from "./jws.js";
import { authorizationOf, BindingRefused, checkPresentation, DpopNonces, DpopRejected } from "./dpop-proof.js";
import { Lru } from "./lru.js";
import { ProofReplayCache } from "./proof-replay.js";
import { RevocationState } from "./state.js";
import { ALGORITHM, hasRequiredClaims, PRESENCE_CHECKED_CLAIMS, TOKEN_TYPE } from "./token-format.js";

export interface VerifierOptions {
  /** Where the auth service answers (JWKS, the change stream, introspection), e.g. `https://auth.example`. */
  authUrl: string;
  /** The `iss` the tokens must carry (the service's ISSUER; may differ from authUrl). */
  issuer: string;
  /** This resource server's audience: a token's `aud` must name it. */
  audience: string;
  /** The resource server's credentials (operator RPC CreateResourceServer). Never logged. */
  clientId: string;
  clientSecret: string;
  /** No heartbeat vouching for the stream for longer than this: refuse every token. Default DEFAULT_STALE_AFTER_MS (1500). */
  staleAfterMs?: number;
  /** While stale: refuse (default) or ask the service (batch introspection). */
  fallback?: "refuse" | "introspect";
  /** Leeway on exp, nbf and iat, in seconds. Default 5 (the service's own). */
  clockToleranceSeconds?: number;
  /** The stream's protocol: gRPC over HTTP/2 (default) or Connect over HTTP/1.1. */
  transport?: "grpc" | "connect";
  /** Tokens remembered as verified (exact text), least recently used forgotten first. Default 10000. */
  cacheSize?: number;
  /** An unknown kid refetches the JWKS at most once per this many ms. Default 10000. */
  jwksCooldownMs?: number;
  /**
   * The origin clients address this service by (`https://bookings.example.com`), for the `htu` of
   * DPoP proofs: needed behind a proxy that changes the scheme or host, and for the grpc-js
   * interceptor (which does not know the scheme). Unset: the request's own (Fastify, Connect).
   */
  publicOrigin?: string;
  /** DPoP proofs remembered as used, per process (ProofReplayCache); full, new proofs are refused. Default 100000. */
  dpopReplayCacheSize?: number;
}

/** A request's credential as an integration reads it: the Authorization value, the DPoP proof, the request. */
export interface PresentedRequest {
  readonly authorization: string | null | undefined;
  readonly dpop: string | undefined;
  readonly method: string;
  /** The request's URL (absolute), or its path when `publicOrigin` supplies the origin. */
  readonly url: string;
}

/**
 * A request judged: the claims (and the nonce to offer after a DPoP request), or the refusal (no
 * reason: no token at all) with the scheme the token came under and, for DPoP, the nonce to use.
 */
export type RequestOutcome =
  | { readonly ok: true; readonly claims: AccessTokenClaims; readonly dpopNonce?: string }
  | {
      readonly ok: false;
      readonly reason: RefusalReason | undefined;
      readonly scheme?: "Bearer" | "DPoP";
      readonly dpopNonce?: string;
    };

/** Why a token was refused (Outcome.reason). */
export const REFUSAL_REASONS = [
  "malformed",
  "bad_signature",
  "unknown_key",
  "expired",
  "not_yet_valid",
  "wrong_issuer",
  "wrong_audience",
  "revoked",
  "stale",
  // DPoP (RFC 9449): a bad proof, a proof without the current nonce, a token under the wrong scheme for its binding.
  "invalid_dpop_proof",
  "use_dpop_nonce",
  "wrong_scheme",
] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/** The claims of the service's access tokens (src/domain/tokens/access-tokens.ts). */
export interface AccessTokenClaims {
  readonly iss: string;
  readonly sub: string;
  readonly aud: string | readonly string[];
  readonly exp: number;
  readonly iat: number;
  readonly nbf?: number;
  readonly jti: string;
  readonly client_id: string;
  readonly tmc_id: string;
  readonly org_id?: string;
  readonly role: string;
  readonly scope?: string;
  readonly sub_kind?: string;
  /** The generation of the obtaining client's credential. */
  readonly gen: number;
  /** Other credentials an exchanged token depends on: [clientId, generation]. */
  readonly creds?: ReadonlyArray<readonly [string, number]>;
  readonly act?: Record<string, unknown>;
  /** RFC 9449 6.1: the thumbprint of the key a DPoP-bound token is bound to. */
  readonly cnf?: { readonly jkt: string };
  readonly [claim: string]: unknown;
}

export type Outcome = { ok: true; claims: AccessTokenClaims } | { ok: false; reason: RefusalReason };

/** What a first sight found: the claims, or the refusal (with the client it named, for the metrics). */
type Checked = { ok: true; claims: AccessTokenClaims } | { ok: false; reason: RefusalReason; clientId?: string };

export interface VerifierStatus {
  /** A stream is open. */
  connected: boolean;
  /** The open stream has sent a heartbeat since it opened (and its snapshot, if any): every change up to `cursor` is applied. */
  caughtUp: boolean;
  /** The cursor the stream would resume from (the last heartbeat's whose gap check passed). */
  cursor: string;
  /** When the stream last said anything (ms since the epoch), or undefined if never. */
  lastHeardAt: number | undefined;
  /** When the last heartbeat whose gap check passed arrived (ms since the epoch): the staleness bound counts from it. */
  lastHeartbeatAt: number | undefined;
  /** The last heartbeat's delay: receipt time minus its server_time (ms; clock skew included). */
  lagMs: number | undefined;
  /** Why the last stream ended or could not open (a status code and the server's message; never a credential). */
  lastError: string | undefined;
}

export interface VerifierMetrics {
  verifications: { firstSight: number; cached: number };
  accepted: number;
  refusals: Record<RefusalReason, number>;
  /** The last heartbeat's delay (ms), as in status(). */
  streamLagMs: number | undefined;
  reconnects: number;
  /** Heartbeats that showed the stream had lost an event (each ended its stream). */
  gaps: number;
  events: {
    snapshots: number;
    credentialChanged: number;
    tokenRevoked: number;
    signingKeysChanged: number;
    heartbeats: number;
  };
  jwks: { fetches: number; failures: number };
  introspections: { calls: number; tokens: number; failures: number };
  cacheSize: number;
  knownCredentials: number;
  revokedTokens: number;
}

export interface Verifier {
  /** Resolves once the first snapshot is applied and a heartbeat arrived; rejects after timeoutMs (default 10000). */
  ready(timeoutMs?: number): Promise<void>;
  /** A bearer token alone: a DPoP-bound one is refused (`wrong_scheme`), its proof cannot be checked here. */
  verify(token: string): Promise<Outcome>;
  /**
   * A request's credential (what the integrations call): a bearer token, or a DPoP-bound token
   * under the DPoP scheme with a proof by its key for this request (RFC 9449 7), used once.
   */
  verifyRequest(request: PresentedRequest): Promise<RequestOutcome>;
  status(): VerifierStatus;
  metrics(): VerifierMetrics;
  /** Called on each refusal with its reason and the token's client_id when it was readable (never the token). */
  onRefusal(listener: (reason: RefusalReason, clientId: string | undefined) => void): () => void;
  /** Whether tokens are judged on the stream's word now (connected, caught up, a heartbeat's check passed within staleAfterMs). */
  isCurrent(): boolean;
  /** A Connect interceptor for a server (connectNodeAdapter's `interceptors`): claims in `ctx.values.get(tokenClaimsKey)`. */
  connectInterceptor(): Interceptor;
  /** A grpc-js server interceptor (`new Server({ interceptors: [...] })`): claims through `grpcClaimsOf(call)`. Needs @grpc/grpc-js. */
  grpcServerInterceptor(): ServerInterceptor;
  /** A Fastify onRequest hook (`app.addHook("onRequest", verifier.fastifyHook())`): claims in `request.tokenClaims`. */
  fastifyHook(): (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
  close(): Promise<void>;
}

interface CachedToken {
  readonly claims: AccessTokenClaims;
  readonly kid: string;
}

/**
 * The auth service's heartbeat interval on the change stream (its CHANGE_STREAM_HEARTBEAT_MS; a unit
 * test compares the two), and the default staleness bound: 3 heartbeats, so one late or lost
 * heartbeat does not refuse tokens but a link that passes nothing for 1.5 s does.
 */
export const STREAM_HEARTBEAT_MS = 500;
export const DEFAULT_STALE_AFTER_MS = 3 * STREAM_HEARTBEAT_MS;

const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5000;
const INTROSPECT_BATCH = 100;

/**
 * The refusal reason of each check the shared JWS module names (jws.ts, refusalCheckOf; the
 * service logs the same names). A check not listed (a missing claim, a malformed `iat`, the
 * claims' shape) is "malformed".
 */
const REASON_OF_CHECK: Readonly<Record<string, RefusalReason>> = {
  format: "malformed",
  type: "malformed",
  claims: "malformed",
  algorithm: "bad_signature",
  signature: "bad_signature",
  key: "unknown_key",
  expiry: "expired",
  "not yet valid": "not_yet_valid",
  issuer: "wrong_issuer",
  audience: "wrong_audience",
};

/** The package's refusal reason for a check the service's log names (its `refusalReason`). */
export const refusalReasonOfCheck = (check: string): RefusalReason => REASON_OF_CHECK[check] ?? "malformed";

/**
 * A verifier for one resource server: starts fetching the JWKS and following the change stream at
 * once; tokens are refused as stale until it has caught up (await ready()).
 */
export async function createVerifier(options: VerifierOptions): Promise<Verifier> {
  try {
    integrations.provideGrpc(await import("@grpc/grpc-js"));
  } catch {
    // grpc-js is an optional peer: without it, grpcServerInterceptor() throws when called.
  }
  const verifier = new StreamVerifier(options);
  verifier.start();
  return verifier;
}

class StreamVerifier implements Verifier {
  private readonly staleAfterMs: number;
  private readonly toleranceSeconds: number;
  private readonly fallback: "refuse" | "introspect";
  private readonly keys: KeySet;
  private readonly cache: Lru<string, CachedToken>;
  /** What a token must satisfy (jws.ts), judged at the system clock's time. */
  private readonly rules: JwtRules;
  private readonly state = new RevocationState();
  private readonly client: Client<typeof AuthService>;
  /** The HTTP/2 connection of the grpc transport, dropped with a stalled stream so the next attempt opens a fresh one. */
  private readonly session: Http2SessionManager | undefined;
  private readonly listeners = new Set<(reason: RefusalReason, clientId: string | undefined) => void>();
  private readonly realm: string;
  /** DPoP nonces from the resource server's credentials: every instance of it offers and accepts the same. */
  private readonly nonces: DpopNonces;
  private readonly proofs: ProofReplayCache;

  private connected = false;
  private caughtUp = false;
  /** When the stream last said anything: wall clock for status(), monotonic for the watchdog. */
  private lastHeardAt: number | undefined;
  private lastHeardMono = -Infinity;
  /** When a heartbeat last passed its gap check: wall clock for status(), monotonic for the staleness bound. */
  private lastHeartbeatAt: number | undefined;
  private lastVouchedMono = -Infinity;
  /** What the open stream has delivered (heartbeats aside), to check each heartbeat's account against. */
  private received = { count: 0n, lastCursor: "" };
  private attemptStartedMono = -Infinity;
  private lagMs: number | undefined;
  private closed = false;
  private streamAbort: AbortController | undefined;
  private sleepAbort: AbortController | undefined;
  private loop: Promise<void> | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private pruner: NodeJS.Timeout | undefined;
  private lastError: string | undefined;
  private readyWaiters = new Set<() => void>();
  private introspectQueue: Array<{ token: string; resolve: (active: boolean | undefined) => void }> = [];

  private readonly counters = {
    firstSight: 0,
    cached: 0,
    accepted: 0,
    reconnects: 0,
    gaps: 0,
    refusals: Object.fromEntries(REFUSAL_REASONS.map((r) => [r, 0])) as Record<RefusalReason, number>,
    events: { snapshots: 0, credentialChanged: 0, tokenRevoked: 0, signingKeysChanged: 0, heartbeats: 0 },
    introspections: { calls: 0, tokens: 0, failures: 0 },
  };

  constructor(private readonly options: VerifierOptions) {
    for (const name of ["authUrl", "issuer", "audience", "clientId", "clientSecret"] as const)
      if (typeof options[name] !== "string" || options[name] === "")
        throw new TypeError(`createVerifier: ${name} is required`);
    const base = options.authUrl.replace(/\/+$/, "");
    this.staleAfterMs = options.staleAfterMs ?? DEFAULT_STALE_AFTER_MS;
    this.toleranceSeconds = options.clockToleranceSeconds ?? 5;
    this.fallback = options.fallback ?? "refuse";
    this.keys = new KeySet(`${base}/.well-known/jwks.json`, options.jwksCooldownMs ?? 10_000);
    this.cache = new Lru(options.cacheSize ?? 10_000);
    this.rules = {
      issuer: options.issuer,
      audience: options.audience,
      algorithms: new Set([ALGORITHM]),
      typ: TOKEN_TYPE,
      requiredClaims: PRESENCE_CHECKED_CLAIMS,
      clockToleranceSeconds: this.toleranceSeconds,
    };
    this.realm = options.audience;
    this.nonces = new DpopNonces(
      crypto.createSecretKey(
        Buffer.from(crypto.hkdfSync("sha256", options.clientSecret, options.clientId, "dpop-nonce/v1", 32)),
      ),
    );
    this.proofs = new ProofReplayCache(options.dpopReplayCacheSize ?? 100_000);
    let transport: Transport;
    if (options.transport === "connect") transport = createConnectTransport({ baseUrl: base, httpVersion: "1.1" });
    else {
      this.session = new Http2SessionManager(base, {
        pingIntervalMs: this.staleAfterMs,
        pingTimeoutMs: this.staleAfterMs,
      });
      transport = createGrpcTransport({ baseUrl: base, sessionManager: this.session });
    }
    this.client = createClient(AuthService, transport);
  }

  start(): void {
    void this.keys.refresh().catch(() => {});
    this.loop = this.follow();
    // A stream (or an attempt to open one) that says nothing for staleAfterMs is dropped with its
    // connection, and reopened on a fresh one.
    this.watchdog = setInterval(
      () => {
        const quietSince = Math.max(this.lastHeardMono, this.attemptStartedMono);
        if (
          this.streamAbort &&
          !this.streamAbort.signal.aborted &&
          performance.now() - quietSince > this.staleAfterMs
        ) {
          this.streamAbort.abort();
          this.session?.abort();
        }
      },
      Math.max(50, Math.min(1000, this.staleAfterMs / 4)),
    );
    this.watchdog.unref();
    this.pruner = setInterval(() => {
      this.state.prune(Date.now() - this.toleranceSeconds * 1000);
      this.proofs.prune(Date.now());
    }, 60_000);
    this.pruner.unref();
  }

  isCurrent(): boolean {
    return this.connected && this.caughtUp && performance.now() - this.lastVouchedMono <= this.staleAfterMs;
  }

  async ready(timeoutMs = 10_000): Promise<void> {
    if (this.isCurrent()) return;
    await new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.readyWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(() => {
        this.readyWaiters.delete(done);
        reject(
          new Error(
            `verifier not caught up within ${timeoutMs} ms${this.lastError ? ` (stream: ${this.lastError})` : ""}`,
          ),
        );
      }, timeoutMs);
      this.readyWaiters.add(done);
    });
  }

  async verify(token: string): Promise<Outcome> {
    const outcome = await this.verifyToken(token);
    if (outcome.ok && outcome.claims.cnf !== undefined) return this.refuse("wrong_scheme", outcome.claims.client_id);
    return outcome;
  }

  async verifyRequest(request: PresentedRequest): Promise<RequestOutcome> {
    const presented = authorizationOf(request.authorization);
    if (presented === undefined) return { ok: false, reason: undefined };
    const { scheme } = presented;
    const outcome = await this.verifyToken(presented.token);
    if (!outcome.ok) return { ...outcome, scheme };
    const nowMs = Date.now();
    const offered = scheme === "DPoP" ? { dpopNonce: this.nonces.current(nowMs) } : {};
    try {
      // The service's verdict (dpop-proof.ts): bound tokens with a proof by their key, unbound ones as Bearer.
      const proof = checkPresentation(presented, outcome.claims.cnf, request.dpop, {
        method: request.method,
        url: this.publicUrlOf(request.url),
        nowMs,
        nonces: this.nonces,
      });
      if (proof && !this.proofs.useOnce(proof.replayId, proof.expiresAtMs, nowMs))
        throw new DpopRejected("invalid_dpop_proof", "The DPoP proof was used before", "replay");
    } catch (error) {
      const reason: RefusalReason =
        error instanceof BindingRefused
          ? "wrong_scheme"
          : error instanceof DpopRejected
            ? error.error
            : "invalid_dpop_proof";
      return { ...this.refuse(reason, outcome.claims.client_id), scheme, ...offered };
    }
    return { ...outcome, ...offered };
  }

  /** The URL a proof's `htu` must name: the request's, or its path under `publicOrigin`. */
  private publicUrlOf(url: string): string {
    const origin = this.options.publicOrigin;
    if (origin === undefined) return url;
    const path = URL.canParse(url) ? new URL(url).pathname : url;
    return `${origin.replace(/\/+$/, "")}${path}`;
  }

  private async verifyToken(token: string): Promise<Outcome> {
    if (typeof token !== "string") return this.refuse("malformed", undefined);
    const cached = this.cache.get(token);
    let claims: AccessTokenClaims;
    if (cached) {
      this.counters.cached++;
      // A key withdrawn since (a JWKS refresh without it) ends its tokens too.
      if (!this.keys.known(cached.kid)) {
        this.cache.delete(token);
        return this.refuse("unknown_key", cached.claims.client_id);
      }
      claims = cached.claims;
      const late = this.timeRefusal(claims);
      if (late) return this.refuse(late, claims.client_id);
    } else {
      this.counters.firstSight++;
      const pending = this.checkSigned(token);
      const checked = pending instanceof Promise ? await pending : pending;
      if (!checked.ok) return this.refuse(checked.reason, checked.clientId);
      claims = checked.claims;
    }
    if (!this.isCurrent()) {
      if (this.fallback !== "introspect") return this.refuse("stale", claims.client_id);
      const active = await this.introspect(token);
      if (active === undefined) return this.refuse("stale", claims.client_id);
      if (!active) return this.refuse("revoked", claims.client_id);
    } else if (this.state.isRevoked(claims)) return this.refuse("revoked", claims.client_id);
    this.counters.accepted++;
    return { ok: true, claims };
  }

  status(): VerifierStatus {
    return {
      connected: this.connected,
      caughtUp: this.caughtUp,
      cursor: this.state.cursor,
      lastHeardAt: this.lastHeardAt,
      lastHeartbeatAt: this.lastHeartbeatAt,
      lagMs: this.lagMs,
      lastError: this.lastError,
    };
  }

  metrics(): VerifierMetrics {
    const c = this.counters;
    return {
      verifications: { firstSight: c.firstSight, cached: c.cached },
      accepted: c.accepted,
      refusals: { ...c.refusals },
      streamLagMs: this.lagMs,
      reconnects: c.reconnects,
      gaps: c.gaps,
      events: { ...c.events },
      jwks: { fetches: this.keys.fetches, failures: this.keys.failures },
      introspections: { ...c.introspections },
      cacheSize: this.cache.size,
      knownCredentials: this.state.knownCredentials,
      revokedTokens: this.state.revokedTokens,
    };
  }

  onRefusal(listener: (reason: RefusalReason, clientId: string | undefined) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  connectInterceptor(): Interceptor {
    return integrations.connectInterceptor(this, this.realm);
  }

  grpcServerInterceptor(): ServerInterceptor {
    return integrations.grpcServerInterceptor(this, this.realm);
  }

  fastifyHook(): (request: FastifyRequest, reply: FastifyReply) => Promise<void> {
    return integrations.fastifyHook(this, this.realm);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.watchdog);
    clearInterval(this.pruner);
    this.streamAbort?.abort();
    this.sleepAbort?.abort();
    await this.loop;
    this.session?.abort();
    this.cache.clear();
    this.proofs.clear();
  }

  // ---- local checks -------------------------------------------------------------------------

  /**
   * First sight: the token through the JWS module the service verifies with (jws.ts: shape,
   * header, key, signature, then the registered claims), then the access-token shape
   * (token-format.ts); remembered in the cache when it passes. Stays synchronous while the key is
   * known (no promise per verification on the hot path); only an unknown kid waits for the JWKS.
   */
  private checkSigned(token: string): Checked | Promise<Checked> {
    let verified: VerifiedJws | Promise<VerifiedJws>;
    try {
      verified = verifyJws(token, this.keysFor, this.rules);
    } catch (error) {
      return refusalOf(token, error);
    }
    if (verified instanceof Promise)
      return verified.then(
        (v) => this.accepted(token, v),
        (error: unknown) => refusalOf(token, error),
      );
    return this.accepted(token, verified);
  }

  /** The keys for a token's `kid`: the JWKS as known, refetched first (within the cooldown) for a kid not in it. */
  private readonly keysFor = (kid: unknown) => {
    if (typeof kid !== "string" || kid === "" || this.keys.known(kid)) return this.keys.all;
    return this.keys.keyFor(kid).then(() => this.keys.all);
  };

  private accepted(token: string, { header, claims }: VerifiedJws): Checked {
    if (!hasRequiredClaims(claims)) return { ok: false, reason: "malformed", clientId: clientIdOf(claims) };
    const accessClaims = claims as AccessTokenClaims;
    // Without a kid (a JWKS of one key) there is no key to check a hit against: such a token is not remembered.
    if (typeof header.kid === "string") this.cache.set(token, { claims: accessClaims, kid: header.kid });
    return { ok: true, claims: accessClaims };
  }

  private timeRefusal(claims: AccessTokenClaims): RefusalReason | undefined {
    const late = timeCheck(claims, Date.now(), this.toleranceSeconds);
    return late === "exp" ? "expired" : late === "nbf" ? "not_yet_valid" : undefined;
  }

  private refuse(reason: RefusalReason, clientId: string | undefined): Outcome & { ok: false } {
    this.counters.refusals[reason]++;
    for (const listener of this.listeners) {
      try {
        listener(reason, clientId);
      } catch {
        // A listener's failure is its own.
      }
    }
    return { ok: false, reason };
  }

  // ---- the stream ---------------------------------------------------------------------------

  private async follow(): Promise<void> {
    let backoffMs = BACKOFF_MIN_MS;
    let opened = 0;
    while (!this.closed) {
      const abort = new AbortController();
      this.streamAbort = abort;
      this.attemptStartedMono = performance.now();
      this.received = { count: 0n, lastCursor: "" };
      if (opened++ > 0) {
        this.counters.reconnects++;
        // Keys may have changed while it was away (key changes are not numbered).
        void this.keys.refresh().catch(() => {});
      }
      try {
        const events = this.client.watchCredentialChanges(
          { sinceCursor: this.state.cursor, clientId: this.options.clientId, clientSecret: this.options.clientSecret },
          { signal: abort.signal },
        );
        let gap: string | undefined;
        for await (const event of events) {
          this.connected = true;
          this.lastHeardAt = Date.now();
          this.lastHeardMono = performance.now();
          const heard = this.apply(event);
          if (heard === "vouched") backoffMs = BACKOFF_MIN_MS;
          else if (heard !== undefined) {
            // The connection lost a message while staying up: a fresh one, resumed before the loss.
            gap = heard.gap;
            this.counters.gaps++;
            this.caughtUp = false;
            break;
          }
        }
        if (gap) this.session?.abort();
        this.lastError = gap ?? "the stream ended";
      } catch (error) {
        // The message only: a ConnectError's text names the code and the server's words, never the request.
        this.lastError = error instanceof ConnectError ? `${Code[error.code]}: ${error.rawMessage}` : String(error);
        if (error instanceof ConnectError && error.code === Code.InvalidArgument) this.state.forgetCursor();
      } finally {
        this.streamAbort = undefined;
        this.connected = false;
        this.caughtUp = false;
        this.state.abandonSnapshot();
      }
      if (this.closed) break;
      const sleep = new AbortController();
      this.sleepAbort = sleep;
      const delay = backoffMs / 2 + Math.random() * (backoffMs / 2);
      backoffMs = Math.min(BACKOFF_MAX_MS, backoffMs * 2);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        sleep.signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
      });
    }
  }

  /** Applies one event: "vouched" for a heartbeat that vouched for the stream (healthy, caught up), a gap it revealed, or nothing. */
  private apply(response: WatchCredentialChangesResponse): "vouched" | { gap: string } | undefined {
    const { cursor, event } = response;
    if (event.case === "heartbeat") return this.heartbeat(cursor, event.value);
    // Everything but a heartbeat counts, an event kind this version does not know included (the service counts it).
    this.received = { count: this.received.count + 1n, lastCursor: cursor };
    const events = this.counters.events;
    switch (event.case) {
      case "snapshot":
        events.snapshots++;
        this.state.snapshotPage({
          credentials: event.value.credentials,
          revokedTokens: event.value.revokedTokens.map((t) => ({
            jti: t.jti,
            expiresAtMs: t.expiresAt ? timestampMs(t.expiresAt) : Number.MAX_SAFE_INTEGER,
          })),
          lastPage: event.value.lastPage,
        });
        return undefined;
      case "credentialChanged":
        events.credentialChanged++;
        this.state.credentialChanged(event.value.clientId, event.value.generation);
        return undefined;
      case "tokenRevoked":
        events.tokenRevoked++;
        this.state.tokenRevoked(
          event.value.jti,
          event.value.expiresAt ? timestampMs(event.value.expiresAt) : Number.MAX_SAFE_INTEGER,
        );
        return undefined;
      case "signingKeysChanged":
        events.signingKeysChanged++;
        void this.keys.refresh().catch(() => {});
        return undefined;
      case undefined:
        return undefined;
    }
  }

  /**
   * A heartbeat says what the stream sent before it. Received less (a link that lost a message and
   * stayed up): a gap, and the cursor stays where the last good heartbeat left it, so the lost event
   * is replayed. Otherwise every change up to its cursor is here.
   */
  private heartbeat(cursor: string, beat: Heartbeat): "vouched" | { gap: string } {
    this.counters.events.heartbeats++;
    const { count, lastCursor } = this.received;
    // A service too old to say sends 0 and "", which are never beyond what was received.
    const beyond =
      beat.lastEventCursor !== "" && (lastCursor === "" || BigInt(beat.lastEventCursor) > BigInt(lastCursor));
    if (beat.eventsSent > count || beyond)
      return {
        gap: `lost events: the stream sent ${beat.eventsSent} (the last at ${beat.lastEventCursor || "none"}), ${count} arrived (the last at ${lastCursor || "none"})`,
      };
    this.state.caughtUpTo(cursor);
    this.lastVouchedMono = performance.now();
    this.lastHeartbeatAt = Date.now();
    if (beat.serverTime) this.lagMs = Date.now() - timestampMs(beat.serverTime);
    // Keys that could not be fetched when the service was unreachable are fetched once it is back.
    if (!this.caughtUp && this.keys.size === 0) void this.keys.refresh().catch(() => {});
    this.caughtUp = true;
    for (const waiter of [...this.readyWaiters]) waiter();
    return "vouched";
  }

  // ---- the fallback -------------------------------------------------------------------------

  /** Whether the service says the token is active; undefined when it could not be asked. Batched per tick. */
  private introspect(token: string): Promise<boolean | undefined> {
    return new Promise((resolve) => {
      if (this.introspectQueue.length === 0) setImmediate(() => void this.flushIntrospections());
      this.introspectQueue.push({ token, resolve });
    });
  }

  private async flushIntrospections(): Promise<void> {
    const queued = this.introspectQueue;
    this.introspectQueue = [];
    for (let i = 0; i < queued.length; i += INTROSPECT_BATCH) {
      const batch = queued.slice(i, i + INTROSPECT_BATCH);
      this.counters.introspections.calls++;
      this.counters.introspections.tokens += batch.length;
      try {
        const { results } = await this.client.introspectTokens(
          {
            tokens: batch.map((q) => q.token),
            clientId: this.options.clientId,
            clientSecret: this.options.clientSecret,
          },
          { timeoutMs: Math.max(1000, this.staleAfterMs) },
        );
        batch.forEach((q, j) => q.resolve(results[j]?.active === true));
      } catch {
        this.counters.introspections.failures++;
        for (const q of batch) q.resolve(undefined);
      }
    }
  }
}

/** A refusal by the JWS module, with the client the token names when its payload is readable (for the metrics). */
function refusalOf(token: string, error: unknown): Checked {
  const first = token.indexOf(".");
  const second = token.indexOf(".", first + 1);
  const payload = first > 0 && second > first ? unverifiedJsonOf(token.slice(first + 1, second)) : undefined;
  return { ok: false, reason: refusalReasonOfCheck(refusalCheckOf(error)), clientId: payload && clientIdOf(payload) };
}

const clientIdOf = (claims: Record<string, unknown>) =>
  typeof claims.client_id === "string" ? claims.client_id : undefined;
