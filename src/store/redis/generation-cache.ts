import type { RedisClientType } from "redis";
import type { CredentialState } from "../../domain/tokens/model.js";
import type { GenerationCache, WatermarkRaise } from "../../domain/tokens/ports.js";
import type { CircuitBreaker } from "./circuit-breaker.js";
import { withinTimeout } from "./command-timeout.js";
import { LuaScript } from "./lua-script.js";
import { redisSpan } from "./redis-spans.js";

/**
 * Stores each state unless the key holds one with a higher change number, then raises the
 * watermark to ARGV[1] if it is at least ARGV[2] (0 and 0: leave it). KEYS: watermark, client
 * keys…; ARGV: raise-to, if-at-least, then (seq, value, ttl) per client. One script, so states and
 * the watermark that covers them are written atomically.
 */
const WRITE_SCRIPT = new LuaScript(`
for i = 2, #KEYS do
  local seq = tonumber(ARGV[(i - 2) * 3 + 3])
  local current = redis.call('GET', KEYS[i])
  local currentSeq = -1
  if current then currentSeq = tonumber(string.match(current, ':(%d+)$')) or -1 end
  if seq >= currentSeq then redis.call('SET', KEYS[i], ARGV[(i - 2) * 3 + 4], 'EX', tonumber(ARGV[(i - 2) * 3 + 5])) end
end
local raiseTo = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if raiseTo > current and current >= tonumber(ARGV[2]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1`);

/**
 * Credential states in Redis, shared by every instance: `g:<generation>:<change>` or
 * `r:<change>` (revoked) under `<prefix>cred:<clientId>`, each with a TTL as a last safety net,
 * and the watermark under `<prefix>cred:watermark` (no TTL). Read in one MGET.
 */
export class RedisGenerationCache implements GenerationCache {
  private readonly watermarkRedisKey: string;

  constructor(
    private readonly redis: RedisClientType,
    private readonly keyPrefix: string,
    /** How long a cached state lives before it is re-read from the database. */
    private readonly ttlSeconds: number,
    private readonly breaker: CircuitBreaker,
    private readonly commandTimeoutMs: number,
  ) {
    this.watermarkRedisKey = watermarkKey(keyPrefix);
  }

  async read(clientIds: readonly string[]): Promise<{ states: Array<CredentialState | undefined>; watermark: number }> {
    const keys = [this.watermarkRedisKey, ...clientIds.map((id) => this.key(id))];
    const [watermark, ...values] = await redisSpan(
      "MGET",
      this.breaker.run(() => withinTimeout(this.redis.mGet(keys), this.commandTimeoutMs)),
    );
    return {
      states: values.map((v) => (v === null ? undefined : decode(v))),
      watermark: watermark === null ? 0 : Number(watermark),
    };
  }

  async write(states: ReadonlyMap<string, CredentialState>, watermark?: WatermarkRaise): Promise<void> {
    const keys = [this.watermarkRedisKey];
    const args = [String(watermark?.to ?? 0), String(watermark?.ifAtLeast ?? 0)];
    for (const [id, state] of states) {
      keys.push(this.key(id));
      // A revoked token's state must outlive the token; everything else the cache's TTL.
      args.push(String(state.changeSeq), encode(state), String(Math.max(state.ttlSeconds ?? 0, this.ttlSeconds)));
    }
    await redisSpan(
      "EVALSHA",
      this.breaker.run(() => withinTimeout(WRITE_SCRIPT.run(this.redis, keys, args), this.commandTimeoutMs)),
      "generation-cache.write",
    );
  }

  private key(clientId: string): string {
    return credentialKey(this.keyPrefix, clientId);
  }
}

export const watermarkKey = (keyPrefix: string): string => `${keyPrefix}cred:watermark`;
export const credentialKey = (keyPrefix: string, clientId: string): string => `${keyPrefix}cred:${clientId}`;

function encode(state: CredentialState): string {
  return state.generation === undefined ? `r:${state.changeSeq}` : `g:${state.generation}:${state.changeSeq}`;
}

/** Anything unreadable counts as revoked: never "accept" on a value we cannot understand. */
function decode(value: string): CredentialState {
  const granted = /^g:(\d+):(\d+)$/.exec(value);
  if (granted) return { generation: Number(granted[1]), changeSeq: Number(granted[2]) };
  const revoked = /^r:(\d+)$/.exec(value);
  return { generation: undefined, changeSeq: revoked ? Number(revoked[1]) : Number.MAX_SAFE_INTEGER };
}
