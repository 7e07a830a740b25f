import assert from "node:assert/strict";
import crypto from "node:crypto";
import { afterEach, describe, test } from "node:test";
import type { NumberedChange } from "../../src/domain/tokens/ports.js";
import { ResourceServerRegistry } from "../../src/domain/resource-servers/resource-server-registry.js";
import { deriveKeyMaterial } from "../../src/domain/shared/key-material.js";
import { DomainError } from "../../src/errors/domain-error.js";
import { postgresRepositories } from "../../src/store/postgres/repositories/index.js";
import { KnexUnitOfWork } from "../../src/store/postgres/unit-of-work.js";
import { backend, isPostgres, newStorage } from "../helpers/backend.js";
import { openStorageDatabase } from "../helpers/storage-database.js";
import { dropStorage } from "../helpers/service.js";
import { waitFor } from "../helpers/wait.js";

/**
 * PostgresResourceServerRepository on both drivers (the audiences come back in the row's own
 * statement as JSON), the change log's dispatch of `rs-` ids to resource_servers, and on Postgres
 * two registrations of one audience at once: exactly one wins, the other is 409 naming it.
 */
describe(`resource servers in storage (${backend})`, () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function store() {
    const storage = newStorage();
    cleanups.push(() => dropStorage(storage));
    const database = openStorageDatabase(storage);
    cleanups.push(() => database.close());
    await database.migrate();
    const r = postgresRepositories(database.schema);
    const uow = new KnexUnitOfWork(database.db);
    const insert = async (clientId: string, audiences: string[]) => {
      await uow.transaction(async (tx) => {
        await r.resourceServers.insert(tx, {
          clientId,
          name: `Server ${clientId}`,
          secretHash: crypto.randomBytes(32),
          createdBy: "operator",
        });
        assert.deepEqual(await r.resourceServers.claimAudiences(tx, clientId, audiences), []);
      });
    };
    return { r, uow, db: database.db, schema: database.schema, insert };
  }

  test("audiences come with the row, sorted; registeredAudiences answers the subset active servers serve", async () => {
    const { r, uow, insert } = await store();
    await insert("rs-a", ["urn:b", "https://a.example/api"]);
    await insert("rs-b", ["urn:c"]);
    const found = await r.resourceServers.findActive(uow.direct, "rs-a");
    assert.deepEqual(
      [found?.name, found?.audiences, found?.credentialGeneration],
      ["Server rs-a", ["https://a.example/api", "urn:b"], 1],
    );
    const { servers, total } = await r.resourceServers.list(uow.direct, { limit: 10, offset: 0 });
    assert.deepEqual(
      [servers.map((s) => [s.clientId, s.audiences]), total],
      [
        [
          ["rs-a", ["https://a.example/api", "urn:b"]],
          ["rs-b", ["urn:c"]],
        ],
        2,
      ],
    );
    assert.deepEqual(
      [...(await r.resourceServers.registeredAudiences(uow.direct, ["urn:b", "urn:c", "urn:nobody"]))].sort(),
      ["urn:b", "urn:c"],
    );
    assert.deepEqual([...(await r.resourceServers.registeredAudiences(uow.direct, []))], []);

    // A claimed audience is not claimed again; the others are.
    await uow.transaction(async (tx) => {
      await r.resourceServers.insert(tx, {
        clientId: "rs-c",
        name: "C",
        secretHash: crypto.randomBytes(32),
        createdBy: "operator",
      });
      assert.deepEqual(await r.resourceServers.claimAudiences(tx, "rs-c", ["urn:b", "urn:d"]), ["urn:b"]);
    });
    assert.deepEqual((await r.resourceServers.get(uow.direct, "rs-c"))?.audiences, ["urn:d"]);

    // Removed: not active, its audiences free, its state without a generation, the tombstone kept.
    await uow.transaction((tx) => r.resourceServers.markRemoved(tx, "rs-a"));
    assert.equal(await r.resourceServers.findActive(uow.direct, "rs-a"), undefined);
    assert.equal(await r.resourceServers.get(uow.direct, "rs-a"), undefined);
    assert.deepEqual([...(await r.resourceServers.registeredAudiences(uow.direct, ["urn:b", "urn:c"]))], ["urn:c"]);
    assert.deepEqual(
      Object.fromEntries(await r.resourceServers.credentialStates(uow.direct, ["rs-a", "rs-b", "rs-nobody"])),
      { "rs-a": { generation: undefined, changeSeq: 0 }, "rs-b": { generation: 1, changeSeq: 0 } },
    );
    assert.equal((await r.resourceServers.list(uow.direct, { limit: 10, offset: 0 })).total, 2);
  });

  test("the change log stamps an rs- id's change on its resource_servers row", async () => {
    const { r, uow, db, schema, insert } = await store();
    await insert("rs-a", ["urn:a"]);
    const change = await uow.transaction(async (tx) => {
      await r.resourceServers.setCredential(tx, "rs-a", {
        secretHash: crypto.randomBytes(32),
        generation: 2,
        publicKeys: null,
        jwksUri: null,
      });
      return r.credentialChanges.record(tx, "rs-a");
    });
    assert.deepEqual(change, { seq: 1, previous: 0 });
    const row = (await db.withSchema(schema).from("resource_servers").where({ client_id: "rs-a" }).first()) as {
      change_seq: string | number;
      rotated_at: Date | null;
    };
    assert.equal(Number(row.change_seq), 1);
    assert.ok(row.rotated_at);
    assert.deepEqual(
      [...(await r.resourceServers.credentialStates(uow.direct, ["rs-a"]))],
      [["rs-a", { generation: 2, changeSeq: 1 }]],
    );
  });

  test(
    "two registrations of one audience at once: the second waits for the first, then is 409 naming it; nothing of it is written",
    { skip: !isPostgres && "two transactions at once: Postgres backend only" },
    async () => {
      const { r, uow, db, schema } = await store();
      const published: string[] = [];
      const publisher = {
        recordChange: (): Promise<NumberedChange> => Promise.reject(new Error("registration is no credential change")),
        publish: async (clientId: string) => void published.push(clientId),
      };
      const registry = new ResourceServerRegistry({
        uow,
        servers: r.resourceServers,
        audit: r.audit,
        credentials: publisher,
        pepper: deriveKeyMaterial(crypto.randomBytes(32)).secretPepper,
        ownAudience: "https://auth.example/v2",
        keySets: { registered: () => Promise.reject(new Error("no key set is registered by URL here")) },
      });
      // The first registration claims the audience and holds its transaction open.
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const first = uow.transaction(async (tx) => {
        await r.resourceServers.insert(tx, {
          clientId: "rs-first",
          name: "First",
          secretHash: crypto.randomBytes(32),
          createdBy: "operator",
        });
        await r.resourceServers.claimAudiences(tx, "rs-first", ["https://shared.example/api"]);
        await held;
      });
      await waitFor(
        "the first claim",
        async () =>
          Number(
            (
              (await db.raw("select count(*) as n from pg_locks where locktype = 'transactionid'")) as {
                rows: Array<{ n: string }>;
              }
            ).rows[0]!.n,
          ) > 0,
      );
      const outcome = registry
        .register("Second", ["https://other.example/api", "https://shared.example/api"], "req")
        .then(
          () => assert.fail("both registrations got the audience"),
          (e: unknown) => e,
        );
      await waitFor(
        "the second registration to wait for the first",
        async () =>
          Number(
            (
              (await db.raw("select count(*) as n from pg_locks where locktype = 'transactionid' and not granted")) as {
                rows: Array<{ n: string }>;
              }
            ).rows[0]!.n,
          ) > 0,
      );
      release();
      await first;
      const error = await outcome;
      assert.ok(error instanceof DomainError);
      assert.deepEqual(
        [error.code, error.message, error.params],
        [
          "ALREADY_EXISTS",
          "An audience is already served by another resource server",
          [{ name: "audiences", value: "https://shared.example/api" }],
        ],
      );
      assert.deepEqual(
        (await db.withSchema(schema).from("resource_servers").pluck("client_id")) as string[],
        ["rs-first"],
        "nothing of the second is written",
      );
      assert.deepEqual(
        [...(await r.resourceServers.registeredAudiences(uow.direct, ["https://other.example/api"]))],
        [],
      );
      assert.equal(
        ((await db.withSchema(schema).from("audit_events").where({ action: "RESOURCE_SERVER_CREATE" })) as unknown[])
          .length,
        0,
      );
      assert.deepEqual(published, []);
    },
  );
});
