import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient, type RedisClientType } from "redis";
import { ConfigError } from "../../src/config/config.js";
import { DEFAULT_RATE_LIMITS, rateLimitsFromEnv } from "../../src/config/rate-limits.js";
import type { RateLimitDecision, RateLimits } from "../../src/domain/rate-limit/model.js";
import { tighterOf } from "../../src/domain/rate-limit/model.js";
import { TokenRateLimiter } from "../../src/domain/rate-limit/token-rate-limiter.js";
import { rateLimitHeaders, rateLimitPolicy } from "../../src/rpc/rate-limit-headers.js";
import { memoryBudgetCounters } from "../../src/store/memory/budget-counters.js";
import { redisBudgetCounters } from "../../src/store/redis/budget-counters.js";
import { CircuitBreaker } from "../../src/store/redis/circuit-breaker.js";
import { useSharedRedis } from "../helpers/shared-redis.js";

const LIMITS: RateLimits = {
  perClient: { points: 3, durationSeconds: 60 },
  perAddress: { points: 5, durationSeconds: 60 },
  failures: { points: 2, durationSeconds: 900 },
};

const shared = useSharedRedis("rl");
const { uniquePrefix } = shared;

/** Addresses unique to each test, so tests sharing a limiter never share a budget by accident. */
let addressCounter = 0;
const newAddress = () => `198.51.100.${++addressCounter}`;

async function consumeTimes(limiter: TokenRateLimiter, n: number, clientId: string | undefined, address: string) {
  const decisions: RateLimitDecision[] = [];
  for (let i = 0; i < n; i++) decisions.push(await both(limiter, clientId, address));
  return decisions;
}

/** A token request's two request budgets as the endpoint spends them: the address's, then (once authenticated) the client's. */
async function both(
  limiter: TokenRateLimiter,
  clientId: string | undefined,
  address: string,
): Promise<RateLimitDecision> {
  const byAddress = await limiter.consumeAddress(address);
  if (!byAddress.allowed || clientId === undefined) return byAddress;
  return tighterOf(byAddress, await limiter.consumeClient(clientId));
}

const kinds = [
  { kind: "memory", redis: () => undefined },
  { kind: "redis", redis: () => shared.redis() },
] as const;

