import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { createClient, type RedisClientType } from "redis";
import { REPLAY_WINDOW_MS, ReplayCacheUnavailable } from "../../src/domain/replay/ports.js";
import { PostgresReplayCache, PostgresReplayCacheBirths } from "../../src/store/postgres/replay-cache.js";
import { CircuitBreaker } from "../../src/store/redis/circuit-breaker.js";
import { RedisReplayCache } from "../../src/store/redis/replay-cache.js";
import { backend, isPostgres } from "../helpers/backend.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";
import { migratedStorageForSuite } from "../helpers/storage-database.js";

/**
 * The replay cache (src/domain/replay/ports.ts): an id is accepted once until it expires, on the
 * database (both drivers) and on Redis, and a Redis flushed or restarted empty accepts no id it
 * could have seen before — while a Redis never used before accepts at once.
 */
const storage = migratedStorageForSuite();
const inMinutes = (minutes: number) => new Date(Date.now() + minutes * 60_000);
const newId = () => crypto.randomUUID();

describe(`the replay cache in the database (${backend})`, () => {
  test("an id is accepted once; another namespace or another id is not affected", async () => {
    const cache = new PostgresReplayCache(storage().uow.direct);
    const id = newId();
    assert.equal(await cache.useOnce("assertion", id, inMinutes(1)), true);
    assert.equal(await cache.useOnce("assertion", id, inMinutes(1)), false, "the same id again");
    assert.equal(await cache.useOnce("assertion", id, inMinutes(2)), false, "a later expiry does not reopen it");
    assert.equal(await cache.useOnce("dpop", id, inMinutes(1)), true, "namespaces are apart");
    assert.equal(await cache.useOnce("assertion", newId(), inMinutes(1)), true);
  });

  test("an expired id may be recorded again (its token is refused by its own expiry anyway)", async () => {
    const cache = new PostgresReplayCache(storage().uow.direct);
    const id = newId();
    assert.equal(await cache.useOnce("assertion", id, new Date(Date.now() - 1_000)), true);
    assert.equal(await cache.useOnce("assertion", id, inMinutes(1)), true);
    assert.equal(await cache.useOnce("assertion", id, inMinutes(1)), false);
  });

  test("a second instance's cache over the same database refuses an id the first accepted", async () => {
    const id = newId();
    assert.equal(await new PostgresReplayCache(storage().uow.direct).useOnce("assertion", id, inMinutes(1)), true);
    assert.equal(await new PostgresReplayCache(storage().uow.direct).useOnce("assertion", id, inMinutes(1)), false);
  });

  test("ids presented together (one statement records them) are each accepted once, and refused after", async () => {
    const cache = new PostgresReplayCache(storage().uow.direct);
    const ids = Array.from({ length: 40 }, newId);
    const reused = newId();
    assert.equal(await cache.useOnce("dpop", reused, inMinutes(1)), true);
    const together = await Promise.all([
      ...ids.map((id) => cache.useOnce("dpop", id, inMinutes(1))),
      cache.useOnce("dpop", reused, inMinutes(1)),
      cache.useOnce("assertion", ids[0]!, inMinutes(1)),
      cache.useOnce("dpop", ids[1]!, inMinutes(1)),
    ]);
    assert.deepEqual(together.slice(0, 40), Array<boolean>(40).fill(true), "each new id accepted");
    assert.equal(together[40], false, "an id used before, among new ones");
    assert.equal(together[41], true, "the same id in another namespace");
    assert.equal(together[42], false, "an id presented twice at once: the second refused");
    const again = await Promise.all(ids.map((id) => cache.useOnce("dpop", id, inMinutes(1))));
    assert.deepEqual(again, Array<boolean>(40).fill(false), "each refused the second time");
  });

  test("many presentations of one id at once: exactly one is accepted", async () => {
    const cache = new PostgresReplayCache(storage().uow.direct);
    const id = newId();
    const answers = await Promise.all(Array.from({ length: 8 }, () => cache.useOnce("assertion", id, inMinutes(1))));
    assert.equal(answers.filter(Boolean).length, 1);
  });
});

