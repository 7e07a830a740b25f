import assert from "node:assert/strict";
import crypto from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, test } from "node:test";
import pg from "pg";
import { tenantScope } from "../../src/domain/shared/tenant-scope.js";
import { credentialChangeChannel } from "../../src/store/postgres/repositories/credential-change-log.js";
import { postgresRepositories } from "../../src/store/postgres/repositories/index.js";
import { KnexUnitOfWork } from "../../src/store/postgres/unit-of-work.js";
import { isPostgres, newStorage, TEST_DATABASE_URL } from "../helpers/backend.js";
import { openStorageDatabase } from "../helpers/storage-database.js";
import { dropStorage } from "../helpers/service.js";
import { waitFor } from "../helpers/wait.js";

/**
 * PostgresCredentialChangeLog on both drivers: numbering in the caller's transaction, gaps left by
 * rolled-back changes, `since` and `prune` (which answers how many it removed: the embedded driver
 * reports no row count for a DELETE, and once returned its raw result instead). What needs a
 * second connection (a reader or a second change while a change's transaction is open) runs on
 * Postgres only; two changes through the domain: test/store/domain-interleavings.test.ts.
 */
describe("credential change log", () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A fresh, migrated database with one TMC and API users `ids`. */
  async function withClients(...ids: string[]) {
    const storage = newStorage();
    cleanups.push(() => dropStorage(storage));
    const database = openStorageDatabase(storage);
    cleanups.push(() => database.close());
    await database.migrate();
    const r = postgresRepositories(database.schema);
    const uow = new KnexUnitOfWork(database.db);
    const scope = tenantScope((await r.tenants.createTmc(uow.direct, "A", 10)).id);
    for (const clientId of ids)
      await r.apiUsers.insert(uow.direct, scope, {
        clientId,
        orgId: undefined,
        role: "TMC_ADMIN",
        credentialType: "CLIENT_CREDENTIALS",
        secretHash: crypto.randomBytes(32),
        createdBy: "operator",
      });
    const changeSeqOf = async (clientId: string) =>
      Number(
        (
          (await database.db.withSchema(database.schema).from("api_users").where({ client_id: clientId }).first()) as {
            change_seq: string | number;
          }
        ).change_seq,
      );
    return { r, uow, db: database.db, schema: database.schema, changeSeqOf };
  }

  /** The schema's credential-change NOTIFYs, heard through a LISTEN of their own (Postgres). */
  async function listening(schema: string): Promise<string[]> {
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await client.connect();
    cleanups.push(() => client.end());
    const heard: string[] = [];
    client.on("notification", (message) => heard.push(message.payload ?? ""));
    await client.query(`listen "${credentialChangeChannel(schema)}"`);
    return heard;
  }

  const onPostgres = { skip: !isPostgres && "two connections: Postgres backend only" };

  test(
    "before its commit a change is nobody else's: not the latest, not listed, not stamped, not announced; the NOTIFY comes with the commit",
    onPostgres,
    async () => {
      const { r, uow, schema, changeSeqOf } = await withClients("c1");
      const heard = await listening(schema);
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let recorded!: () => void;
      const hasRecorded = new Promise<void>((resolve) => (recorded = resolve));
      const writer = uow.transaction(async (tx) => {
        const change = await r.credentialChanges.record(tx, "c1");
        recorded();
        await held;
        return change;
      });
      await hasRecorded;
      assert.equal(await r.credentialChanges.latest(uow.direct), 0, "an uncommitted change is not the latest");
      assert.deepEqual(await r.credentialChanges.since(uow.direct, 0, 10), []);
      assert.equal(await changeSeqOf("c1"), 0);
      await sleep(100); // a NOTIFY sent before the commit would be on its way
      assert.deepEqual(heard, [], "nothing is announced before the commit");
      release();
      assert.deepEqual(await writer, { seq: 1, previous: 0 });
      await waitFor("the NOTIFY", () => heard.length > 0);
      assert.deepEqual(heard, ["1"]);
    },
  );

  test(
    "a rolled-back holder releases the numbering lock: the waiter numbers next, and its previous skips the gap",
    onPostgres,
    async () => {
      const { r, uow, db } = await withClients("c1", "c2");
      await uow.transaction((tx) => r.credentialChanges.record(tx, "c1")); // 1
      let fail!: () => void;
      const failing = new Promise<void>((_, reject) => (fail = () => reject(new Error("deadlock detected"))));
      let recorded!: () => void;
      const hasRecorded = new Promise<void>((resolve) => (recorded = resolve));
      const doomed = uow.transaction(async (tx) => {
        await r.credentialChanges.record(tx, "c1"); // 2, never committed
        recorded();
        await failing;
      });
      await hasRecorded;
      let waited = false;
      const waiter = uow.transaction((tx) => r.credentialChanges.record(tx, "c2")).finally(() => (waited = true));
      // The waiter is blocked on the advisory lock (this schema's database is shared: count any waiter).
      await waitFor(
        "the second change to wait for the numbering lock",
        async () =>
          Number(
            (
              (await db.raw("select count(*) as n from pg_locks where locktype = 'advisory' and not granted")) as {
                rows: Array<{ n: string }>;
              }
            ).rows[0]!.n,
          ) > 0,
      );
      assert.equal(waited, false);
      fail();
      await assert.rejects(doomed, { message: "deadlock detected" });
      assert.deepEqual(await waiter, { seq: 3, previous: 1 });
    },
  );

  test("record numbers the change in its transaction and stamps the credential's change_seq", async () => {
    const { r, uow, changeSeqOf } = await withClients("c1");
    const change = await uow.transaction(async (tx) => {
      const numbered = await r.credentialChanges.record(tx, "c1");
      assert.deepEqual(
        [...(await r.apiUsers.credentialStates(tx, ["c1"]))],
        [["c1", { generation: 1, changeSeq: numbered.seq }]],
        "its own stamp",
      );
      return numbered;
    });
    assert.deepEqual(change, { seq: 1, previous: 0 }, "the first change: nothing committed before it");
    assert.equal(await r.credentialChanges.latest(uow.direct), 1);
    assert.equal(await changeSeqOf("c1"), 1);
    assert.deepEqual(withoutTimes(await r.credentialChanges.since(uow.direct, 0, 10)), [{ seq: 1, clientId: "c1" }]);
  });

  test("a rolled-back change leaves no log row and no stamp, and its number is never reused (a gap)", async () => {
    const { r, uow, changeSeqOf } = await withClients("c1", "c2");
    for (const clientId of ["c1", "c2"])
      await assert.rejects(
        uow.transaction(async (tx) => {
          await r.credentialChanges.record(tx, clientId);
          throw new Error("boom");
        }),
        { message: "boom" },
      );
    assert.deepEqual([await changeSeqOf("c1"), await changeSeqOf("c2")], [0, 0]);
    assert.equal(await r.credentialChanges.latest(uow.direct), 0);
    assert.deepEqual(
      await uow.transaction((tx) => r.credentialChanges.record(tx, "c1")),
      { seq: 3, previous: 0 },
      "1 and 2 were consumed by the rolled-back transactions; `previous` is the last committed change, not seq - 1",
    );
    assert.deepEqual(await uow.transaction((tx) => r.credentialChanges.record(tx, "c2")), { seq: 4, previous: 3 });
    assert.deepEqual(withoutTimes(await r.credentialChanges.since(uow.direct, 0, 10)), [
      { seq: 3, clientId: "c1" },
      { seq: 4, clientId: "c2" },
    ]);
  });

  test("since lists committed changes after a number, oldest first, at most `limit`; prune forgets those older than a time but the newest, and answers their number", async () => {
    const { r, uow, db, schema } = await withClients("c1", "c2");
    const start = Date.parse("2026-11-22T10:00:00.000Z");
    for (const [i, clientId] of ["c1", "c2", "c1", "c2"].entries()) {
      const { seq } = await uow.transaction((tx) => r.credentialChanges.record(tx, clientId));
      // changed_at is the database's now(): set to +0s, +10s, +20s, +30s.
      await db
        .withSchema(schema)
        .table("credential_changes")
        .where({ seq })
        .update({ changed_at: new Date(start + i * 10_000) });
    }
    assert.deepEqual(
      await r.credentialChanges.since(uow.direct, 1, 2),
      [
        { seq: 2, clientId: "c2", changedAt: new Date(start + 10_000) },
        { seq: 3, clientId: "c1", changedAt: new Date(start + 20_000) },
      ],
      "with when each was made",
    );
    assert.deepEqual(
      (await r.credentialChanges.since(uow.direct, 3, 10)).map((c) => c.seq),
      [4],
    );
    assert.deepEqual(await r.credentialChanges.since(uow.direct, 4, 10), []);
    assert.equal(await r.credentialChanges.prune(uow.direct, new Date(0)), 0, "nothing is that old");
    // Strictly older than +20s are the first two.
    assert.equal(await r.credentialChanges.prune(uow.direct, new Date(start + 20_000)), 2);
    assert.deepEqual(
      (await r.credentialChanges.since(uow.direct, 0, 10)).map((c) => c.seq),
      [3, 4],
    );
    assert.equal(
      await r.credentialChanges.prune(uow.direct, new Date(start + 3_600_000)),
      1,
      "the newest change is kept, however old",
    );
    assert.equal(await r.credentialChanges.latest(uow.direct), 4, "latest() never goes back");
    assert.equal(await r.credentialChanges.prune(uow.direct, new Date(start + 3_600_000)), 0);
  });

  test("on `direct` (autocommit) record holds the numbering lock only for its statement", async () => {
    const { r, uow } = await withClients("c1", "c2");
    assert.deepEqual(await r.credentialChanges.record(uow.direct, "c1"), { seq: 1, previous: 0 });
    assert.deepEqual(
      await uow.transaction((tx) => r.credentialChanges.record(tx, "c2")),
      { seq: 2, previous: 1 },
      "not blocked by the autocommit change",
    );
  });
});

/** The changes without their times (the database's now(), which these tests do not set). */
function withoutTimes(changes: ReadonlyArray<{ seq: number; clientId: string }>) {
  return changes.map(({ seq, clientId }) => ({ seq, clientId }));
}
