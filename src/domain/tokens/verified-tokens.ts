import { LruMap } from "../shared/lru-map.js";
import type { Principal } from "./model.js";

/**
 * Access tokens whose signature and claims this instance has already verified, by their exact
 * text: a protected service (and a gateway batching introspections) presents the same token for
 * its whole life, and its EdDSA signature is the largest cost of checking it. Only what cannot
 * change is remembered — the signature over these exact bytes and the claims it covers — so a
 * hit still checks what can: that the signing key still verifies (an emergency rotation withdraws
 * it), the expiry against the current time, and the audience asked for; revocation is checked on
 * every use by the caller, never remembered. A forged or altered token is a different text, so
 * it can never hit. Bounded; least recently used out.
 */
export class VerifiedTokens {
  private readonly entries: LruMap<string, VerifiedToken>;

  constructor(capacity: number) {
    this.entries = new LruMap(capacity);
  }

  get(token: string): VerifiedToken | undefined {
    return this.entries.touch(token);
  }

  remember(token: string, entry: VerifiedToken): void {
    this.entries.set(token, entry);
  }

  forget(token: string): void {
    this.entries.delete(token);
  }

  get size(): number {
    return this.entries.size;
  }
}

export interface VerifiedToken {
  readonly principal: Principal;
  /** The key that signed it (its `kid`), which must still verify for a hit to count. */
  readonly kid: string;
}
