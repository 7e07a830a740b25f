import crypto from "node:crypto";
import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JSONWebKeySet, type JWK } from "jose";
import { DomainError } from "../../errors/domain-error.js";
import { open, seal } from "../shared/aead.js";
import type { Clock } from "../shared/clock.js";
import type { Tx, UnitOfWork } from "../shared/unit-of-work.js";
import { maxTokenLifetimeSeconds, SIGNING_ALG, type SigningKeyRecord, type TokenConfig } from "./model.js";
import type { SigningKeyChangeFeed, SigningKeyRepository } from "./ports.js";
import { unverifiedJsonOf } from "../../../packages/verifier/src/jws.js";

export { SIGNING_ALG };

/** How far past `exp` (and before `iat`) this service still accepts its own tokens. */
export const VERIFICATION_CLOCK_TOLERANCE_SECONDS = 5;

/**
 * How long a retired key stays published past the last token it can have signed: the clock skew
 * that downstream verifiers allow (5 minutes is .NET's default, the largest common one; jose and
 * Spring allow less), so none of them meets a still-accepted token whose key has gone.
 */
export const RETIRED_KEY_GRACE_SECONDS = 300;

/**
 * The shortest gap between two reloads caused by unknown key ids when the token may be newer than
 * the last reload: what a flood of forged tokens can cost is one small query per gap.
 */
const UNKNOWN_KID_MIN_RELOAD_GAP_MS = 250;

export type SigningKeyState = "next" | "active" | "retired";

export interface SigningKeyRotation {
  readonly kid: string;
  /** When every instance starts signing with it. */
  readonly activatesAt: Date;
  /** Key ids published once the rotation committed, latest activation first. */
  readonly publishedKids: string[];
  /** Keys dropped at once by an emergency rotation (none for a planned one). */
  readonly withdrawnKids: string[];
}

/**
 * The token settings the ring keeps keys by: how long a new key is published before any instance
 * signs with it, how often an unknown kid may reload the keys (unless the token may be newer than
 * the last reload), and the token lifetimes, the longest of which a retired key keeps verifying.
 */
export type SigningKeyRingOptions = Pick<
  TokenConfig,
  "signingKeyPrepublishSeconds" | "unknownKeyReloadIntervalMs" | "accessTokenTtlSeconds" | "legacyTokenTtlSeconds"
>;

/**
 * The state of every published key at `now`, latest activation first: the newest key whose
 * activation time has passed is `active` (it signs), newer ones are `next` (published and
 * verifying, not signing yet), older ones `retired` (verifying until `notAfter`). Keys past their
 * `notAfter` are gone. A pure function of the stored instants, so every instance that loaded the
 * same rows agrees at the same instant without asking the others. Should no key have activated
 * (only possible with a clock behind the one that scheduled the first key), the earliest one
 * signs rather than none.
 */
export function signingKeyStates(
  records: readonly SigningKeyRecord[],
  now: Date,
): Array<{ record: SigningKeyRecord; state: SigningKeyState }> {
  const t = now.getTime();
  const published = records
    .filter((r) => r.notAfter === undefined || r.notAfter.getTime() > t)
    .sort(
      (a, b) =>
        b.activatesAt.getTime() - a.activatesAt.getTime() ||
        b.createdAt.getTime() - a.createdAt.getTime() ||
        (a.kid < b.kid ? 1 : a.kid > b.kid ? -1 : 0),
    );
  const active = published.find((r) => r.activatesAt.getTime() <= t) ?? published.at(-1);
  const activeIndex = active ? published.indexOf(active) : published.length;
  return published.map((record, i) => ({
    record,
    state: i < activeIndex ? "next" : i === activeIndex ? "active" : "retired",
  }));
}

interface LoadedKey {
  readonly record: SigningKeyRecord;
  readonly key: CryptoKey;
  /** The public half as node:crypto verifies with it, made once per key. */
  readonly publicKey: crypto.KeyObject;
}

