import type { ApiUserRepository, CredentialChangePublisher } from "../api-users/ports.js";
import type { Clock } from "../shared/clock.js";
import type { LabelledCounter, Logger } from "../shared/observability.js";
import type { Tx, UnitOfWork } from "../shared/unit-of-work.js";
import type { CachedGeneration } from "./model.js";
import type { CredentialOutbox, GenerationCache } from "./ports.js";

/** Current generation per client id; undefined for a revoked or unknown client. */
export type Generations = Map<string, number | undefined>;

/**
 * The current credential generation of each API user, which every access token carries. A token
 * is valid only while its generation equals the current one: rotation bumps it and revocation
 * removes it, so every token of that credential fails at once on every instance with no token
 * list to scan. The cache (Redis) holds a copy for the hot path; the database is the truth on a
 * miss, and whenever the cache cannot answer or cannot be trusted — never "accept".
 */
export class CredentialGenerations implements CredentialChangePublisher {
  constructor(
    private readonly uow: UnitOfWork,
    private readonly apiUsers: ApiUserRepository,
    private readonly outbox: CredentialOutbox,
    private readonly cache: GenerationCache,
    private readonly logger: Logger,
    private readonly fallbacks: LabelledCounter<"operation">,
    private readonly clock: Clock,
  ) {}

  async current(clientIds: readonly string[]): Promise<Generations> {
    if (!this.cache.trusted) return this.fromDatabase(clientIds);
    let cached: Array<CachedGeneration | undefined>;
    try {
      cached = await this.cache.get(clientIds);
    } catch (error) {
      this.fallback("read", error);
      return this.fromDatabase(clientIds);
    }
    const result: Generations = new Map();
    const missing: string[] = [];
    clientIds.forEach((id, i) => {
      const value = cached[i];
      if (value === undefined) missing.push(id);
      else result.set(id, value === "revoked" ? undefined : value);
    });
    if (missing.length > 0) {
      const fresh = await this.fromDatabase(missing);
      for (const [id, generation] of fresh) result.set(id, generation);
      // Only if absent: a fill from a read that raced a change must never overwrite the change's publication.
      await this.cache.put(toCached(fresh), { onlyIfAbsent: true }).catch((error: unknown) => this.fallback("write", error));
    }
    return result;
  }

  /**
   * Tells every instance a client's new generation (undefined: revoked), inside the transaction
   * that changes it: while its row lock is held and before it commits, so no instance can read
   * the old value back in between. If the cache cannot take it, the change still commits (while
   * the cache is untrusted every instance reads the database) and an outbox entry in the same
   * transaction makes `reconcile` publish it once the cache answers again.
   */
  async publishWithin(tx: Tx, clientId: string, generation: number | undefined): Promise<void> {
    try {
      await this.cache.put(toCached(new Map([[clientId, generation]])), { onlyIfAbsent: false });
    } catch (error) {
      this.fallback("write", error);
      await this.outbox.add(tx, clientId, this.clock());
    }
  }

  /** Publishes changes that committed while the cache was unreachable; a background job of every instance. */
  async reconcile(): Promise<number> {
    if (!this.cache.reachable) return 0;
    const pending = await this.outbox.pending(this.uow.direct);
    if (pending.length > 0) {
      await this.cache.put(toCached(await this.fromDatabase(pending.map((p) => p.clientId))), { onlyIfAbsent: false });
      // A change that committed meanwhile moved changedAt and stays for the next round.
      for (const entry of pending) await this.outbox.remove(this.uow.direct, entry);
      this.logger.info({ count: pending.length }, "credential state: published changes made while Redis was unreachable");
    }
    this.cache.markTrusted();
    return pending.length;
  }

  /** Re-publishes what the database says, e.g. after a change published before commit was rolled back. */
  async refresh(clientId: string): Promise<void> {
    const values = toCached(await this.fromDatabase([clientId]));
    await this.cache.put(values, { onlyIfAbsent: false }).catch((error: unknown) => this.fallback("write", error));
  }

  private async fromDatabase(clientIds: readonly string[]): Promise<Generations> {
    const found = await this.apiUsers.activeGenerations(this.uow.direct, clientIds);
    return new Map(clientIds.map((id) => [id, found.get(id)]));
  }

  private fallback(operation: "read" | "write", error: unknown): void {
    this.fallbacks.inc({ operation });
    this.logger.warn({ err: { message: (error as Error).message }, operation }, "credential state: Redis unavailable, using Postgres");
  }
}

function toCached(generations: Generations): Map<string, CachedGeneration> {
  return new Map([...generations].map(([id, generation]) => [id, generation ?? "revoked"]));
}
