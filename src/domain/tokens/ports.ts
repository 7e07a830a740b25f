import type { DomainError } from "../../errors/domain-error.js";
import type { RateLimitDecision } from "../rate-limit/model.js";
import type { ClientCredentials } from "../shared/client-credentials.js";
import type { TenantScope } from "../shared/tenant-scope.js";
import type { Tx } from "../shared/unit-of-work.js";
import type {
  CredentialState,
  NewRefreshToken,
  NewSigningKey,
  RefreshTokenRecord,
  RevokedAccessToken,
  SigningKeyRecord,
  TrustedIssuer,
} from "./model.js";

/** Signing keys shared by every instance (not tenant data). */
export interface SigningKeyRepository {
  /** Keys that may still have valid tokens (`notAfter` unset or after `now`), latest activation first. */
  listPublished(tx: Tx, now: Date): Promise<SigningKeyRecord[]>;
  /**
   * Serialises rotations across instances until the transaction ends (a transaction-level lock):
   * a read after it sees every rotation committed before, so two cannot both schedule a key.
   */
  lockForRotation(tx: Tx): Promise<void>;
  insert(tx: Tx, key: NewSigningKey): Promise<void>;
  /**
   * Every key not yet retired stops signing at `retiredAt` (when its successor activates) and
   * keeps verifying until `notAfter`; with `withdraw`, every other key's `notAfter` is brought
   * forward to it too (an emergency rotation drops them all at once).
   */
  retireAll(
    tx: Tx,
    retiredAt: Date,
    notAfter: Date,
    options: { readonly except: string; readonly withdraw: boolean },
  ): Promise<void>;
  /** Tells every instance (at commit) that the keys changed: NOTIFY on the signing-key channel. */
  announceChange(tx: Tx): Promise<void>;
}

export interface RefreshTokenRepository {
  insert(tx: Tx, scope: TenantScope, token: NewRefreshToken): Promise<void>;
  /** Locks the token's row for the rest of the transaction: two concurrent uses cannot both win. */
  lockByHash(tx: Tx, scope: TenantScope, tokenHash: Buffer): Promise<RefreshTokenRecord | undefined>;
  markUsed(tx: Tx, scope: TenantScope, id: string, now: Date): Promise<void>;
  revokeFamily(tx: Tx, scope: TenantScope, familyId: string, now: Date): Promise<void>;
  revokeAllOfClient(tx: Tx, scope: TenantScope, clientId: string, now: Date): Promise<void>;
}

/** Access tokens revoked one by one (RFC 7009). */
export interface RevokedTokenRepository {
  /** Records the revocation; false when the token was revoked already. */
  insert(tx: Tx, scope: TenantScope, token: RevokedAccessToken): Promise<boolean>;
  /** The revocations among `jtis` (absent: not revoked), with their change numbers. */
  revocations(
    tx: Tx,
    jtis: readonly string[],
  ): Promise<Map<string, { readonly changeSeq: number; readonly expiresAt: Date }>>;
}

/**
 * How one kind of client authenticates (API users at the token endpoints, resource servers at
 * introspection and the change feeds), in the client-authentication pipeline's steps: the held
 * record in one round trip, else look up → (the pipeline reserves a failure point) → verify. A
 * new method (an assertion, a proof of possession) is read from the ClientCredentials value by
 * the authentication of the clients that may use it; the pipeline around it stays as it is.
 */
export interface ClientAuthentication<C extends AuthenticatedClient, A extends ClientAttempt<C> = ClientAttempt<C>> {
  /**
   * The one-round-trip path's first step: the record this instance holds for the named client,
   * with the presented secret already compared to it (in constant time), still to be checked
   * against the current generation with `knownChange`. Undefined when none is held or the
   * credentials are not a plain id and secret: the step-by-step path answers those.
   */
  held(credentials: ClientCredentials): HeldClient<C> | undefined | Promise<HeldClient<C> | undefined>;
  /** The client the credentials name (undefined: nobody who may use this endpoint); nothing verified yet. */
  lookUp(credentials: ClientCredentials): Promise<A>;
  /**
   * Between the two, for a method whose check is asynchronous (a client assertion's signature and
   * its jti): run once the attempt's failure point is reserved, outside the unauthenticated share's
   * slot, so a locked-out caller costs no signature verification. Its verdict goes into the attempt.
   */
  prove?(attempt: A): Promise<A>;
  /** Second step, in constant time: nobody runs the same comparison and gets the same answer as a wrong secret. */
  verify(attempt: A): C;
  /** The refusal of a wrong secret: the one answer every failed authentication gets. */
  wrongSecret(clientId: string): DomainError;
}

