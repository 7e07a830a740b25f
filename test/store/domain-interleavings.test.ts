import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, test } from "node:test";
import type { Knex } from "knex";
import pg from "pg";
import type { ApiUserAdminCaller } from "../../src/domain/api-users/model.js";
import { DomainError } from "../../src/errors/domain-error.js";
import type { Database } from "../../src/store/postgres/database.js";
import { credentialChangeChannel } from "../../src/store/postgres/repositories/credential-change-log.js";
import { postgresRepositories, type Repositories } from "../../src/store/postgres/repositories/index.js";
import { KnexUnitOfWork } from "../../src/store/postgres/unit-of-work.js";
import { rejectsWith } from "../fakes/assert-domain-error.js";
import {
  createFixtureOver,
  newApiUser,
  newTenant,
  startInstance,
  storedApiUser,
  tokenRequest,
  type DomainFixtureOver,
  type Instance,
  type ProvisionedApiUser,
} from "../fakes/domain-fixture.js";
import { instrumented, type Instrumented } from "../fakes/instrumented-repositories.js";
import { isPostgres, newStorage, TEST_DATABASE_URL, type Storage } from "../helpers/backend.js";
import { dropStorage } from "../helpers/service.js";
import { openStorageDatabase } from "../helpers/storage-database.js";
import { waitFor } from "../helpers/wait.js";

/**
 * The domain's interleavings that need a second transaction while one is open, over the real
 * repositories on a Postgres schema of their own (the fast tier's PGlite, like the embedded
 * backend, has one connection, so they run on Postgres only). The other moments of the same races
 * are in test/unit/domain/api-user-admin.test.ts and credential-generations.test.ts.
 */
