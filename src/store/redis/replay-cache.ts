import {
  REPLAY_WINDOW_MS,
  ReplayCacheUnavailable,
  type ReplayCache,
  type ReplayCacheBirths,
} from "../../domain/replay/ports.js";
import type { CircuitBreaker } from "./circuit-breaker.js";
import { withinTimeout } from "./command-timeout.js";
import { LuaScript } from "./lua-script.js";
import type { RedisConnection } from "./redis-client.js";
import { redisSpan } from "./redis-spans.js";

/**
 * KEYS: the namespace's marker, the id's key; ARGV: the id's expiry (ms since the epoch), the
 * longest lifetime of an id (ms). The marker holds the instant this Redis was found without it
 * ("0": never, it was new): an id that expires within the longest lifetime of that instant could
 * have been used before and forgotten, and is refused. -1: no marker, the caller decides.
 */
const USE_ONCE = new LuaScript(`
local emptiedAt = redis.call('GET', KEYS[1])
if not emptiedAt then return -1 end
if tonumber(ARGV[1]) <= tonumber(emptiedAt) + tonumber(ARGV[2]) then return 0 end
if redis.call('SET', KEYS[2], '1', 'PXAT', ARGV[1], 'NX') then return 1 end
return 0`);

/**
 * The replay cache in Redis: one SET NX per id, expiring with it. A flush or a restart without
 * persistence would forget every id and reopen them to replay, so each namespace keeps a marker
 * with no expiry beside its ids (one hash slot: the marker and the id in one script): when it is
 * gone, the births record in Postgres tells a new Redis (nothing was forgotten) from an emptied one,
 * whose ids that could have been seen before — expiring within REPLAY_WINDOW_MS of the moment it
 * was found emptied — are refused. A Redis out of reach answers ReplayCacheUnavailable: the
 * database cannot stand in, as it never saw the ids the other instances sent to Redis.
 */
export class RedisReplayCache implements ReplayCache {
  constructor(
    private readonly redis: RedisConnection,
    private readonly keyPrefix: string,
    private readonly breaker: CircuitBreaker,
    private readonly commandTimeoutMs: number,
    private readonly births: ReplayCacheBirths,
    private readonly onEmptied: (namespace: string) => void,
    private readonly now: () => number = Date.now,
  ) {}

  async useOnce(namespace: string, id: string, expiresAt: Date): Promise<boolean> {
    const answer = await this.run(namespace, id, expiresAt);
    if (answer !== -1) return answer === 1;
    await this.mark(namespace);
    return (await this.run(namespace, id, expiresAt)) === 1;
  }

  /** A marker for a namespace that has none: "0" on its first start, the instant it was found emptied after that. */
  private async mark(namespace: string): Promise<void> {
    let first: boolean;
    try {
      first = await this.births.firstStart(this.markerKey(namespace));
    } catch (error) {
      throw new ReplayCacheUnavailable(error);
    }
    if (!first) this.onEmptied(namespace);
    const value = first ? "0" : String(this.now());
    await this.call("SET", () => this.redis.set(this.markerKey(namespace), value, { condition: "NX" }));
  }

  private async run(namespace: string, id: string, expiresAt: Date): Promise<number> {
    const keys = [this.markerKey(namespace), `${this.slot(namespace)}:${id}`];
    const args = [String(expiresAt.getTime()), String(REPLAY_WINDOW_MS)];
    return Number(await this.call("EVALSHA", () => USE_ONCE.run(this.redis, keys, args)));
  }

  private async call<T>(command: string, work: () => Promise<T>): Promise<T> {
    try {
      return await redisSpan(
        command,
        this.breaker.run(() => withinTimeout(work(), this.commandTimeoutMs)),
      );
    } catch (error) {
      throw new ReplayCacheUnavailable(error);
    }
  }

  /** The namespace's hash slot (a cluster keeps its marker and its ids on one node). */
  private slot(namespace: string): string {
    return `${this.keyPrefix}{replay:${namespace}}`;
  }

  private markerKey(namespace: string): string {
    return `${this.slot(namespace)}:marker`;
  }
}