/** What the pipeline needs of any authenticated client: its id, and the generation its held record is checked at. */
export interface AuthenticatedClient {
  readonly clientId: string;
  readonly credentialGeneration: number;
}

/** A held record and whether the presented credential (a secret, an assertion) proves it. */
export interface HeldClient<C> {
  readonly record: C;
  readonly knownChange: number;
  readonly authenticated: boolean;
  /** The refusal to answer when it does not (with its reason for the log); a wrong secret's when absent. */
  readonly refusal?: DomainError;
}

/** An authentication in progress: what was presented, and who it names (undefined: nobody who may). */
export interface ClientAttempt<C> {
  readonly clientId: string;
  readonly secret: string;
  readonly client: C | undefined;
}

/** The current credential state of each id (API users, resource servers, revoked tokens), read from Postgres. */
export interface CredentialStateSource {
  credentialStates(tx: Tx, ids: readonly string[]): Promise<Map<string, CredentialState>>;
}

/** The audiences registered resource servers serve (implemented by the resource-servers area). */
export interface AudienceDirectory {
  /** The subset of `audiences` that an active resource server serves. */
  registered(audiences: readonly string[]): Promise<ReadonlySet<string>>;
}

export interface TrustedIssuerRepository {
  upsert(tx: Tx, scope: TenantScope, issuer: TrustedIssuer): Promise<void>;
  find(tx: Tx, scope: TenantScope, issuer: string): Promise<TrustedIssuer | undefined>;
  /** The tenant's trusted issuers, by issuer. */
  list(tx: Tx, scope: TenantScope): Promise<TrustedIssuer[]>;
  /** Deletes one; false when the tenant has no such issuer. */
  remove(tx: Tx, scope: TenantScope, issuer: string): Promise<boolean>;
}

/**
 * The shared copy of every client's credential state (Redis, or an in-process map on the
 * embedded default), and its watermark: the highest change number it has been told about. It
 * may lie — lose writes, come back from a snapshot — so readers compare its watermark with the
 * highest change they know was committed. Postgres is the truth.
 */
export interface GenerationCache {
  /**
   * One round trip: the states (undefined where absent) and the watermark covering them (0 when
   * absent; a cache kept in parts answers the lowest of its parts holding these clients, of all
   * parts when none is named). Throws when it cannot answer.
   */
  read(clientIds: readonly string[]): Promise<{ states: Array<CredentialState | undefined>; watermark: number }>;
  /**
   * Stores each state unless the cache holds one with a higher change number, then, when asked,
   * raises the watermark to `watermark.to` — but only if it already covers `watermark.ifAtLeast`
   * (every change before the ones just written), so a change the cache missed can never be
   * covered by a later one. Throws when the cache cannot take it.
   */
  write(states: ReadonlyMap<string, CredentialState>, watermark?: WatermarkRaise): Promise<void>;
}

/** Raise the watermark to `to` if it is at least `ifAtLeast`. */
export interface WatermarkRaise {
  readonly to: number;
  readonly ifAtLeast: number;
}

/** A numbered credential change: its number and the number of the change committed before it. */
export interface NumberedChange {
  readonly seq: number;
  readonly previous: number;
}

/** The numbered log of credential changes (Postgres). */
export interface CredentialChangeLog {
  /**
   * Numbers a change of `clientId` inside its transaction, stamps the client's row with the
   * number and tells every instance once the transaction commits. Changes are numbered in the
   * order they commit (one at a time across the deployment), so `previous`, the number of the
   * last committed change, is exact. Call it last in the transaction.
   */
  record(tx: Tx, clientId: string): Promise<NumberedChange>;
  /** The highest committed change number (0 when there is none). */
  latest(tx: Tx): Promise<number>;
  /** Changes numbered above `after`, oldest first, at most `limit`, with when each was made. */
  since(tx: Tx, after: number, limit: number): Promise<Array<{ seq: number; clientId: string; changedAt: Date }>>;
  /**
   * Forgets changes older than `before` (they can no longer be contradicted by a cached state),
   * except the newest, so `latest()` never goes back.
   */
  prune(tx: Tx, before: Date): Promise<number>;
}

