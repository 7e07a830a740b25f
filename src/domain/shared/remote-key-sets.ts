import type { JSONWebKeySet } from "jose";
import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import { LruMap } from "./lru-map.js";

/**
 * Public key sets registered by URL (a client's `jwks_uri`, RFC 7591 2; a trusted issuer's
 * `jwksUri`): fetched when needed, checked by the instance's key-set check (a client's strict
 * rules, or an identity provider's lenient ones), kept per owner for a bounded time. One place
 * for every owner of a URL (API users, resource servers, trusted issuers): an owner is an id, the
 * version of its registration, and the URL. The URL rules (uriOf) and the limits are the same for
 * all of them.
 *
 * Why not jose's createRemoteJWKSet (a dependency already): it has no cap on the body it reads,
 * ignores Cache-Control, cannot run our key rules (allow-listed key types, no private members) on
 * what it fetched, and keys its cooldown by URL, not by owner.
 */

/** The largest JWKS document read (ten RSA-4096 keys take about 8 KiB); a longer one is refused. */
export const JWKS_URI_MAX_BYTES = 64 * 1024;
/** The longest `jwks_uri` accepted. */
export const JWKS_URI_MAX_LENGTH = 2048;
/** Fetches under way at once on one instance (distinct URLs; callers of one URL share its fetch). */
export const JWKS_URI_MAX_CONCURRENT_FETCHES = 32;
/** Owners whose sets one instance keeps; the least recently fetched leave first. */
const OWNERS_HELD = 10_000;

/** A fetch that gave no usable document; `reason` is for the log (never the body). */
export class KeySetFetchFailed extends Error {
  constructor(readonly reason: string) {
    super(`jwks_uri ${reason}`);
  }
}

/** What a fetch brings back: the parsed document and the lifetime its response allows (Cache-Control max-age). */
export interface FetchedJwksDocument {
  readonly document: unknown;
  readonly maxAgeSeconds: number | undefined;
}

/** The port: one GET of `uri`, within the limits; throws KeySetFetchFailed. */
export interface JwksDocumentFetcher {
  fetch(uri: string): Promise<FetchedJwksDocument>;
}

export interface RemoteKeySetSettings {
  /** JWKS_FETCH_TIMEOUT_MS: one fetch's deadline, body included (the fetcher applies it). */
  readonly jwksFetchTimeoutMs: number;
  /** JWKS_COOLDOWN_MS: per owner, the least time between an unknown-kid refetch (or a retry after a failure) and the fetch before. */
  readonly jwksCooldownMs: number;
  /**
   * JWKS_CACHE_MIN_AGE_MS / JWKS_CACHE_MAX_AGE_MS: the bounds of a fetched set's lifetime (max-age
   * clamped to them; none: the upper). The lower one (at least 1 s) also bounds how often a
   * client's URL is fetched whatever its server says: forged assertions cost no key.
   */
  readonly jwksCacheMinAgeMs: number;
  readonly jwksCacheMaxAgeMs: number;
  /** JWKS_URI_ALLOW_HTTP_LOOPBACK: `http` accepted for loopback hosts (development and tests). */
  readonly jwksUriAllowHttpLoopback: boolean;
}

/**
 * What a fetched document must be to be held: the set to verify with (only the keys to keep), or
 * a throw (a DomainError's message is the reason logged). A client's set: clientKeySetOf; a
 * trusted issuer's: issuerKeySetOf.
 */
export type KeySetCheck = (document: unknown) => Promise<JSONWebKeySet>;

/** Whose set: an id, the version of its registration (a new one drops what was held), and its URL. */
export interface KeySetOwner {
  readonly id: string;
  readonly version: number;
  readonly jwksUri: string;
}

/** A set to verify with, or why there is none (for the log). */
export type RemoteKeySet = { readonly keys: JSONWebKeySet } | { readonly unavailable: string };

interface HeldSet {
  readonly uri: string;
  readonly version: number;
  readonly keys: JSONWebKeySet | undefined;
  readonly expiresAt: number;
  readonly fetchedAt: number;
  readonly failure: string | undefined;
}

export class RemoteKeySets {
  readonly #held = new LruMap<string, HeldSet>(OWNERS_HELD);
  readonly #inFlight = new Map<string, Promise<{ keys: JSONWebKeySet; lifetimeMs: number }>>();

