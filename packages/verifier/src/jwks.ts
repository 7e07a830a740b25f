// The auth service's published verification keys (its JWKS), as node:crypto KeyObjects by kid.
// Refetched when the stream says the keys changed, on every reconnection, and when a token names
// a kid not seen yet — that last one at most once per cooldown, so forged kids cannot make every
// verification a fetch.
import crypto from "node:crypto";
import { ALGORITHM } from "./token-format.js";

export class KeySet {
  private keys = new Map<string, crypto.KeyObject>();
  private lastFetchAt = -Infinity;
  private inFlight: Promise<void> | undefined;
  fetches = 0;
  failures = 0;

  constructor(
    private readonly jwksUrl: string,
    private readonly cooldownMs: number,
    private readonly timeoutMs = 5000,
  ) {}

  /** How many usable keys the last successful fetch found. */
  get size(): number {
    return this.keys.size;
  }

  /** Every usable key now, by kid (no fetch). */
  get all(): ReadonlyMap<string, crypto.KeyObject> {
    return this.keys;
  }

  /** The key of `kid` if it is known now (no fetch). */
  known(kid: string): crypto.KeyObject | undefined {
    return this.keys.get(kid);
  }

  /** The key of `kid`, fetching the JWKS once if it is unknown and the cooldown has passed. */
  async keyFor(kid: string): Promise<crypto.KeyObject | undefined> {
    const key = this.keys.get(kid);
    if (key) return key;
    if (performance.now() - this.lastFetchAt < this.cooldownMs) {
      if (this.inFlight) await this.inFlight.catch(() => {});
      return this.keys.get(kid);
    }
    await this.refresh().catch(() => {});
    return this.keys.get(kid);
  }

  /** Fetches the JWKS now (one fetch at a time; callers during it share it). */
  refresh(): Promise<void> {
    this.inFlight ??= this.fetch().finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  private async fetch(): Promise<void> {
    this.lastFetchAt = performance.now();
    this.fetches++;
    try {
      const response = await fetch(this.jwksUrl, { signal: AbortSignal.timeout(this.timeoutMs) });
      if (!response.ok) throw new Error(`JWKS answered ${response.status}`);
      const body = (await response.json()) as { keys?: unknown };
      if (!Array.isArray(body.keys)) throw new Error("JWKS without keys");
      const keys = new Map<string, crypto.KeyObject>();
      for (const jwk of body.keys as Array<Record<string, unknown>>) {
        const usable =
          typeof jwk.kid === "string" &&
          jwk.kty === "OKP" &&
          jwk.crv === "Ed25519" &&
          (jwk.alg === undefined || jwk.alg === ALGORITHM) &&
          (jwk.use === undefined || jwk.use === "sig");
        if (!usable) continue;
        try {
          keys.set(
            jwk.kid as string,
            crypto.createPublicKey({
              key: { kty: "OKP", crv: "Ed25519", x: jwk.x } as crypto.JsonWebKey,
              format: "jwk",
            }),
          );
        } catch {
          // A key that does not parse verifies nothing; the others still do.
        }
      }
      this.keys = keys;
    } catch (error) {
      this.failures++;
      throw error;
    }
  }
}