for (const { kind, redis: redisOf } of kinds) {
  describe(`token rate limiter (${kind})`, () => {
    const fallbacks: unknown[] = [];
    const newLimiter = (limits: RateLimits = LIMITS, keyPrefix = uniquePrefix()) => {
      const redis = redisOf();
      return new TokenRateLimiter(
        limits,
        redis
          ? redisBudgetCounters(
              redis,
              keyPrefix,
              (error) => fallbacks.push(error),
              new CircuitBreaker({ failureThreshold: 3, openMs: 1_000 }),
              1_000,
            )
          : memoryBudgetCounters(keyPrefix),
      );
    };

    after(() => {
      // A healthy Redis never hands a call to the in-memory insurance limiter.
      assert.deepEqual(fallbacks, []);
    });

    test("the per-client budget refuses the N+1-th call of one client and no other client", async () => {
      const limiter = newLimiter();
      const address = newAddress();
      const decisions = await consumeTimes(limiter, LIMITS.perClient.points, "client-a", address);
      assert.deepEqual(
        decisions.map((d) => d.allowed),
        [true, true, true],
      );
      assert.deepEqual(
        decisions.map((d) => d.remaining),
        [2, 1, 0],
      );
      assert.ok(decisions.every((d) => d.limit === 3 && rateLimitPolicy(d) === `"default";q=3;w=60`));

      const refused = await both(limiter, "client-a", address);
      assert.equal(refused.allowed, false);
      assert.equal(refused.exhausted, "client");
      assert.equal(refused.remaining, 0);
      assert.ok(
        refused.retryAfterSeconds !== undefined && refused.retryAfterSeconds >= 1 && refused.retryAfterSeconds <= 60,
      );
      assert.equal(refused.resetSeconds, refused.retryAfterSeconds);

      // Another client from the same address still has its own budget (and the address has room).
      const other = await both(limiter, "client-b", address);
      assert.equal(other.allowed, true);
      assert.equal(other.exhausted, undefined);
      assert.equal(other.retryAfterSeconds, undefined);
    });

    test("the per-address budget refuses the N+1-th call from one address across clients", async () => {
      const limiter = newLimiter();
      const address = newAddress();
      for (let i = 0; i < LIMITS.perAddress.points; i++) {
        const decision = await both(limiter, `client-${i}`, address);
        assert.equal(decision.allowed, true, `call ${i + 1}`);
      }
      const refused = await both(limiter, "client-fresh", address);
      assert.equal(refused.allowed, false);
      assert.equal(refused.exhausted, "address");
      assert.equal(refused.limit, LIMITS.perAddress.points);
      assert.equal(rateLimitPolicy(refused), `"default";q=5;w=60`);
      assert.ok(refused.retryAfterSeconds !== undefined && refused.retryAfterSeconds >= 1);
      // Requests without a client id count against the address too.
      assert.equal((await both(limiter, undefined, address)).exhausted, "address");
      // The same client from another address is fine.
      assert.equal((await both(limiter, "client-fresh", newAddress())).allowed, true);
    });

    test("the tightest budget is reported while allowed", async () => {
      const limiter = newLimiter();
      const address = newAddress();
      const first = await both(limiter, "tight", address);
      // client: 2 of 3 left; address: 4 of 5 left.
      assert.deepEqual(
        { limit: first.limit, remaining: first.remaining, policy: rateLimitPolicy(first) },
        { limit: 3, remaining: 2, policy: `"default";q=3;w=60` },
      );
      assert.ok(first.resetSeconds >= 59 && first.resetSeconds <= 60, `resetSeconds ${first.resetSeconds}`);
      // Without a client id only the address budget applies.
      const anonymous = await both(limiter, undefined, address);
      assert.deepEqual({ limit: anonymous.limit, remaining: anonymous.remaining }, { limit: 5, remaining: 3 });
    });

    test("failures of a client count at its address only, and each attempt reserves its point first", async () => {
      const limiter = newLimiter();
      const attacker = newAddress();
      // Two failed attempts (budget 2): each reservation is kept.
      for (let i = 0; i < 2; i++)
        assert.equal((await limiter.reserveAttempt("victim", true, attacker)).decision.allowed, true);
      const refused = await limiter.reserveAttempt("victim", true, attacker);
      assert.equal(refused.decision.allowed, false);
      assert.equal(refused.decision.exhausted, "client-at-address-failures");
      assert.equal(refused.decision.limit, LIMITS.failures.points);
      assert.equal(rateLimitPolicy(refused.decision), `"default";q=2;w=900`);
      assert.ok(
        refused.decision.retryAfterSeconds !== undefined &&
          refused.decision.retryAfterSeconds > 60 &&
          refused.decision.retryAfterSeconds <= 900,
      );
      // The same client from anywhere else, and other clients from the attacker's address, are unaffected.
      assert.equal((await limiter.reserveAttempt("victim", true, newAddress())).decision.allowed, true);
      assert.equal((await limiter.reserveAttempt("bystander", true, attacker)).decision.allowed, true);
      assert.equal(
        (await both(limiter, "victim", attacker)).allowed,
        true,
        "request budgets are separate from lockouts",
      );
      // A refused attempt takes nothing: the count is the failures.
      assert.deepEqual(await limiter.lockout("victim", attacker), {
        failures: 2,
        limit: 2,
        lockedOut: true,
        resetSeconds: refused.decision.retryAfterSeconds,
      });
    });

    test("a released reservation gives its point back: successes never lock a client out", async () => {
      const limiter = newLimiter();
      const address = newAddress();
      for (let i = 0; i < 10; i++) {
        const reservation = await limiter.reserveAttempt("honest", true, address);
        assert.equal(reservation.decision.allowed, true, `attempt ${i + 1}`);
        await reservation.release();
      }
      assert.equal((await limiter.lockout("honest", address)).failures, 0);
    });

    test("unknown client ids count against their address only, never against real clients there", async () => {
      const limiter = newLimiter();
      const address = newAddress();
      await limiter.reserveAttempt("guess-1", false, address);
      await limiter.reserveAttempt("guess-2", false, address);
      const refused = await limiter.reserveAttempt("guess-3", false, address);
      assert.equal(refused.decision.exhausted, "unknown-client-failures");
      assert.equal((await limiter.reserveAttempt("real-client", true, address)).decision.allowed, true);
      assert.equal((await limiter.lockout(undefined, address)).lockedOut, true);
      await limiter.resetLockout(undefined, address);
      assert.equal(
        (await limiter.reserveAttempt("guess-4", false, address)).decision.allowed,
        true,
        "the operator lifted it",
      );
    });

    test("concurrent reservations never overshoot the budget", async () => {
      const limiter = newLimiter();
      const address = newAddress();
      const reservations = await Promise.all(
        Array.from({ length: 20 }, () => limiter.reserveAttempt("victim", true, address)),
      );
      assert.equal(reservations.filter((r) => r.decision.allowed).length, LIMITS.failures.points);
    });

    test("client ids are hashed into keys, so odd ids are just other clients", async () => {
      const limiter = newLimiter();
      const address = newAddress();
      const odd = "x:*\r\n{evil}\u0000" + "a".repeat(2000);
      assert.deepEqual(
        (await consumeTimes(limiter, 4, odd, address)).map((d) => d.allowed),
        [true, true, true, false],
      );
      assert.equal((await both(limiter, "x", address)).allowed, true);
    });

    test("two limiter instances on the same store prefix share budgets only with Redis", async () => {
      const keyPrefix = uniquePrefix();
      const one = newLimiter(LIMITS, keyPrefix);
      const two = newLimiter(LIMITS, keyPrefix);
      const address = newAddress();
      assert.equal((await both(one, "shared", address)).allowed, true);
      assert.equal((await both(two, "shared", address)).allowed, true);
      assert.equal((await both(one, "shared", address)).allowed, true);
      const fourth = await both(two, "shared", address);
      if (kind === "redis") {
        assert.equal(fourth.allowed, false);
        assert.equal(fourth.exhausted, "client");
        // Failures recorded on one instance lock the client out at that address on the other.
        await one.reserveAttempt("brute", true, address);
        await one.reserveAttempt("brute", true, address);
        assert.equal(
          (await two.reserveAttempt("brute", true, address)).decision.exhausted,
          "client-at-address-failures",
        );
      } else {
        // The embedded default is one instance: each limiter keeps its own counters.
        assert.equal(fourth.allowed, true);
      }
    });
  });
}