/** What the ring answers with between two transitions (a key activating or expiring). */
interface View {
  readonly signing: { kid: string; key: CryptoKey };
  readonly jwks: JSONWebKeySet;
  /** The keys of the JWKS that verify this service's algorithm, by kid. */
  readonly verificationKeys: ReadonlyMap<string, crypto.KeyObject>;
  readonly kids: ReadonlySet<string>;
  /** The view holds for clock readings in [from, until). */
  readonly from: number;
  readonly until: number;
}

/**
 * Signing keys live in the database, their private halves encrypted, so every instance and every
 * restart signs and verifies with the same keys. A rotation publishes the next key first and
 * stores when it activates: each instance loads it (at once through the change feed, at the
 * latest at its periodic reload) and verifies with it well before any instance signs with it,
 * then every instance switches at the stored instant by its own clock. An unknown key id still
 * reloads (a missed announcement, an emergency rotation elsewhere).
 */
export class SigningKeyRing {
  private loaded: readonly LoadedKey[] | undefined;
  private current: View | undefined;
  /** Real time (throttling) and clock time (comparing with `iat`) at which the last reload began. */
  private lastReloadMs = 0;
  private lastReloadAt = 0;
  private reloading: Promise<void> | undefined;
  /** An announcement arrived while a reload was under way (that reload may have read before the change committed). */
  private announcedDuringReload = false;
  /** What the last load read (each key's id and instants), to tell whether a reload changed the published keys. */
  private loadedSignature: string | undefined;
  private readonly changeListeners = new Set<() => void>();

  constructor(
    private readonly deps: {
      readonly uow: UnitOfWork;
      readonly keys: SigningKeyRepository;
      readonly feed: SigningKeyChangeFeed;
      readonly encryptionKey: Buffer;
      readonly now: Clock;
    },
    private readonly options: SigningKeyRingOptions,
  ) {}

  /** Loads the keys, creating the first one (active at once) if there is none, and follows the change feed. */
  async start(): Promise<void> {
    await this.reload();
    if (!this.loaded?.length) {
      await this.deps.uow.transaction(async (tx) => {
        await this.deps.keys.lockForRotation(tx);
        // Another instance starting at the same moment may have created it.
        if ((await this.deps.keys.listPublished(tx, this.deps.now())).length === 0)
          await this.createKey(tx, this.deps.now(), this.deps.now());
      });
      await this.reload();
    }
    // Errors are left to the periodic reload, which logs them and tries again.
    this.deps.feed.onSigningKeyChange(() => {
      if (this.reloading) this.announcedDuringReload = true;
      else void this.reload().catch(() => {});
    });
  }

  get jwks(): JSONWebKeySet {
    return this.view().jwks;
  }

  get signingKey(): { kid: string; key: CryptoKey } {
    return this.view().signing;
  }

  /** Every published key with its state now, latest activation first, as the database has them (for operators). */
  async list(): Promise<Array<{ record: SigningKeyRecord; state: SigningKeyState }>> {
    await this.freshReload();
    return signingKeyStates(
      this.state().map((k) => k.record),
      this.deps.now(),
    );
  }

  /**
   * The keys that verify a token (any published key: next, active or retired), by kid. A token
   * naming an unknown kid reloads the keys first, at most as often as `mayReloadFor` allows.
   */
  /** Whether the key `kid` verifies tokens now (as this instance knows the ring; nothing is reloaded). */
  verifies(kid: string): boolean {
    return this.view().verificationKeys.has(kid);
  }

  verificationKeysFor(
    kid: unknown,
    payloadSegment: string,
  ): ReadonlyMap<string, crypto.KeyObject> | Promise<ReadonlyMap<string, crypto.KeyObject>> {
    const view = this.view();
    if (typeof kid !== "string" || kid === "" || view.kids.has(kid) || !this.mayReloadFor(payloadSegment))
      return view.verificationKeys;
    return this.reload().then(() => this.view().verificationKeys);
  }