/**
 * Committed change numbers pushed by the database to every instance (Postgres LISTEN/NOTIFY; the
 * embedded default has one instance and needs none). While it is not connected an instance
 * cannot know whether the cache missed a change, so it does not believe the cache.
 */
export interface ChangeFeed extends SigningKeyChangeFeed {
  readonly connected: boolean;
  /**
   * `onChange` gets every committed change number; `onConnected` runs after each (re)connection,
   * and `connected` turns true only once it has finished (the caller catches up with what it missed).
   */
  start(onChange: (seq: number) => void, onConnected: () => Promise<void>): void;
  stop(): Promise<void>;
}

/** Signing-key changes committed by any instance, on the same LISTEN connection as the credential changes. */
export interface SigningKeyChangeFeed {
  /**
   * `listener` runs for every committed signing-key change, and after every (re)connection of the
   * feed (a change may have been missed while it was down). Register before the feed starts.
   */
  onSigningKeyChange(listener: () => void): void;
}

/** The token endpoints' budgets (implemented by the rate-limit area's TokenRateLimiter). */
export interface TokenRequestLimiter {
  /** Whether admitHeldClient can answer at all (a shared store for the one round trip); false: always `unknown`. */
  readonly oneRoundTrip: boolean;
  consumeAddress(address: string): Promise<RateLimitDecision>;
  consumeClient(clientId: string): Promise<RateLimitDecision>;
  reserveAttempt(
    clientId: string,
    clientExists: boolean,
    address: string,
  ): Promise<{ decision: RateLimitDecision; evaluate: boolean; release(): Promise<void> }>;
  admitHeldClient(
    clientId: string,
    address: string,
    held: { readonly generation: number; readonly knownChange: number; readonly authenticated: boolean },
  ): Promise<
    | { readonly kind: "unknown" }
    | { readonly kind: "admitted" | "refused" | "limited" | "client-limited"; readonly decision: RateLimitDecision }
  >;
}

/** The current credential states in bulk, for a change stream's snapshot (Postgres), by pages. */
export interface CredentialSnapshots {
  /**
   * API users by client id after `after`, at most `limit`: every active one with its generation,
   * and those revoked at or after `revokedSince` with none.
   */
  apiUserGenerations(
    tx: Tx,
    after: string,
    limit: number,
    revokedSince: Date,
  ): Promise<Array<{ readonly clientId: string; readonly generation: number | undefined }>>;
  /** Revoked access tokens that expire after `now`, by jti after `after`, at most `limit`. */
  unexpiredRevocations(
    tx: Tx,
    now: Date,
    after: string,
    limit: number,
  ): Promise<Array<{ readonly jti: string; readonly expiresAt: Date }>>;
}

/**
 * Each resource server's delivery position in the credential-change log for SET polling (RFC
 * 8936), shared by every instance (Postgres). Not tenant data: a resource server receives the
 * changes of every tenant, as it verifies every tenant's tokens.
 */
export interface SecurityEventPositions {
  /**
   * Locks the receiver's position until the transaction ends (creating it at `initial` when it
   * has none) and returns it: every change up to `through` is acknowledged, and so are the ones in
   * `acknowledged` above it.
   */
  lock(
    tx: Tx,
    receiverId: string,
    initial: number,
  ): Promise<{ readonly through: number; readonly acknowledged: ReadonlySet<number> }>;
  /** Records acknowledgements of changes above the position (one already recorded is no error). */
  acknowledge(tx: Tx, receiverId: string, seqs: readonly number[]): Promise<void>;
  /** Moves the position to `through` and forgets the acknowledgements it now covers. */
  advance(tx: Tx, receiverId: string, through: number): Promise<void>;
}
