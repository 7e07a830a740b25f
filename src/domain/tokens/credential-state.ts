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

  constructor(
    private readonly db: Knex,
    private readonly redis: RedisClientType | undefined,
    private readonly keyPrefix: string,
    private readonly logger: Logger,
    private readonly redisFallbacks: Counter<"operation">,
    /** How long a cached generation may live in Redis before it is re-read from Postgres. */
    private readonly cacheSeconds = 3600,
  ) {}

  /** Current generation per client id; undefined for a revoked or unknown client. */
  async generations(clientIds: readonly string[]): Promise<Map<string, number | undefined>> {
    const result = new Map<string, number | undefined>();
    const keys = clientIds.map((id) => this.key(id));
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
      await this.store(fresh);
    }
    return result;
  }

  /**
   * Tells every instance a client's new generation (undefined: revoked). Callers publish while
   * the row lock of the change is still held and before it commits, so no instance can read
   * the old value back in between; a failure here must abort the change (fail closed).
   */
  async publish(clientId: string, generation: number | undefined): Promise<void> {
    await this.store(new Map([[clientId, generation]]), true);
  }

  private async fromDatabase(clientIds: readonly string[]): Promise<Map<string, number | undefined>> {
    const rows: Array<{ client_id: string; credential_generation: number }> = await this.db("api_users")
      .whereIn("client_id", [...clientIds])
      .whereNull("revoked_at")
      .select("client_id", "credential_generation");
    const found = new Map(rows.map((r) => [r.client_id, r.credential_generation]));
    return new Map(clientIds.map((id) => [id, found.get(id)]));
  }

  private async store(values: Map<string, number | undefined>, mustSucceed = false): Promise<void> {
    if (!this.redis) {
      for (const [id, generation] of values) this.memory.set(this.key(id), encode(generation));
      return;
    }
    try {
      const multi = this.redis.multi();
      for (const [id, generation] of values) multi.set(this.key(id), encode(generation), { EX: this.cacheSeconds });
      await multi.exec();
    } catch (error) {
      this.fallback("write", error);
      if (mustSucceed) throw error;
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
