import type { CredentialState } from "../../domain/tokens/model.js";
import type { GenerationCache, WatermarkRaise } from "../../domain/tokens/ports.js";
import type { CircuitBreaker } from "./circuit-breaker.js";
import { withinTimeout } from "./command-timeout.js";
import { BUCKETS, bucketOf, credentialKey, watermarkKey } from "./credential-keys.js";
import { LuaScript } from "./lua-script.js";
import type { RedisConnection } from "./redis-client.js";
import { redisSpan } from "./redis-spans.js";

/**
 * Stores each state unless the key holds one with a higher change number, then raises the
 * bucket's watermark to ARGV[1] if it is at least ARGV[2] (0 and 0: leave it). KEYS: the bucket's
 * watermark, its client keys…; ARGV: raise-to, if-at-least, then (seq, value, ttl) per client. One script, so states and
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
 * Credential states in Redis, shared by every instance, laid out by credential-keys.ts: per
 * bucket, states and the bucket's watermark in one hash slot, each state with a TTL as a last
 * safety net. A read is one MGET per bucket involved (sent together: one round trip on one
 * connection); the watermark it reports is the lowest of those buckets' (of every bucket when no
 * client is named: what the reconcile job must start from). A write is one script per bucket, and
 * a watermark raise goes to every bucket: a change leaves the buckets it does not concern covered.
 */
export class RedisGenerationCache implements GenerationCache {
  constructor(
    private readonly redis: RedisConnection,
    private readonly keyPrefix: string,
    /** How long a cached state lives before it is re-read from the database. */
    private readonly ttlSeconds: number,
    private readonly breaker: CircuitBreaker,
    private readonly commandTimeoutMs: number,
  ) {}

  async read(clientIds: readonly string[]): Promise<{ states: Array<CredentialState | undefined>; watermark: number }> {
    const byBucket = groupByBucket(clientIds.map((id, index) => ({ id, index })));
    if (clientIds.length === 0) for (let b = 0; b < BUCKETS; b++) byBucket.set(b, []);
    const states = new Array<CredentialState | undefined>(clientIds.length);
    const watermarks = await redisSpan(
      "MGET",
      this.breaker.run(() =>
        withinTimeout(
          Promise.all(
            [...byBucket].map(async ([bucket, members]) => {
              const keys = [watermarkKey(this.keyPrefix, bucket), ...members.map((m) => this.key(m.id))];
              const [watermark, ...values] = await this.redis.mGet(keys);
              members.forEach((m, i) => (states[m.index] = values[i] == null ? undefined : decode(values[i]!)));
              return watermark == null ? 0 : Number(watermark);
            }),
          ),
          this.commandTimeoutMs,
        ),
      ),
    );
    return { states, watermark: Math.min(...watermarks) };
  }

  async write(states: ReadonlyMap<string, CredentialState>, watermark?: WatermarkRaise): Promise<void> {
    const byBucket = groupByBucket([...states].map(([id, state]) => ({ id, state })));
    // A raise reaches every bucket (each rises only if it covers `ifAtLeast`), states only theirs.
    if (watermark) for (let b = 0; b < BUCKETS; b++) if (!byBucket.has(b)) byBucket.set(b, []);
    const raise = [String(watermark?.to ?? 0), String(watermark?.ifAtLeast ?? 0)];
    await redisSpan(
      "EVALSHA",
      this.breaker.run(() =>
        withinTimeout(
          Promise.all(
            [...byBucket].map(([bucket, members]) => {
              const keys = [watermarkKey(this.keyPrefix, bucket)];
              const args = [...raise];
              for (const { id, state } of members) {
                keys.push(this.key(id));
                // A revoked token's state must outlive the token; everything else the cache's TTL.
                args.push(
                  String(state.changeSeq),
                  encode(state),
                  String(Math.max(state.ttlSeconds ?? 0, this.ttlSeconds)),
                );
              }
              return WRITE_SCRIPT.run(this.redis, keys, args);
            }),
          ),
          this.commandTimeoutMs,
        ),
      ),
      "generation-cache.write",
    );
  }

  private key(clientId: string): string {
    return credentialKey(this.keyPrefix, clientId);
  }
}

function groupByBucket<T extends { readonly id: string }>(members: readonly T[]): Map<number, T[]> {
  const groups = new Map<number, T[]>();
  for (const member of members) {
    const bucket = bucketOf(member.id);
    const group = groups.get(bucket);
    if (group) group.push(member);
    else groups.set(bucket, [member]);
  }
  return groups;
}

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
