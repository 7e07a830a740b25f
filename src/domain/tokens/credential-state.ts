import type { Knex } from "knex";
import type { Logger } from "pino";
import type { RedisClientType } from "redis";
import type { Counter } from "prom-client";

/**
 * The current credential generation of each API user, which every access token carries. A token
 * is valid only while its generation equals the current one: rotation bumps it and revocation
 * removes it, so every token of that credential fails at once on every instance with no token
 * list to scan. Redis holds a copy for the hot path (one MGET per check); Postgres is the truth
 * on a miss, and whenever Redis cannot answer — never "accept".
 */
export class CredentialState {
  private readonly memory = new Map<string, string>();
  /**
   * False from start-up and from every lost connection until a reconcile has run: values in
   * Redis may predate changes that committed while this instance could not reach it.
   */
  private redisTrusted = false;

  constructor(
    private readonly db: Knex,
    private readonly redis: RedisClientType | undefined,
    private readonly keyPrefix: string,
    private readonly logger: Logger,
    private readonly redisFallbacks: Counter<"operation">,
    /**
     * How long a cached generation may live in Redis before it is re-read from Postgres: the
     * safety net if Redis was partitioned away (not restarted) while a change committed and
     * answers again with the old value before `reconcile` runs.
     */
    private readonly cacheSeconds = 300,
  ) {
    redis?.on("error", () => (this.redisTrusted = false));
  }

  /** Current generation per client id; undefined for a revoked or unknown client. */
  async generations(clientIds: readonly string[]): Promise<Map<string, number | undefined>> {
    const result = new Map<string, number | undefined>();
    const keys = clientIds.map((id) => this.key(id));
    if (this.redis && !this.redisTrusted) return this.fromDatabase(clientIds);
    let cached: Array<string | null>;
    try {
      cached = this.redis ? await this.redis.mGet(keys) : keys.map((k) => this.memory.get(k) ?? null);
    } catch (error) {
      this.fallback("read", error);
      return this.fromDatabase(clientIds);
    }
    const missing: string[] = [];
    clientIds.forEach((id, i) => {
      const value = cached[i];
      if (value === null || value === undefined) missing.push(id);
      else result.set(id, decode(value));
    });
    if (missing.length > 0) {
      const fresh = await this.fromDatabase(missing);
      for (const [id, generation] of fresh) result.set(id, generation);
      // NX: a fill from a read that raced a change must never overwrite the change's publication.
      await this.store(fresh, { onlyIfAbsent: true });
    }
    return result;
  }

  /**
   * Tells every instance a client's new generation (undefined: revoked), inside the transaction
   * that changes it: while its row lock is held and before it commits, so no instance can read
   * the old value back in between. If Redis cannot take it, the change still commits (while
   * Redis is down every instance reads Postgres) and an outbox row in the same transaction
   * makes `reconcile` publish it once Redis answers again.
   */
  async publishWithin(trx: Knex.Transaction, clientId: string, generation: number | undefined): Promise<void> {
    try {
      await this.store(new Map([[clientId, generation]]), { mustSucceed: true });
    } catch {
      await trx("credential_outbox").insert({ client_id: clientId, changed_at: new Date() }).onConflict("client_id").merge();
    }
  }

  /** Publishes changes that committed while Redis was unreachable; each instance runs it periodically. */
  async reconcile(): Promise<number> {
    if (!this.redis?.isReady) return 0;
    const pending: Array<{ client_id: string; changed_at: Date }> = await this.db("credential_outbox").select("client_id", "changed_at");
    if (pending.length === 0) {
      this.redisTrusted = true;
      return 0;
    }
    await this.store(await this.fromDatabase(pending.map((p) => p.client_id)), { mustSucceed: true });
    // A change that committed meanwhile moved changed_at and stays for the next round.
    for (const entry of pending) await this.db("credential_outbox").where(entry).delete();
    this.redisTrusted = true;
    this.logger.info({ count: pending.length }, "credential state: published changes made while Redis was unreachable");
    return pending.length;
  }

  /** Re-publishes what Postgres says, e.g. after a change published before commit was rolled back. */
  async refresh(clientId: string): Promise<void> {
    await this.store(await this.fromDatabase([clientId]));
  }

  private async fromDatabase(clientIds: readonly string[]): Promise<Map<string, number | undefined>> {
    const rows: Array<{ client_id: string; credential_generation: number }> = await this.db("api_users")
      .whereIn("client_id", [...clientIds])
      .whereNull("revoked_at")
      .select("client_id", "credential_generation");
    const found = new Map(rows.map((r) => [r.client_id, r.credential_generation]));
    return new Map(clientIds.map((id) => [id, found.get(id)]));
  }

  private async store(
    values: Map<string, number | undefined>,
    options: { onlyIfAbsent?: boolean; mustSucceed?: boolean } = {},
  ): Promise<void> {
    if (!this.redis) {
      for (const [id, generation] of values) {
        if (!options.onlyIfAbsent || !this.memory.has(this.key(id))) this.memory.set(this.key(id), encode(generation));
      }
      return;
    }
    try {
      const multi = this.redis.multi();
      for (const [id, generation] of values) {
        multi.set(this.key(id), encode(generation), options.onlyIfAbsent ? { EX: this.cacheSeconds, condition: "NX" } : { EX: this.cacheSeconds });
      }
      await multi.exec();
    } catch (error) {
      this.fallback("write", error);
      if (options.mustSucceed) throw error;
    }
  }

  private fallback(operation: "read" | "write", error: unknown): void {
    this.redisFallbacks.inc({ operation });
    this.logger.warn({ err: { message: (error as Error).message }, operation }, "credential state: Redis unavailable, using Postgres");
  }

  private key(clientId: string): string {
    return `${this.keyPrefix}cred:${clientId}`;
  }
}

function encode(generation: number | undefined): string {
  return generation === undefined ? "revoked" : `g:${generation}`;
}

function decode(value: string): number | undefined {
  return value.startsWith("g:") ? Number(value.slice(2)) : undefined;
}