  /**
   * Publishes a new key. Planned (the default): it signs from `prepublishSeconds` on, and the
   * current key, retired then, verifies until the longest token lifetime (+ grace) after that.
   * `immediately` (an emergency: the current key is compromised): the new key signs at once and
   * every other key is withdrawn at once, so every token they signed is refused from now on.
   */
  async rotate(options: { immediately?: boolean } = {}): Promise<SigningKeyRotation> {
    const immediately = options.immediately ?? false;
    const rotation = await this.deps.uow.transaction(async (tx) => {
      await this.deps.keys.lockForRotation(tx);
      const now = this.deps.now();
      const published = await this.deps.keys.listPublished(tx, now);
      const waiting = published.find((r) => r.activatesAt.getTime() > now.getTime());
      if (waiting && !immediately) {
        throw new DomainError(
          "SIGNING_KEY_ROTATION_PENDING",
          `Signing key ${waiting.kid} is already published and starts signing at ${waiting.activatesAt.toISOString()}; rotate again after that, or rotate now (emergency)`,
          {
            params: [
              { name: "kid", value: waiting.kid },
              { name: "activatesAt", value: waiting.activatesAt.toISOString() },
            ],
          },
        );
      }
      const activatesAt = immediately ? now : new Date(now.getTime() + this.options.signingKeyPrepublishSeconds * 1000);
      const kid = await this.createKey(tx, now, activatesAt);
      const notAfter = immediately
        ? now
        : new Date(activatesAt.getTime() + (maxTokenLifetimeSeconds(this.options) + RETIRED_KEY_GRACE_SECONDS) * 1000);
      await this.deps.keys.retireAll(tx, activatesAt, notAfter, { except: kid, withdraw: immediately });
      await this.deps.keys.announceChange(tx);
      return { kid, activatesAt, withdrawnKids: immediately ? published.map((r) => r.kid) : [] };
    });
    await this.freshReload();
    return { ...rotation, publishedKids: this.view().jwks.keys.map((k) => k.kid!) };
  }