describe("reservations across a circuit breaker", () => {
  test("a reservation is given back to the store that took it, even after the breaker opened meanwhile", async () => {
    const breaker = new CircuitBreaker({ failureThreshold: 1, openMs: 60_000 });
    const limiter = new TokenRateLimiter(
      LIMITS,
      redisBudgetCounters(shared.redis(), uniquePrefix(), () => {}, breaker, 1_000),
    );
    const address = newAddress();
    const reservation = await limiter.reserveAttempt("flapping", true, address);
    assert.equal(reservation.decision.allowed, true);
    breaker.failure(); // Redis looked slow: the breaker opens before the attempt succeeds
    await reservation.release();
    breaker.success();
    assert.equal(
      (await limiter.lockout("flapping", address)).failures,
      0,
      "the point went back to Redis, not to the fallback",
    );
  });
});

describe("token rate limiter with Redis down", () => {
  let dead: RedisClientType;

  before(() => {
    // Nothing listens on port 1: the client never connects and, with the offline queue
    // disabled, every command fails at once.
    dead = createClient({
      url: "redis://127.0.0.1:1",
      disableOfflineQueue: true,
      socket: { connectTimeout: 500, reconnectStrategy: () => 200 },
    });
    dead.on("error", () => {});
    dead.connect().catch(() => {});
  });

  after(() => {
    dead.destroy();
  });

  test("each instance falls back to its own in-memory limit and reports it", async () => {
    const fallbacks: unknown[] = [];
    const limiter = new TokenRateLimiter(
      LIMITS,
      redisBudgetCounters(
        dead,
        uniquePrefix(),
        (error) => fallbacks.push(error),
        new CircuitBreaker({ failureThreshold: 3, openMs: 60_000 }),
        1_000,
      ),
    );
    const address = newAddress();
    const decisions = await consumeTimes(limiter, LIMITS.perClient.points + 1, "client-a", address);
    assert.deepEqual(
      decisions.map((d) => d.allowed),
      [true, true, true, false],
    );
    assert.equal(decisions[3]!.exhausted, "client");
    assert.ok(decisions[3]!.retryAfterSeconds! >= 1);
    assert.ok(fallbacks.length > 0, "onFallback was called");
    assert.ok(
      fallbacks.every((error) => error instanceof Error),
      "onFallback gets the store's error",
    );

    // Failure budgets fall back too.
    fallbacks.length = 0;
    await limiter.reserveAttempt("guess", true, address);
    await limiter.reserveAttempt("guess", true, address);
    assert.equal(
      (await limiter.reserveAttempt("guess", true, address)).decision.exhausted,
      "client-at-address-failures",
    );
    assert.ok(fallbacks.length >= 3);
  });
});