describe("the domain with two transactions open at once", { skip: !isPostgres && "Postgres backend only" }, () => {
  type Fixture = DomainFixtureOver<Instrumented<Repositories>> & {
    readonly db: Knex;
    readonly schema: string;
    /** The payloads of the schema's credential-change NOTIFYs, as they arrive. */
    readonly notified: string[];
  };
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A fresh schema, migrated; the fixture's feeds hear its NOTIFYs through a LISTEN of their own. */
  async function openFixture(): Promise<Fixture> {
    const storage: Storage = newStorage();
    cleanups.push(() => dropStorage(storage));
    const schema = storage.schema!;
    const database: Database = openStorageDatabase(storage);
    cleanups.push(() => database.close());
    await database.migrate();
    const listener = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await listener.connect();
    cleanups.push(() => listener.end());
    const listeners = new Set<(payload: string) => void>();
    const notified: string[] = [];
    listener.on("notification", (message) => {
      notified.push(message.payload ?? "");
      for (const l of listeners) l(message.payload ?? "");
    });
    await listener.query(`listen "${credentialChangeChannel(schema)}"`);
    const store = instrumented(postgresRepositories(schema));
    const f = await createFixtureOver(store, new KnexUnitOfWork(database.db), {
      listen: (l) => {
        listeners.add(l);
        return () => listeners.delete(l);
      },
    });
    return { ...f, db: database.db, schema, notified };
  }

  const notFoundApiUser = (clientId: string) =>
    ({ code: "NOT_FOUND", message: "API user not found", params: [{ name: "clientId", value: clientId }] }) as const;

  /** Whether `instance` accepts `token`; a refusal must be "revoked" (not some other failure). */
  async function accepts(instance: Instance, token: string): Promise<boolean> {
    try {
      await instance.accessTokens.verify(token);
      return true;
    } catch (error) {
      assert.ok(
        error instanceof DomainError && error.message === "The access token has been revoked",
        `refused for another reason: ${String(error)}`,
      );
      return false;
    }
  }

  // Was a src bug (changeCredential's failure path re-published the database's committed value
  // over a concurrent publication): another TMC's NOT_FOUND rotate, landing inside a revocation's
  // transaction, cannot bring the old generation back.
  test("ApiUserAdmin: another TMC's failed rotate inside the revocation's transaction does not undo the revocation", async () => {
    const f = await openFixture();
    const { tmcId } = await newTenant(f);
    const admin = await newApiUser(f, tmcId);
    const caller = { clientId: admin.clientId, tmcId };
    const foreign = await newTenant(f);
    const theirAdmin = await newApiUser(f, foreign.tmcId);
    const victim = await newApiUser(f, foreign.tmcId);
    const token = (await f.tokenService.grant(victim.user, tokenRequest())).accessToken;
    assert.equal((await f.accessTokens.verify(token)).clientId, victim.clientId, "the cache holds generation 1");
    let interfered = false;
    f.store.beforeNext("credentialChanges.record", async () => {
      interfered = true;
      const writes = f.cache.writes.length;
      await rejectsWith(f.admin.rotate(caller, victim.clientId, "r"), notFoundApiUser(victim.clientId));
      assert.equal(f.cache.writes.length, writes, "the failed rotate wrote nothing to the cache");
    });
    await f.admin.revoke({ clientId: theirAdmin.clientId, tmcId: foreign.tmcId }, victim.clientId, "r");
    assert.equal(interfered, true);
    assert.ok((await storedApiUser(f.db, victim.clientId, f.schema))?.revokedAt, "the revocation committed");
    await rejectsWith(f.accessTokens.verify(token), {
      code: "USER_NOT_AUTHENTICATED",
      message: "The access token has been revoked",
    });
    assert.deepEqual(
      f.cache.states.get(victim.clientId),
      { generation: undefined, changeSeq: 1 },
      "the cache still says revoked",
    );
  });

  // Was a todo: numbers were taken at insert, so two concurrent changes could commit in the
  // opposite order of their numbers and the higher one's publication covered the lower one.
  // Now the log numbers under pg_advisory_xact_lock, held until commit: the second change waits
  // for the first to commit, knows it as its `previous`, and its publication cannot raise the
  // watermark over the first's failed one.
  test("CredentialGenerations: two concurrent changes: the second is numbered only once the first has committed, and its publication cannot cover the first's failed one", async () => {
    const f = await openFixture();
    const { tmcId } = await newTenant(f, 20);
    const admin = await newApiUser(f, tmcId);
    const caller: ApiUserAdminCaller = { clientId: admin.clientId, tmcId };
    const a: ProvisionedApiUser = await newApiUser(f, tmcId);
    const b: ProvisionedApiUser = await newApiUser(f, tmcId);
    const rotate = (user: ProvisionedApiUser) => f.admin.rotate(caller, user.clientId, "r");
    const revoke = (user: ProvisionedApiUser) => f.admin.revoke(caller, user.clientId, "r");
    const recordCalls = () => f.store.calls.filter((c) => c === "credentialChanges.record").length;

    const i2 = await startInstance(f);
    const tokenA = (await f.tokenService.grant(a.user, tokenRequest())).accessToken;
    for (const instance of [f, i2]) assert.equal(await accepts(instance, tokenA), true);
    const gate = () => {
      let reached!: () => void;
      let release!: () => void;
      const atCommit = new Promise<void>((resolve) => (reached = resolve));
      const held = new Promise<void>((resolve) => (release = resolve));
      return { atCommit, release, hook: (result: unknown) => (reached(), held.then(() => result)) };
    };
    const numbered: unknown[] = [];
    const first = gate();
    f.store.afterNext("credentialChanges.record", (result) => (numbered.push(result), first.hook(result)));
    const revoking = revoke(a); // numbers change 1, then waits before its commit
    await first.atCommit;
    const second = gate();
    f.store.afterNext("credentialChanges.record", (result) => (numbered.push(result), second.hook(result)));
    let rotated = false;
    const rotating = rotate(b).finally(() => (rotated = true));
    await waitFor("the rotation to reach record", () => recordCalls() === 2);
    await sleep(200); // time enough to be numbered, were it not waiting for the lock
    assert.deepEqual(
      numbered,
      [{ seq: 1, previous: 0 }],
      "the second change is waiting for the numbering lock, not numbered",
    );
    assert.equal(rotated, false);
    assert.deepEqual(
      [
        f.notified,
        await f.repos.credentialChanges.latest(f.uow.direct),
        (await storedApiUser(f.db, b.clientId, f.schema))?.changeSeq,
      ],
      [[], 0, 0],
    );

    f.cache.writeFailure = new Error("ETIMEDOUT");
    first.release();
    await revoking; // change 1 commits (every instance hears of it); its publication fails
    await second.atCommit;
    f.cache.writeFailure = undefined;
    assert.deepEqual(
      numbered,
      [
        { seq: 1, previous: 0 },
        { seq: 2, previous: 1 },
      ],
      "numbered after the first committed, knowing it",
    );
    await waitFor("change 1's NOTIFY", () => f.notified.length > 0);
    await sleep(100); // a second NOTIFY, had the second change committed, would be on its way
    assert.deepEqual(f.notified, ["1"], "the second has not committed yet");
    second.release();
    await rotating; // change 2 commits and publishes
    // Postgres delivers NOTIFYs after the commit, asynchronously: wait for both to reach both instances.
    await waitFor(
      "both announcements on both instances",
      () => f.feed.delivered.length === 2 && i2.feed.delivered.length === 2,
    );
    assert.deepEqual(
      [f.feed.delivered, i2.feed.delivered],
      [
        [1, 2],
        [1, 2],
      ],
      "committed and announced in number order",
    );
    assert.deepEqual(
      f.cache.writes.slice(-2).map((w) => [[...w.states.keys()], w.watermark, w.failed, w.raised]),
      [
        [[a.clientId], { to: 1, ifAtLeast: 0 }, true, false],
        [[b.clientId], { to: 2, ifAtLeast: 1 }, false, false],
      ],
      "change 2 landed but could not raise the watermark over the missed change 1",
    );
    assert.deepEqual([f.cache.states.get(a.clientId), f.cache.watermark], [{ generation: 1, changeSeq: 0 }, 0]);
    let wrongAccepts = 0;
    for (const instance of [f, i2]) if (await accepts(instance, tokenA)) wrongAccepts += 1;
    assert.equal(wrongAccepts, 0, `the revoked token was accepted ${wrongAccepts} time(s)`);

    await f.generations.reconcile(); // joins the one the stale reads started, or finds nothing left to do
    assert.deepEqual([f.cache.states.get(a.clientId), f.cache.watermark], [{ generation: undefined, changeSeq: 1 }, 2]);
    f.store.invocations.length = 0;
    for (const instance of [f, i2]) assert.equal(await accepts(instance, tokenA), false);
    assert.deepEqual(
      f.store.invocations.filter((c) => c.method === "apiUsers.credentialStates"),
      [],
      "repaired: the cache answers again",
    );
  });
});
