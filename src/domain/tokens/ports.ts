import type { RateLimitDecision } from "../rate-limit/model.js";
import type { TenantScope } from "../shared/tenant-scope.js";
import type { Tx } from "../shared/unit-of-work.js";
import type { CachedGeneration, NewRefreshToken, RefreshTokenRecord, SigningKeyRecord, TrustedIssuer } from "./model.js";

/** Signing keys shared by every instance (not tenant data). */
export interface SigningKeyRepository {
  /** Keys that may still have valid tokens, newest first. */
  listPublished(tx: Tx, now: Date): Promise<SigningKeyRecord[]>;
  insert(tx: Tx, key: Omit<SigningKeyRecord, "retired">): Promise<void>;
  /** Stops every current key from signing; each keeps verifying until `notAfter`. */
  retireAll(tx: Tx, now: Date, notAfter: Date): Promise<void>;
}

export interface RefreshTokenRepository {
  insert(tx: Tx, scope: TenantScope, token: NewRefreshToken): Promise<void>;
  /** Locks the token's row for the rest of the transaction: two concurrent uses cannot both win. */
  lockByHash(tx: Tx, scope: TenantScope, tokenHash: Buffer): Promise<RefreshTokenRecord | undefined>;
  markUsed(tx: Tx, scope: TenantScope, id: string, now: Date): Promise<void>;
  revokeFamily(tx: Tx, scope: TenantScope, familyId: string, now: Date): Promise<void>;
  revokeAllOfClient(tx: Tx, scope: TenantScope, clientId: string, now: Date): Promise<void>;
}

export interface TrustedIssuerRepository {
  upsert(tx: Tx, scope: TenantScope, issuer: TrustedIssuer): Promise<void>;
  find(tx: Tx, scope: TenantScope, issuer: string): Promise<TrustedIssuer | undefined>;
}

/**
 * The shared copy of every client's credential generation (Redis, or an in-process map on the
 * embedded default). It may lie: Postgres is the truth.
 */
export interface GenerationCache {
  /**
   * False while cached values may predate changes that committed without it (at start, after a
   * lost connection, until a reconcile has run): readers go to the database instead.
   */
  readonly trusted: boolean;
  /** Whether the cache answers at all right now. */
  readonly reachable: boolean;
  /** Throws when the cache cannot answer. */
  get(clientIds: readonly string[]): Promise<Array<CachedGeneration | undefined>>;
  /** Throws when the cache cannot take the values. `onlyIfAbsent`: never overwrite (fills after a miss). */
  put(values: ReadonlyMap<string, CachedGeneration>, options: { onlyIfAbsent: boolean }): Promise<void>;
  /** Called once every change that committed without the cache has been published to it. */
  markTrusted(): void;
}

/** Credential changes the cache has not been told about yet. */
export interface CredentialOutbox {
  add(tx: Tx, clientId: string, changedAt: Date): Promise<void>;
  pending(tx: Tx): Promise<Array<{ clientId: string; changedAt: Date }>>;
  /** Removes an entry unless a newer change moved its time meanwhile. */
  remove(tx: Tx, entry: { clientId: string; changedAt: Date }): Promise<void>;
}

/** The token endpoints' budgets (implemented by the rate-limit area's TokenRateLimiter). */
export interface TokenRequestLimiter {
  consume(clientId: string | undefined, address: string): Promise<RateLimitDecision>;
  recordFailure(clientId: string | undefined, address: string): Promise<void>;
}
