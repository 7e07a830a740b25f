import type { RedisClientType } from "redis";
import type { CachedGeneration } from "../../domain/tokens/model.js";
import type { GenerationCache } from "../../domain/tokens/ports.js";

/**
 * Credential generations in Redis, shared by every instance: `g:<n>` or `revoked` under
 * `<prefix>cred:<clientId>`, each with a TTL as a last safety net. Untrusted from start-up and
 * from every lost connection until the domain's reconcile has run: values in Redis may predate
 * changes that committed while this instance could not reach it.
 */
export class RedisGenerationCache implements GenerationCache {
  private isTrusted = false;

  constructor(
    private readonly redis: RedisClientType,
    private readonly keyPrefix: string,
    /** How long a cached generation lives before it is re-read from the database. */
    private readonly ttlSeconds: number,
  ) {
    redis.on("error", () => (this.isTrusted = false));
  }

  get trusted(): boolean {
    return this.isTrusted;
  }

  get reachable(): boolean {
    return this.redis.isReady;
  }

  markTrusted(): void {
    this.isTrusted = true;
  }

  async get(clientIds: readonly string[]): Promise<Array<CachedGeneration | undefined>> {
    const values = await this.redis.mGet(clientIds.map((id) => this.key(id)));
    return values.map((value) => (value === null ? undefined : decode(value)));
  }

  async put(values: ReadonlyMap<string, CachedGeneration>, options: { onlyIfAbsent: boolean }): Promise<void> {
    const multi = this.redis.multi();
    for (const [id, generation] of values) {
      multi.set(this.key(id), encode(generation), options.onlyIfAbsent ? { EX: this.ttlSeconds, condition: "NX" } : { EX: this.ttlSeconds });
    }
    await multi.exec();
  }

  private key(clientId: string): string {
    return `${this.keyPrefix}cred:${clientId}`;
  }
}

function encode(generation: CachedGeneration): string {
  return generation === "revoked" ? "revoked" : `g:${generation}`;
}

function decode(value: string): CachedGeneration {
  return value.startsWith("g:") ? Number(value.slice(2)) : "revoked";
}