describe("the replay cache in Redis", { skip: !isPostgres && "Redis runs with the postgres backend" }, () => {
  let redis: PrivateRedis;
  let client: RedisClientType;
  const emptied: string[] = [];
  before(async () => {
    redis = await startPrivateRedis();
    client = createClient({ url: redis.url, disableOfflineQueue: true });
    client.on("error", () => {});
    await client.connect();
  });
  after(async () => {
    await client?.close();
    await redis?.stop();
  });

  const cacheOn = (prefix: string, breaker = new CircuitBreaker({ failureThreshold: 3, openMs: 60_000 })) =>
    new RedisReplayCache(client, prefix, breaker, 500, new PostgresReplayCacheBirths(storage().uow.direct), (ns) =>
      emptied.push(ns),
    );

  test("an id is accepted once across instances; namespaces are apart; the key expires with the id", async () => {
    const prefix = `p${newId()}:`;
    const [one, two] = [cacheOn(prefix), cacheOn(prefix)];
    const id = newId();
    assert.equal(await one.useOnce("assertion", id, inMinutes(1)), true, "a Redis never used: accepted at once");
    assert.equal(await two.useOnce("assertion", id, inMinutes(1)), false, "the other instance refuses it");
    assert.equal(await one.useOnce("dpop", id, inMinutes(1)), true);
    const ttl = Number(await redis.command(["PTTL", `${prefix}{replay:assertion}:${id}`]));
    assert.ok(ttl > 50_000 && ttl <= 60_000, `expires with the id: ${ttl} ms`);
    assert.deepEqual(emptied, []);
  });

  test("flushed mid-run: no id it could have seen is accepted again, ids issued after the flush are", async () => {
    const prefix = `p${newId()}:`;
    const [one, two] = [cacheOn(prefix), cacheOn(prefix)];
    const used = newId();
    assert.equal(await one.useOnce("assertion", used, inMinutes(1)), true);
    await redis.command(["FLUSHALL"]);
    assert.equal(await two.useOnce("assertion", used, inMinutes(1)), false, "a replay after the flush");
    assert.equal(await one.useOnce("assertion", newId(), inMinutes(4)), false, "could have been issued before it");
    const later = new Date(Date.now() + REPLAY_WINDOW_MS + 30_000);
    assert.equal(await one.useOnce("assertion", newId(), later), true, "expires past the window: issued after it");
    assert.deepEqual(emptied, ["assertion"], "the flush is told once");
  });

  test("restarted without its data: the same as a flush", async () => {
    const prefix = `p${newId()}:`;
    // The service's breaker reopens for a trial after REDIS_BREAKER_OPEN_MS (2 s by default): the
    // failures while the client reconnects may open it, and the cache answers again after that.
    const cache = cacheOn(prefix, new CircuitBreaker({ failureThreshold: 3, openMs: 200 }));
    const used = newId();
    assert.equal(await cache.useOnce("assertion", used, inMinutes(1)), true);
    await redis.crashAndRestart(); // no snapshot was taken: it comes back empty
    let answer: boolean | undefined;
    const deadline = Date.now() + 30_000;
    while (answer === undefined && Date.now() < deadline) {
      answer = await cache.useOnce("assertion", used, inMinutes(1)).catch(async (error: unknown) => {
        assert.ok(error instanceof ReplayCacheUnavailable, String(error));
        await new Promise((resolve) => setTimeout(resolve, 100));
        return undefined;
      });
    }
    assert.equal(answer, false);
  });

  test("Redis out of reach: the cache answers ReplayCacheUnavailable (the caller fails closed)", async () => {
    const cache = cacheOn(`p${newId()}:`);
    redis.pause();
    try {
      await assert.rejects(cache.useOnce("assertion", newId(), inMinutes(1)), ReplayCacheUnavailable);
    } finally {
      redis.resume();
    }
  });
});
