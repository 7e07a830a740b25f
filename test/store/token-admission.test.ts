import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createClient } from "redis";
import type { RateLimits } from "../../src/domain/rate-limit/model.js";
import { TokenRateLimiter } from "../../src/domain/rate-limit/token-rate-limiter.js";
import { redisBudgetCounters } from "../../src/store/redis/budget-counters.js";
import { CircuitBreaker } from "../../src/store/redis/circuit-breaker.js";
import { credentialKey } from "../../src/store/redis/credential-keys.js";
import { RedisGenerationCache } from "../../src/store/redis/generation-cache.js";
import { RedisTokenAdmission } from "../../src/store/redis/token-admission.js";
import { useSharedRedis } from "../helpers/shared-redis.js";

/**
 * The one-round-trip admission (src/store/redis/token-admission.ts) against a real Redis: the
 * same rules as the step-by-step budgets, on the same counters, and nothing spent unless the
 * credential cache vouches for the held record.
 */
const LIMITS: RateLimits = {
  perClient: { points: 3, durationSeconds: 60 },
  perAddress: { points: 6, durationSeconds: 60 },
  failures: { points: 2, durationSeconds: 900 },
};

const shared = useSharedRedis("admit");
const unique = shared.uniquePrefix;
let counter = 0;
const newAddress = () => `203.0.113.${++counter}`;

/** A limiter with the admission store and the step-by-step counters on one key prefix, and a cache holding `clientId` at generation 1, change 5. */
async function setUp(limits = LIMITS, breaker = new CircuitBreaker({ failureThreshold: 3, openMs: 60_000 })) {
  const redis = shared.redis();
  const prefix = unique();
  const cache = new RedisGenerationCache(redis, prefix, 60, breaker, 1_000);
  const clientId = `client-${counter}`;
  await cache.write(new Map([[clientId, { generation: 1, changeSeq: 5 }]]), { to: 5, ifAtLeast: 0 });
  const limiter = new TokenRateLimiter(
    limits,
    redisBudgetCounters(redis, prefix, () => {}, breaker, 1_000),
    new RedisTokenAdmission(redis, prefix, breaker, 1_000),
  );
  const admit = (address: string, authenticated: boolean, held = { generation: 1, knownChange: 5 }) =>
    limiter.admitHeldClient(clientId, address, { ...held, authenticated });
  return { prefix, cache, clientId, limiter, admit, breaker };
}