  /**
   * `listener` runs after every reload that found the published keys changed (a key added,
   * retired or withdrawn, by any instance); the returned function unsubscribes it.
   */
  onKeysChanged(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /** Picks up keys created or retired by other instances. */
  async reload(): Promise<void> {
    this.reloading ??= this.load().finally(() => {
      this.reloading = undefined;
      if (this.announcedDuringReload) {
        this.announcedDuringReload = false;
        void this.reload().catch(() => {});
      }
    });
    return this.reloading;
  }

  /** A reload that starts after this call: one already under way may have read too early. */
  private async freshReload(): Promise<void> {
    await this.reloading?.catch(() => {});
    await this.reload();
  }

  private async load(): Promise<void> {
    this.lastReloadMs = Date.now();
    this.lastReloadAt = this.deps.now().getTime();
    const records = await this.deps.keys.listPublished(this.deps.uow.direct, this.deps.now());
    if (records.length === 0) return;
    const signature = records
      .map((r) => `${r.kid}/${r.activatesAt.getTime()}/${r.notAfter?.getTime() ?? ""}`)
      .sort()
      .join(",");
    const changed = this.loadedSignature !== undefined && signature !== this.loadedSignature;
    // A key already loaded keeps its CryptoKey (and the KeyObjects made for it): only new keys are decrypted.
    const known = new Map((this.loaded ?? []).map((k) => [k.record.kid, k]));
    this.loaded = await Promise.all(
      records.map(async (record): Promise<LoadedKey> => {
        // The record is the one just read (its retirement may have changed); the keys are made once.
        const loaded = known.get(record.kid);
        if (loaded) return { record, key: loaded.key, publicKey: loaded.publicKey };
        return {
          record,
          key: await this.privateKeyOf(record),
          publicKey: crypto.createPublicKey({ key: record.publicJwk as crypto.JsonWebKey, format: "jwk" }),
        };
      }),
    );
    this.current = undefined;
    this.loadedSignature = signature;
    if (changed) for (const listener of this.changeListeners) listener();
  }

  /**
   * Reload for an unknown kid: at most every `unknownKeyReloadIntervalMs` — except when the
   * token was issued after the last reload began (its key may be newer than what was loaded;
   * `iat` is whole seconds of another clock, hence the margin), then at most every
   * UNKNOWN_KID_MIN_RELOAD_GAP_MS. A forged `iat` buys no more than that.
   */
  private mayReloadFor(payloadSegment: string): boolean {
    const sinceReloadMs = Date.now() - this.lastReloadMs;
    if (sinceReloadMs > this.options.unknownKeyReloadIntervalMs) return true;
    if (sinceReloadMs < UNKNOWN_KID_MIN_RELOAD_GAP_MS) return false;
    const iat = issuedAtOf(payloadSegment);
    const marginMs = (1 + VERIFICATION_CLOCK_TOLERANCE_SECONDS) * 1000;
    return (
      iat !== undefined &&
      iat * 1000 + marginMs > this.lastReloadAt &&
      iat * 1000 <= this.deps.now().getTime() + marginMs
    );
  }

  private view(): View {
    const t = this.deps.now().getTime();
    if (this.current && t >= this.current.from && t < this.current.until) return this.current;
    const loaded = this.state();
    const states = signingKeyStates(
      loaded.map((k) => k.record),
      new Date(t),
    );
    const active = states.find((s) => s.state === "active");
    if (!active) throw new Error("no signing key is published: every key has expired");
    const keyOf = new Map(loaded.map((k) => [k.record.kid, k]));
    const jwks: JSONWebKeySet = {
      keys: states.map(({ record: r }) => ({ ...(r.publicJwk as JWK), kid: r.kid, alg: r.alg, use: "sig" })),
    };
    // The next instant at which a key activates or expires: the view is recomputed then.
    const transitions = loaded
      .flatMap((k) => [k.record.activatesAt.getTime(), k.record.notAfter?.getTime() ?? Infinity])
      .filter((x) => x > t);
    const from = Math.max(
      ...loaded
        .flatMap((k) => [k.record.activatesAt.getTime(), k.record.notAfter?.getTime() ?? -Infinity])
        .filter((x) => x <= t),
      -Infinity,
    );
    this.current = {
      signing: { kid: active.record.kid, key: keyOf.get(active.record.kid)!.key },
      jwks,
      // What jose's local JWK set chose from for an EdDSA token: the published keys of that algorithm.
      verificationKeys: new Map(
        states
          .filter(({ record }) => record.alg === SIGNING_ALG)
          .map(({ record }) => [record.kid, keyOf.get(record.kid)!.publicKey]),
      ),
      kids: new Set(states.map((s) => s.record.kid)),
      from,
      until: Math.min(...transitions, Infinity),
    };
    return this.current;
  }

  private async createKey(tx: Tx, createdAt: Date, activatesAt: Date): Promise<string> {
    const { publicKey, privateKey } = await generateKeyPair(SIGNING_ALG, { crv: "Ed25519", extractable: true });
    const kid = crypto.randomBytes(12).toString("base64url");
    const privateJwk = await exportJWK(privateKey);
    await this.deps.keys.insert(tx, {
      kid,
      alg: SIGNING_ALG,
      publicJwk: { ...(await exportJWK(publicKey)) },
      privateJwkCiphertext: seal(
        this.deps.encryptionKey,
        Buffer.from(JSON.stringify(privateJwk)),
        `signing-key:${kid}`,
      ).toString("base64url"),
      createdAt,
      activatesAt,
    });
    return kid;
  }

  private async privateKeyOf(row: SigningKeyRecord): Promise<CryptoKey> {
    const plaintext = open(
      this.deps.encryptionKey,
      Buffer.from(row.privateJwkCiphertext, "base64url"),
      `signing-key:${row.kid}`,
    );
    if (!plaintext) throw new Error(`signing key ${row.kid} cannot be decrypted: is MASTER_KEY the deployment's key?`);
    // Extractable: signing converts it once to a KeyObject (node:crypto's one-shot sign), which Node 24
    // deprecates for non-extractable CryptoKeys (DEP0204). The key never leaves the process either way.
    return (await importJWK(JSON.parse(plaintext.toString("utf8")) as JWK, row.alg, {
      extractable: true,
    })) as CryptoKey;
  }

  private state(): readonly LoadedKey[] {
    if (!this.loaded) throw new Error("signing keys are not loaded");
    return this.loaded;
  }
}

/** The unverified `iat` of a compact JWS's payload segment, if it is a number. */
function issuedAtOf(payloadSegment: string): number | undefined {
  const iat = unverifiedJsonOf(payloadSegment)?.iat;
  return typeof iat === "number" && Number.isFinite(iat) ? iat : undefined;
}
