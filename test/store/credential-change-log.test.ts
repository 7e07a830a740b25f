import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openDatabase, type Database } from "../../src/store/postgres/database.js";
import { postgresRepositories } from "../../src/store/postgres/repositories/index.js";
import { KnexUnitOfWork } from "../../src/store/postgres/unit-of-work.js";
import { isPostgres, newStorage, TEST_DATABASE_URL } from "../helpers/backend.js";
import { dropStorage } from "../helpers/service.js";

/**
 * The credential-change log's prune on both drivers: it answers how many changes it removed (the
 * embedded driver reports no row count for a DELETE; it once returned its raw result instead).
 */
const storage = newStorage();
let database: Database;
before(async () => {
  database = isPostgres
    ? openDatabase({ databaseUrl: TEST_DATABASE_URL, dataDir: storage.dataDir, databaseSchema: storage.schema! })
    : openDatabase({ databaseUrl: undefined, dataDir: storage.dataDir, databaseSchema: "public" });
  await database.migrate();
});
after(async () => {
  await database?.close();
  await dropStorage(storage);
});

test("prune removes the changes older than the cut-off but the newest, and answers their number", async () => {
  const { credentialChanges } = postgresRepositories(database.schema);
  const uow = new KnexUnitOfWork(database.db);
  for (const clientId of ["a", "b", "c"]) await uow.transaction((tx) => credentialChanges.record(tx, clientId));
  const future = new Date(Date.now() + 3_600_000);
  assert.equal(await credentialChanges.prune(uow.direct, new Date(0)), 0, "nothing is that old");
  assert.equal(await credentialChanges.prune(uow.direct, future), 2, "all older, but the newest is kept");
  assert.deepEqual(await credentialChanges.since(uow.direct, 0, 10), [{ seq: 3, clientId: "c" }]);
  assert.equal(await credentialChanges.prune(uow.direct, future), 0);
});