describe("one-round-trip token admission (Redis)", () => {
  test("an authenticated request spends one address point and one client point; the decision is the tighter of the two", async () => {
    const { admit } = await setUp();
    const address = newAddress();
    const first = await admit(address, true);
    assert.ok(first.kind === "admitted", first.kind);
    assert.equal(first.decision.allowed, true);
    assert.equal(first.decision.remaining, 2, "client: 3 - 1 (tighter than the address's 6 - 1)");
    assert.equal(first.decision.limit, 3);
    assert.ok(first.decision.resetSeconds > 0 && first.decision.resetSeconds <= 60);
    const kinds = [];
    for (let i = 0; i < 3; i++) kinds.push((await admit(address, true)).kind);
    assert.deepEqual(
      kinds,
      ["admitted", "admitted", "client-limited"],
      "the fourth in the window is refused by the client budget",
    );
    const refused = await admit(address, true);
    assert.ok(refused.kind === "client-limited");
    assert.equal(refused.decision.exhausted, "client");
    assert.ok(refused.decision.retryAfterSeconds! >= 1);
  });

  test("its counters are the step-by-step path's: points spent one way count the other way, and the operator sees the lockout", async () => {
    const { admit, limiter, clientId } = await setUp();
    const address = newAddress();
    await limiter.consumeAddress(address);
    await limiter.consumeClient(clientId);
    await limiter.consumeClient(clientId);
    const third = await admit(address, true);
    assert.ok(third.kind === "admitted");
    assert.equal(third.decision.remaining, 0, "two client points spent step by step, the third here");
    assert.equal(
      (await limiter.consumeClient(clientId)).allowed,
      false,
      "and the step-by-step path sees the budget spent",
    );

    const other = newAddress();
    assert.equal((await admit(other, false)).kind, "refused");
    assert.deepEqual(await limiter.lockout(clientId, other), {
      failures: 1,
      limit: 2,
      lockedOut: false,
      resetSeconds: 900,
    });
    await limiter.resetLockout(clientId, other);
    assert.equal(
      (await limiter.lockout(clientId, other)).failures,
      0,
      "the operator's reset clears what the script counted",
    );
  });

  test("wrong secrets spend failure points of (client, address) only; once spent, wrong secrets are refused there, the right one is not", async () => {
    const { admit } = await setUp({ ...LIMITS, perClient: { points: 100, durationSeconds: 60 } });
    const attacker = newAddress();
    assert.equal((await admit(attacker, false)).kind, "refused");
    assert.equal((await admit(attacker, false)).kind, "refused");
    const locked = await admit(attacker, false);
    assert.ok(locked.kind === "limited");
    assert.equal(locked.decision.exhausted, "client-at-address-failures");
    assert.ok(locked.decision.retryAfterSeconds! > 800, "until the failure window ends");
    assert.equal((await admit(attacker, true)).kind, "admitted", "the right secret passes at the locked-out address");
    assert.equal((await admit(attacker, false)).kind, "limited", "a wrong one there spends a locked-guess point");
    assert.equal((await admit(newAddress(), true)).kind, "admitted", "the client still works from elsewhere");
  });

  test("concurrent wrong guesses never overshoot the failure budget", async () => {
    const { admit, limiter, clientId } = await setUp({ ...LIMITS, perAddress: { points: 100, durationSeconds: 60 } });
    const address = newAddress();
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => admit(address, false)));
    assert.equal(outcomes.filter((o) => o.kind === "refused").length, 2);
    assert.equal(outcomes.filter((o) => o.kind === "limited").length, 18);
    assert.equal((await limiter.lockout(clientId, address)).failures, 2);
  });

  test("the address budget refuses first, and a refusal takes nothing", async () => {
    const { admit, limiter, clientId } = await setUp({ ...LIMITS, perAddress: { points: 2, durationSeconds: 60 } });
    const address = newAddress();
    assert.equal((await admit(address, true)).kind, "admitted");
    assert.equal((await admit(address, false)).kind, "refused");
    const refused = await admit(address, true);
    assert.ok(refused.kind === "limited");
    assert.equal(refused.decision.exhausted, "address");
    assert.equal(
      (await admit(address, false)).kind,
      "limited",
      "a wrong secret from a spent address costs no failure point",
    );
    assert.equal(
      (await limiter.lockout(clientId, address)).failures,
      1,
      "only the wrong secret sent while the address had points left",
    );
  });

  test("nothing is spent unless the cache vouches for the held record: other generation, revoked, missing, or a watermark behind a known change", async () => {
    const { admit, cache, clientId, prefix } = await setUp({
      ...LIMITS,
      perAddress: { points: 1, durationSeconds: 60 },
    });
    const address = newAddress();
    assert.equal(
      (await admit(address, true, { generation: 2, knownChange: 5 })).kind,
      "unknown",
      "the held record is of another generation",
    );
    assert.equal(
      (await admit(address, true, { generation: 1, knownChange: 6 })).kind,
      "unknown",
      "the cache missed change 6",
    );
    await cache.write(new Map([[clientId, { generation: undefined, changeSeq: 6 }]]), { to: 6, ifAtLeast: 5 });
    assert.equal((await admit(address, true, { generation: 1, knownChange: 6 })).kind, "unknown", "revoked");
    await shared.redis().del(credentialKey(prefix, clientId));
    assert.equal((await admit(address, false, { generation: 1, knownChange: 6 })).kind, "unknown", "not cached");
    assert.equal((await shared.redis().keys(`${prefix}ratelimit:*`)).length, 0, "no budget was touched");
  });

  test("with Redis unreachable or the breaker open, the admission steps aside (unknown) at once", async () => {
    const breaker = new CircuitBreaker({ failureThreshold: 1, openMs: 60_000 });
    const { admit } = await setUp(LIMITS, breaker);
    breaker.failure();
    assert.equal((await admit(newAddress(), true)).kind, "unknown");

    // Once the open period is over, the admission is the half-open trial and closes the breaker.
    const recovering = new CircuitBreaker({ failureThreshold: 1, openMs: 50 });
    const again = await setUp(LIMITS, recovering);
    recovering.failure();
    assert.equal((await again.admit(newAddress(), true)).kind, "unknown");
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.equal((await again.admit(newAddress(), true)).kind, "admitted");
    assert.equal(recovering.tripped, false);

    const dead = createClient({
      url: "redis://127.0.0.1:1",
      disableOfflineQueue: true,
      socket: { reconnectStrategy: () => 200 },
    });
    dead.on("error", () => {});
    dead.connect().catch(() => {});
    try {
      const limiter = new TokenRateLimiter(
        LIMITS,
        redisBudgetCounters(dead, unique(), () => {}, new CircuitBreaker({ failureThreshold: 3, openMs: 60_000 }), 200),
        new RedisTokenAdmission(dead, unique(), new CircuitBreaker({ failureThreshold: 3, openMs: 60_000 }), 200),
      );
      assert.equal(
        (await limiter.admitHeldClient("x", newAddress(), { generation: 1, knownChange: 0, authenticated: true })).kind,
        "unknown",
      );
    } finally {
      dead.destroy();
    }
  });
});