describe("rateLimitHeaders", () => {
  test("an allowed decision: RateLimit-Policy and RateLimit, no Retry-After", () => {
    const decision: RateLimitDecision = {
      allowed: true,
      limit: 60,
      remaining: 59,
      resetSeconds: 60,
      windowSeconds: 60,
      retryAfterSeconds: undefined,
      exhausted: undefined,
    };
    assert.deepEqual(rateLimitHeaders(decision), {
      "RateLimit-Policy": `"default";q=60;w=60`,
      RateLimit: `"default";r=59;t=60`,
    });
  });

  test("a refused decision adds Retry-After", () => {
    const decision: RateLimitDecision = {
      allowed: false,
      limit: 10,
      remaining: 0,
      resetSeconds: 843,
      windowSeconds: 900,
      retryAfterSeconds: 843,
      exhausted: "client-at-address-failures",
    };
    assert.deepEqual(rateLimitHeaders(decision), {
      "RateLimit-Policy": `"default";q=10;w=900`,
      RateLimit: `"default";r=0;t=843`,
      "Retry-After": "843",
    });
  });

  test("headers of live decisions", async () => {
    const limiter = new TokenRateLimiter(
      { ...LIMITS, perClient: { points: 1, durationSeconds: 30 } },
      memoryBudgetCounters(""),
    );
    const allowed = rateLimitHeaders(await both(limiter, "c", "192.0.2.1"));
    assert.equal(allowed["RateLimit-Policy"], `"default";q=1;w=30`);
    assert.match(allowed.RateLimit!, /^"default";r=0;t=(29|30)$/);
    assert.equal(allowed["Retry-After"], undefined);
    const refused = rateLimitHeaders(await both(limiter, "c", "192.0.2.1"));
    assert.deepEqual(Object.keys(refused).sort(), ["RateLimit", "RateLimit-Policy", "Retry-After"]);
    assert.match(refused["Retry-After"]!, /^(29|30)$/);
    assert.equal(refused.RateLimit, `"default";r=0;t=${refused["Retry-After"]}`);
  });
});

describe("rateLimitsFromEnv", () => {
  test("defaults", () => {
    assert.deepEqual(rateLimitsFromEnv({}), {
      perClient: { points: 60, durationSeconds: 60 },
      perAddress: { points: 300, durationSeconds: 60 },
      failures: { points: 10, durationSeconds: 900 },
    });
    assert.deepEqual(rateLimitsFromEnv({ TOKEN_RATE_LIMIT_PER_CLIENT: "" }), DEFAULT_RATE_LIMITS);
  });

  test("parses points/seconds", () => {
    assert.deepEqual(
      rateLimitsFromEnv({
        TOKEN_RATE_LIMIT_PER_CLIENT: "120/30",
        TOKEN_RATE_LIMIT_PER_ADDRESS: " 1000 / 60 ",
        TOKEN_FAILURE_LIMIT: "5/3600",
      }),
      {
        perClient: { points: 120, durationSeconds: 30 },
        perAddress: { points: 1000, durationSeconds: 60 },
        failures: { points: 5, durationSeconds: 3600 },
      },
    );
  });

  test("rejects malformed values, naming the variable", () => {
    for (const value of [
      "60",
      "60/",
      "/60",
      "abc",
      "60/60/60",
      "-1/60",
      "1.5/60",
      "0/60",
      "60/0",
      "60s/60",
      "99999999/60",
      "1/99999999",
    ]) {
      assert.throws(
        () => rateLimitsFromEnv({ TOKEN_FAILURE_LIMIT: value }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.message.includes("TOKEN_FAILURE_LIMIT") &&
          error.message.includes(`"${value}"`),
        value,
      );
    }
    assert.throws(
      () => rateLimitsFromEnv({ TOKEN_RATE_LIMIT_PER_CLIENT: "sixty" }),
      /TOKEN_RATE_LIMIT_PER_CLIENT must be "<points>\/<seconds>"/,
    );
    assert.throws(
      () => rateLimitsFromEnv({ TOKEN_RATE_LIMIT_PER_ADDRESS: "300 per 60" }),
      /TOKEN_RATE_LIMIT_PER_ADDRESS/,
    );
  });
});
