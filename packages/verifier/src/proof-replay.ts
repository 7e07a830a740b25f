/**
 * The DPoP proofs (their replay ids) a verifier has accepted, each until it expires: a proof is
 * accepted once. Per process: a resource server's instances do not share it, so a proof replayed
 * to another instance within its lifetime (at most a minute, its `iat` window) is not caught
 * there — the nonce (derived from the resource server's credentials, the same on every instance)
 * and the one-minute window bound what that leaves. Bounded: when full of unexpired proofs it
 * refuses new ones (fails closed) rather than forget one that could then be replayed.
 */
export class ProofReplayCache {
  /** Replay id → expiry (ms); insertion order is roughly expiry order, so expired ones are at the front. */
  private readonly seen = new Map<string, number>();

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.seen.size;
  }

  /** True the first time `id` is used before `expiresAtMs`; false when used before, or when the cache is full. */
  useOnce(id: string, expiresAtMs: number, nowMs: number): boolean {
    const known = this.seen.get(id);
    if (known !== undefined && known > nowMs) return false;
    if (this.seen.size >= this.capacity) this.prune(nowMs);
    if (this.seen.size >= this.capacity) return false;
    this.seen.set(id, expiresAtMs);
    return true;
  }

  /** Drops expired entries (from the front: they were added first). */
  prune(nowMs: number): void {
    for (const [id, expiresAtMs] of this.seen) {
      if (expiresAtMs > nowMs) {
        // Entries are added with roughly increasing expiry; a later one still live ends the sweep.
        if (this.seen.size < this.capacity) return;
        continue;
      }
      this.seen.delete(id);
    }
  }

  clear(): void {
    this.seen.clear();
  }
}
