import crypto from "node:crypto";
import { createLocalJWKSet, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JSONWebKeySet, type JWK, type JWTVerifyGetKey } from "jose";
import type { Knex } from "knex";
import { open, seal } from "../credentials/aead.js";
import { insertSigningKey, listPublishedSigningKeys, retireSigningKeys, type SigningKeyRow } from "../../store/signing-key-store.js";

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
    private readonly db: Knex,
    private readonly encryptionKey: Buffer,
    /** How long a retired key must keep verifying: the longest token lifetime. */
    private readonly maxTokenLifetimeSeconds: number,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Loads the keys, creating the first one if there is none. */
  async start(): Promise<void> {
    await this.reload();
    if (!this.loaded) {
      await this.createKey(this.db);
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
    if (header.kid && !this.state().kids.has(header.kid) && Date.now() - this.lastReload > 5_000) await this.reload();
    return this.state().verifier(header, token);
  };

  /** Starts signing with a new key; the previous ones keep verifying until their tokens expire. */
  async rotate(): Promise<{ kid: string; publishedKids: string[] }> {
    const kid = await this.db.transaction(async (trx) => {
      const now = this.now();
      await retireSigningKeys(trx, now, new Date(now.getTime() + (this.maxTokenLifetimeSeconds + 300) * 1000));
      return this.createKey(trx);
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
    const rows = await listPublishedSigningKeys(this.db, this.now());
    const active = rows.find((r) => r.retired_at === null) ?? rows[0];
    if (!active) return;
    const jwks: JSONWebKeySet = { keys: rows.map((r) => ({ ...(r.public_jwk as JWK), kid: r.kid, alg: r.alg, use: "sig" })) };
    this.loaded = {
      signing: { kid: active.kid, key: await this.privateKeyOf(active) },
      jwks,
      verifier: createLocalJWKSet(jwks),
      kids: new Set(rows.map((r) => r.kid)),
    };
  }

  private async createKey(db: Knex): Promise<string> {
    const { publicKey, privateKey } = await generateKeyPair(SIGNING_ALG, { crv: "Ed25519", extractable: true });
    const kid = crypto.randomBytes(12).toString("base64url");
    const privateJwk = await exportJWK(privateKey);
    await insertSigningKey(db, {
      kid,
      alg: SIGNING_ALG,
      public_jwk: await exportJWK(publicKey),
      private_jwk_ciphertext: seal(this.encryptionKey, Buffer.from(JSON.stringify(privateJwk)), `signing-key:${kid}`).toString("base64url"),
    });
    return kid;
  }

  private async privateKeyOf(row: SigningKeyRow): Promise<CryptoKey> {
    const plaintext = open(this.encryptionKey, Buffer.from(row.private_jwk_ciphertext, "base64url"), `signing-key:${row.kid}`);
    if (!plaintext) throw new Error(`signing key ${row.kid} cannot be decrypted: is MASTER_KEY the deployment's key?`);
    return (await importJWK(JSON.parse(plaintext.toString("utf8")) as JWK, row.alg)) as CryptoKey;
  }

  private state(): LoadedKeys {
    if (!this.loaded) throw new Error("signing keys are not loaded");
    return this.loaded;
  }
}
