import crypto from "node:crypto";
import { createLocalJWKSet, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JSONWebKeySet, type JWK, type JWTVerifyGetKey } from "jose";
import { open, seal } from "../shared/aead.js";
import type { Clock } from "../shared/clock.js";
import type { Tx, UnitOfWork } from "../shared/unit-of-work.js";
import type { SigningKeyRecord } from "./model.js";
import type { SigningKeyRepository } from "./ports.js";

/** The only signature algorithm this service issues and accepts for its own tokens. */
export const SIGNING_ALG = "EdDSA";

interface LoadedKeys {
  readonly signing: { kid: string; key: CryptoKey };
  readonly jwks: JSONWebKeySet;
  readonly verifier: JWTVerifyGetKey;
  readonly kids: ReadonlySet<string>;
}

/**
 * Signing keys live in the database, their private halves encrypted, so every instance and every
 * restart signs and verifies with the same keys. Each instance reloads them periodically and at
 * once when it meets a key id it does not know (another instance rotated).
 */
export class SigningKeyRing {
  private loaded: LoadedKeys | undefined;
  private lastReload = 0;
  private reloading: Promise<void> | undefined;

  constructor(
    private readonly uow: UnitOfWork,
    private readonly keys: SigningKeyRepository,
    private readonly encryptionKey: Buffer,
    private readonly options: {
      /** How long a retired key must keep verifying: the longest token lifetime. */
      readonly maxTokenLifetimeSeconds: number;
      /** A token with an unknown kid reloads the keys at most this often. */
      readonly unknownKeyReloadIntervalMs: number;
    },
    private readonly now: Clock,
  ) {}

  /** Loads the keys, creating the first one if there is none. */
  async start(): Promise<void> {
    await this.reload();
    if (!this.loaded) {
      await this.createKey(this.uow.direct);
      await this.reload();
    }
  }

  get jwks(): JSONWebKeySet {
    return this.state().jwks;
  }

  get signingKey(): { kid: string; key: CryptoKey } {
    return this.state().signing;
  }

  /** Key lookup for jose's jwtVerify; reloads once (at most every 5 s) on an unknown kid. */
  readonly verificationKey: JWTVerifyGetKey = async (header, token) => {
    if (header.kid && !this.state().kids.has(header.kid) && Date.now() - this.lastReload > this.options.unknownKeyReloadIntervalMs) await this.reload();
    return this.state().verifier(header, token);
  };

  /** Starts signing with a new key; the previous ones keep verifying until their tokens expire. */
  async rotate(): Promise<{ kid: string; publishedKids: string[] }> {
    const kid = await this.uow.transaction(async (tx) => {
      const now = this.now();
      await this.keys.retireAll(tx, now, new Date(now.getTime() + (this.options.maxTokenLifetimeSeconds + 300) * 1000));
      return this.createKey(tx);
    });
    await this.reload();
    return { kid, publishedKids: this.state().jwks.keys.map((k) => k.kid!) };
  }

  /** Picks up keys created or retired by other instances. */
  async reload(): Promise<void> {
    this.reloading ??= this.load().finally(() => (this.reloading = undefined));
    return this.reloading;
  }

  private async load(): Promise<void> {
    this.lastReload = Date.now();
    const rows = await this.keys.listPublished(this.uow.direct, this.now());
    const active = rows.find((r) => !r.retired) ?? rows[0];
    if (!active) return;
    const jwks: JSONWebKeySet = { keys: rows.map((r) => ({ ...(r.publicJwk as JWK), kid: r.kid, alg: r.alg, use: "sig" })) };
    this.loaded = {
      signing: { kid: active.kid, key: await this.privateKeyOf(active) },
      jwks,
      verifier: createLocalJWKSet(jwks),
      kids: new Set(rows.map((r) => r.kid)),
    };
  }

  private async createKey(tx: Tx): Promise<string> {
    const { publicKey, privateKey } = await generateKeyPair(SIGNING_ALG, { crv: "Ed25519", extractable: true });
    const kid = crypto.randomBytes(12).toString("base64url");
    const privateJwk = await exportJWK(privateKey);
    await this.keys.insert(tx, {
      kid,
      alg: SIGNING_ALG,
      publicJwk: { ...(await exportJWK(publicKey)) },
      privateJwkCiphertext: seal(this.encryptionKey, Buffer.from(JSON.stringify(privateJwk)), `signing-key:${kid}`).toString("base64url"),
    });
    return kid;
  }

  private async privateKeyOf(row: SigningKeyRecord): Promise<CryptoKey> {
    const plaintext = open(this.encryptionKey, Buffer.from(row.privateJwkCiphertext, "base64url"), `signing-key:${row.kid}`);
    if (!plaintext) throw new Error(`signing key ${row.kid} cannot be decrypted: is MASTER_KEY the deployment's key?`);
    return (await importJWK(JSON.parse(plaintext.toString("utf8")) as JWK, row.alg)) as CryptoKey;
  }

  private state(): LoadedKeys {
    if (!this.loaded) throw new Error("signing keys are not loaded");
    return this.loaded;
  }
}