  constructor(
    private readonly fetcher: JwksDocumentFetcher,
    private readonly settings: RemoteKeySetSettings,
    private readonly check: KeySetCheck,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * The URL as registered, or 400: `https` (`http` only for a loopback host, and only when
   * allowed), no user info, no fragment.
   */
  uriOf(raw: string): string {
    const refuse = (why: string) => invalidArgument(`jwks_uri ${why}`, [{ name: "jwksUri", value: "invalid" }]);
    if (raw.length > JWKS_URI_MAX_LENGTH || !URL.canParse(raw)) throw refuse("must be an absolute URL");
    const url = new URL(raw);
    if (url.username !== "" || url.password !== "") throw refuse("must not carry user info");
    if (raw.includes("#")) throw refuse("must not carry a fragment");
    const httpAllowed = this.settings.jwksUriAllowHttpLoopback && isLoopbackHost(url.hostname);
    if (url.protocol !== "https:" && !(url.protocol === "http:" && httpAllowed))
      throw refuse(`must use https${this.settings.jwksUriAllowHttpLoopback ? " (http only on a loopback host)" : ""}`);
    return url.href;
  }

  /** A registration's check: the URL fetched now and its set checked, or 400 with the reason. */
  async registered(raw: string): Promise<{ uri: string; keys: JSONWebKeySet }> {
    const uri = this.uriOf(raw);
    try {
      return { uri, keys: (await this.fetchOnce(uri)).keys };
    } catch (error) {
      throw invalidArgument(`jwks_uri ${reasonOf(error)}`, [{ name: "jwksUri", value: "unusable" }]);
    }
  }

  /**
   * The owner's set: the one held while it lives, else fetched. `unknownKid` (an assertion named
   * no key of the held set) refetches at most once per cooldown per owner. A failed fetch is not
   * retried for the owner within the cooldown, and leaves no set once the held one expired (fail
   * closed); a set still alive stays.
   */
  async keySetOf(owner: KeySetOwner, unknownKid = false): Promise<RemoteKeySet> {
    const now = this.now();
    const held = this.heldFor(owner);
    const alive = held?.keys !== undefined && now < held.expiresAt ? held.keys : undefined;
    const coolingDown = held !== undefined && now - held.fetchedAt < this.settings.jwksCooldownMs;
    if (alive && (!unknownKid || coolingDown)) return { keys: alive };
    if (!alive && coolingDown && held.failure !== undefined) return { unavailable: held.failure };
    try {
      const { keys, lifetimeMs } = await this.fetchOnce(owner.jwksUri);
      this.hold(owner, { keys, expiresAt: now + lifetimeMs, fetchedAt: now, failure: undefined });
      return { keys };
    } catch (error) {
      const failure = reasonOf(error);
      this.hold(owner, { keys: alive, expiresAt: held?.expiresAt ?? now, fetchedAt: now, failure });
      return alive ? { keys: alive } : { unavailable: failure };
    }
  }

  private heldFor(owner: KeySetOwner): HeldSet | undefined {
    const held = this.#held.get(owner.id);
    return held && held.uri === owner.jwksUri && held.version === owner.version ? held : undefined;
  }

  private hold(owner: KeySetOwner, set: Omit<HeldSet, "uri" | "version">): void {
    this.#held.set(owner.id, { uri: owner.jwksUri, version: owner.version, ...set });
  }

  /** One fetch per URL at a time (concurrent callers share it), and a bounded number of URLs at once. */
  private fetchOnce(uri: string): Promise<{ keys: JSONWebKeySet; lifetimeMs: number }> {
    const running = this.#inFlight.get(uri);
    if (running) return running;
    if (this.#inFlight.size >= JWKS_URI_MAX_CONCURRENT_FETCHES)
      return Promise.reject(new KeySetFetchFailed("not fetched: too many key set fetches under way"));
    const fetched = this.fetchChecked(uri).finally(() => this.#inFlight.delete(uri));
    this.#inFlight.set(uri, fetched);
    return fetched;
  }

  private async fetchChecked(uri: string): Promise<{ keys: JSONWebKeySet; lifetimeMs: number }> {
    const { document, maxAgeSeconds } = await this.fetcher.fetch(uri);
    let keys: JSONWebKeySet;
    try {
      keys = await this.check(document);
    } catch (error) {
      throw new KeySetFetchFailed(
        `is not a usable JWK Set: ${error instanceof DomainError ? error.message : "invalid"}`,
      );
    }
    const { jwksCacheMinAgeMs: min, jwksCacheMaxAgeMs: max } = this.settings;
    const asked = maxAgeSeconds === undefined ? max : maxAgeSeconds * 1000;
    return { keys, lifetimeMs: Math.min(max, Math.max(Math.min(min, max), asked)) };
  }
}

/** 127.0.0.0/8, ::1 and localhost: the addresses that never leave the host. */
export function isLoopbackHost(hostname: string): boolean {
  return hostname === "localhost" || hostname === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

function reasonOf(error: unknown): string {
  return error instanceof KeySetFetchFailed ? error.reason : "could not be fetched";
}
