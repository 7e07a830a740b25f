import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { createDomainFixture, newApiUser, newTenant, type DomainFixture } from "../../fakes/domain-fixture.js";

describe("CredentialGenerations", () => {
  let f: DomainFixture;
  let a: string;
  let b: string;
  beforeEach(async () => {
    f = await createDomainFixture();
    const { tmcId } = await newTenant(f);
    a = (await newApiUser(f, tmcId)).clientId;
    b = (await newApiUser(f, tmcId)).clientId;
    f.store.calls.length = 0;
  });

  const databaseReads = () => f.store.calls.filter((c) => c === "apiUsers.activeGenerations").length;
  const bump = (clientId: string, generation: number) =>
    f.store.db.write(f.uow.direct, f.store.db.apiUsers, clientId, { ...f.store.db.apiUsers.rows.get(clientId)!, credentialGeneration: generation });

  test("a cache hit answers without touching the database; 'revoked' reads as no generation", async () => {
    f.cache.values.set(a, 3);
    f.cache.values.set(b, "revoked");
    assert.deepEqual([...(await f.generations.current([a, b]))], [[a, 3], [b, undefined]]);
    assert.equal(databaseReads(), 0);
    assert.deepEqual(f.cache.puts, []);
  });

  test("a miss reads the database for the missing ids only and fills the cache only if absent", async () => {
    f.cache.values.set(a, 1);
    const result = await f.generations.current([a, b, "unknown-client"]);
    assert.deepEqual([...result], [[a, 1], [b, 1], ["unknown-client", undefined]]);
    assert.equal(databaseReads(), 1);
    assert.deepEqual(
      f.cache.puts.map((p) => [[...p.values], p.onlyIfAbsent]),
      [
        [
          [
            [b, 1],
            ["unknown-client", "revoked"],
          ],
          true,
        ],
      ],
    );
  });

  test("a fill never overwrites a publication that raced it", async () => {
    bump(a, 1);
    // The read misses; a rotation publishes generation 2 before the fill arrives.
    f.cache.afterGet = () => void f.cache.values.set(a, 2);
    const result = await f.generations.current([a]);
    assert.equal(result.get(a), 1, "this read saw the database before the rotation");
    assert.equal(f.cache.values.get(a), 2, "the rotation's publication survives the fill");
  });

  test("a cache read failure falls back to the database, counted and logged", async () => {
    f.cache.getFailure = new Error("ECONNREFUSED 127.0.0.1:6379");
    bump(a, 4);
    assert.deepEqual([...(await f.generations.current([a, b]))], [[a, 4], [b, 1]]);
    assert.equal(databaseReads(), 1);
    assert.deepEqual(f.fallbacks.increments, [{ operation: "read" }]);
    assert.deepEqual(f.logger.messages("warn"), ["credential state: Redis unavailable, using Postgres"]);
    assert.deepEqual(f.logger.lines[0]?.object, { err: { message: "ECONNREFUSED 127.0.0.1:6379" }, operation: "read" });
  });

  test("a failed fill after a miss still answers, and is counted as a write fallback", async () => {
    f.cache.putFailure = new Error("READONLY");
    assert.equal((await f.generations.current([a])).get(a), 1);
    assert.deepEqual(f.fallbacks.increments, [{ operation: "write" }]);
  });

  test("an untrusted cache is not even asked: the database answers", async () => {
    f.cache.values.set(a, 1);
    bump(a, 2);
    f.cache.trusted = false;
    assert.equal((await f.generations.current([a])).get(a), 2);
    assert.deepEqual(f.cache.gets, []);
    assert.equal(databaseReads(), 1);
    assert.deepEqual(f.fallbacks.increments, []);
  });

  test("publishing inside a transaction overwrites the cached value", async () => {
    f.cache.values.set(a, 1);
    await f.uow.transaction((tx) => f.generations.publishWithin(tx, a, 2));
    await f.uow.transaction((tx) => f.generations.publishWithin(tx, b, undefined));
    assert.deepEqual([f.cache.values.get(a), f.cache.values.get(b)], [2, "revoked"]);
    assert.deepEqual(f.cache.puts.map((p) => p.onlyIfAbsent), [false, false]);
    assert.deepEqual(f.store.db.credentialOutbox.values(), []);
  });

  test("a publish failure writes an outbox entry in the same transaction (and a rollback takes it away)", async () => {
    f.cache.putFailure = new Error("ETIMEDOUT");
    f.clock.advanceSeconds(30);
    await f.uow.transaction((tx) => f.generations.publishWithin(tx, a, 2));
    assert.deepEqual(f.store.db.credentialOutbox.values(), [{ clientId: a, changedAt: new Date("2026-11-22T10:00:30.000Z") }]);
    assert.deepEqual(f.store.db.committed().at(-1)?.writes, ["credential_outbox"]);
    assert.deepEqual(f.fallbacks.increments, [{ operation: "write" }]);

    await assert.rejects(
      f.uow.transaction(async (tx) => {
        await f.generations.publishWithin(tx, b, undefined);
        throw new Error("the change itself failed");
      }),
      { message: "the change itself failed" },
    );
    assert.deepEqual(f.store.db.credentialOutbox.values().map((e) => e.clientId), [a], "b's entry went with its transaction");
  });

  test("a rotation while the cache is down commits with its outbox entry; reconcile publishes it and trusts the cache again", async () => {
    const { tmcId } = await newTenant(f);
    const admin = await newApiUser(f, tmcId);
    const target = await newApiUser(f, tmcId);
    const revoked = await newApiUser(f, tmcId);
    f.cache.values.set(target.clientId, 1);
    f.cache.values.set(revoked.clientId, 1);
    f.cache.putFailure = new Error("ECONNRESET");
    f.cache.reachable = false;
    f.cache.trusted = false;
    const caller = { clientId: admin.clientId, tmcId };
    await f.admin.rotate(caller, target.clientId, "r1");
    await f.admin.revoke(caller, revoked.clientId, "r2");
    assert.deepEqual(f.store.db.committed().at(-2)?.writes, ["api_users", "audit_events", "credential_outbox"]);
    assert.deepEqual(f.store.db.credentialOutbox.values().map((e) => e.clientId).sort(), [target.clientId, revoked.clientId].sort());
    assert.deepEqual([f.cache.values.get(target.clientId), f.cache.values.get(revoked.clientId)], [1, 1], "the cache still holds the stale values");
    // While untrusted, readers get the truth from the database.
    assert.deepEqual([...(await f.generations.current([target.clientId, revoked.clientId]))], [[target.clientId, 2], [revoked.clientId, undefined]]);

    assert.equal(await f.generations.reconcile(), 0, "unreachable: nothing to do yet");
    assert.equal(f.cache.markTrustedCalls, 0);

    f.cache.putFailure = undefined;
    f.cache.reachable = true;
    assert.equal(await f.generations.reconcile(), 2);
    assert.deepEqual([f.cache.values.get(target.clientId), f.cache.values.get(revoked.clientId)], [2, "revoked"]);
    assert.deepEqual(f.store.db.credentialOutbox.values(), []);
    assert.equal(f.cache.markTrustedCalls, 1);
    assert.equal(f.cache.trusted, true);
    assert.deepEqual(f.logger.messages("info"), ["credential state: published changes made while Redis was unreachable"]);
  });

  test("reconcile keeps an entry whose change moved on meanwhile, for the next round", async () => {
    f.cache.putFailure = new Error("down");
    await f.uow.transaction((tx) => f.generations.publishWithin(tx, a, 2));
    f.cache.putFailure = undefined;
    f.cache.beforePut = async () => {
      f.cache.beforePut = undefined;
      // Another change to `a` commits (with its own outbox entry) while reconcile publishes.
      f.clock.advanceSeconds(1);
      await f.repos.credentialOutbox.add(f.uow.direct, a, f.clock.now());
    };
    assert.equal(await f.generations.reconcile(), 1);
    assert.deepEqual(f.store.db.credentialOutbox.values(), [{ clientId: a, changedAt: new Date("2026-11-22T10:00:01.000Z") }]);
    assert.equal(await f.generations.reconcile(), 1);
    assert.deepEqual(f.store.db.credentialOutbox.values(), []);
  });

  test("refresh re-publishes what the database says, overwriting the cache; its failure is only counted", async () => {
    f.cache.values.set(a, 9);
    await f.generations.refresh(a);
    assert.equal(f.cache.values.get(a), 1);
    assert.deepEqual(f.cache.puts.map((p) => p.onlyIfAbsent), [false]);
    f.cache.putFailure = new Error("down");
    await f.generations.refresh(a);
    assert.deepEqual(f.fallbacks.increments, [{ operation: "write" }]);
  });

  // A src gap (see the report): when the publish fails but the cache still answers reads (a
  // command timeout, a READONLY replica after failover), nothing marks the cache untrusted, so
  // the old generation keeps being read from it until reconcile succeeds or the entry's TTL ends.
  test("a failed publish must not leave the old generation readable from a cache that still answers", { todo: "src/domain/tokens/credential-generations.ts publishWithin does not distrust the cache when put fails" }, async () => {
    f.cache.values.set(a, 1);
    f.cache.putFailure = new Error("READONLY You can't write against a read only replica.");
    await f.uow.transaction(async (tx) => {
      bump(a, 2);
      await f.generations.publishWithin(tx, a, 2);
    });
    assert.equal((await f.generations.current([a])).get(a), 2, "the rotated-away generation 1 must not be current");
  });
});
