import type {
  AdmissionBudget,
  AdmissionRequest,
  AdmissionResult,
  AdmissionStore,
  BudgetReading,
} from "../../domain/rate-limit/ports.js";
import { budgetKeyPrefix } from "../memory/budget-counters.js";
import type { CircuitBreaker } from "./circuit-breaker.js";
import { withinTimeout } from "./command-timeout.js";
import { bucketOf, credentialKey, watermarkKey } from "./credential-keys.js";
import { LuaScript } from "./lua-script.js";
import type { RedisConnection } from "./redis-client.js";
import { redisSpan } from "./redis-spans.js";

/**
 * A token request's whole Redis work in one script: the credential check first (nothing is spent
 * when the cache cannot vouch for the caller's record), then the address budget, the failure
 * budget, and the client budget or a failure point. Counters use rate-limiter-flexible's keys
 * and layout (an integer with a TTL, the window opened by the first point), so the step-by-step
 * path, the operator's lockout view and this script count the same points.
 *
 * Its keys lie in several hash slots, so it serves one server (standalone or Sentinel's primary);
 * on a Redis Cluster a token request takes the step-by-step path (each step one key or one
 * bucket's keys), which counts the same points in the same keys.
 *
 * KEYS: the client's bucket watermark, credential, address, failures, client, locked guesses.
 * ARGV: known change, expected generation, authenticated (1/0), then points and seconds of the
 * address, failure, client and locked-guess budgets. With the failure budget spent, a wrong
 * secret spends a locked-guess point and a right one goes on to the client budget, while the
 * locked-guess budget lasts.
 * Returns {status, address count, address ms, other count, other ms}; the "other" budget is the
 * one the status names (client, or failures).
 */
export const ADMIT_SCRIPT = new LuaScript(`
local function window(key, seconds)
  redis.call('SET', key, 0, 'EX', seconds, 'NX')
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then redis.call('EXPIRE', key, seconds); ttl = seconds * 1000 end
  return tonumber(redis.call('GET', key)), ttl
end
local watermark = tonumber(redis.call('GET', KEYS[1]) or '0')
if watermark < tonumber(ARGV[1]) then return {0, 0, 0, 0, 0} end
local state = redis.call('GET', KEYS[2])
if not state or string.match(state, '^g:(%d+):') ~= ARGV[2] then return {0, 0, 0, 0, 0} end
local address, addressTtl = window(KEYS[3], ARGV[5])
if address >= tonumber(ARGV[4]) then return {3, address, addressTtl, 0, 0} end
address = redis.call('INCR', KEYS[3])
local failures = tonumber(redis.call('GET', KEYS[4]) or '0')
if failures >= tonumber(ARGV[6]) then
  local locked = {4, address, addressTtl, failures, redis.call('PTTL', KEYS[4])}
  local guesses = window(KEYS[6], ARGV[11])
  if guesses >= tonumber(ARGV[10]) then return locked end
  if ARGV[3] ~= '1' then redis.call('INCR', KEYS[6]); return locked end
end
if ARGV[3] ~= '1' then
  local _, failureTtl = window(KEYS[4], ARGV[7])
  return {2, address, addressTtl, redis.call('INCR', KEYS[4]), failureTtl}
end
local client, clientTtl = window(KEYS[5], ARGV[9])
if client >= tonumber(ARGV[8]) then return {5, address, addressTtl, client, clientTtl} end
return {1, address, addressTtl, redis.call('INCR', KEYS[5]), clientTtl}`);

const STATUSES = ["stale", "admitted", "refused", "address-limited", "locked-out", "client-limited"] as const;

/** The one-round-trip admission on Redis; undefined (take the step-by-step path) while the breaker is open or Redis fails or stalls. */
export class RedisTokenAdmission implements AdmissionStore {
  constructor(
    private readonly redis: RedisConnection,
    private readonly keyPrefix: string,
    private readonly breaker: CircuitBreaker,
    private readonly commandTimeoutMs: number,
  ) {}

  async admit(request: AdmissionRequest): Promise<AdmissionResult | undefined> {
    let reply: number[];
    try {
      reply = (await redisSpan(
        "EVALSHA",
        this.breaker.run(() => {
          const { keys, arguments: args } = admissionCall(this.keyPrefix, request);
          return withinTimeout(ADMIT_SCRIPT.run(this.redis, keys, args), this.commandTimeoutMs);
        }),
        "token-admission",
      )) as number[];
    } catch {
      // An open breaker refuses at once (run() checks it: asking isOpen first would take the
      // half-open trial and never report it). A failure is counted by the breaker; the
      // step-by-step path meets it too and falls back (and reports it).
      return undefined;
    }
    return admissionResult(reply);
  }
}

/** ADMIT_SCRIPT's KEYS and ARGV for one request (the bench's same-guarantees route sends them too). */
export function admissionCall(keyPrefix: string, request: AdmissionRequest): { keys: string[]; arguments: string[] } {
  const { address, failures, client, lockedGuesses } = request.budgets;
  // rate-limiter-flexible's key for a budget's counter (RateLimiterAbstract.getKey).
  const budgetKey = (b: AdmissionBudget) => `${budgetKeyPrefix(keyPrefix, b.name)}:${b.key}`;
  return {
    keys: [
      watermarkKey(keyPrefix, bucketOf(request.clientId)),
      credentialKey(keyPrefix, request.clientId),
      budgetKey(address),
      budgetKey(failures),
      budgetKey(client),
      budgetKey(lockedGuesses),
    ],
    arguments: [
      String(request.knownChange),
      String(request.generation),
      request.authenticated ? "1" : "0",
      ...[address, failures, client, lockedGuesses].flatMap((b) => [
        String(b.budget.points),
        String(b.budget.durationSeconds),
      ]),
    ],
  };
}

/** ADMIT_SCRIPT's reply as an AdmissionResult. */
export function admissionResult(reply: readonly unknown[]): AdmissionResult {
  const [status, addressCount, addressMs, otherCount, otherMs] = reply.map(Number) as [
    number,
    number,
    number,
    number,
    number,
  ];
  const kind = STATUSES[status] ?? "stale";
  const reading = (count: number, ms: number): BudgetReading => ({ consumed: count, msBeforeReset: Math.max(0, ms) });
  return {
    kind,
    address: reading(addressCount, addressMs),
    other: kind === "stale" || kind === "address-limited" ? undefined : reading(otherCount, otherMs),
  };
}
