import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { openDatabase, type Database } from "../../src/store/postgres/database.js";
import { postgresRepositories } from "../../src/store/postgres/repositories/index.js";
import { KnexUnitOfWork } from "../../src/store/postgres/unit-of-work.js";
import { rejectsWith } from "../fakes/assert-domain-error.js";
import { createFixtureOver, newApiUser, newTenant, storedApiUser, tokenRequest } from "../fakes/domain-fixture.js";
import { instrumented } from "../fakes/instrumented-repositories.js";
import { isPostgres, newStorage, TEST_DATABASE_URL, type Storage } from "../helpers/backend.js";
import { dropStorage } from "../helpers/service.js";

/**
 * ApiUserAdmin's interleavings that need a second transaction while one is open: PGlite (the fast
 * tier's store, and the embedded backend) has one connection, so they run on Postgres only. The
 * other moments of the same race are in test/unit/domain/api-user-admin.test.ts.
 */
describe("ApiUserAdmin, two transactions at once", { skip: !isPostgres && "Postgres backend only" }, () => {
  let storage: Storage;
  let database: Database;
  before(async () => {
    storage = newStorage();
    database = openDatabase({
      databaseUrl: TEST_DATABASE_URL,
      dataDir: storage.dataDir,
      databaseSchema: storage.schema!,
    });
    await database.migrate();
  });
  after(async () => {
    await database?.close();
    await dropStorage(storage);
  });

  const notFoundApiUser = (clientId: string) =>
    ({ code: "NOT_FOUND", message: "API user not found", params: [{ name: "clientId", value: clientId }] }) as const;

  // Was a src bug (changeCredential's failure path re-published the database's committed value
  // over a concurrent publication): another TMC's NOT_FOUND rotate, landing inside a revocation's
  // transaction, cannot bring the old generation back.
  test("another TMC's failed rotate inside the revocation's transaction does not undo the revocation", async () => {
    const store = instrumented(postgresRepositories(storage.schema!));
    // The assertions read the cache and the rows; nothing here needs the NOTIFYs.
    const f = await createFixtureOver(store, new KnexUnitOfWork(database.db), { listen: () => () => {} });
    const { tmcId } = await newTenant(f);
    const admin = await newApiUser(f, tmcId);
    const caller = { clientId: admin.clientId, tmcId };
    const foreign = await newTenant(f);
    const theirAdmin = await newApiUser(f, foreign.tmcId);
    const victim = await newApiUser(f, foreign.tmcId);
    const token = (await f.tokenService.grant(victim.user, tokenRequest())).accessToken;
    assert.equal((await f.accessTokens.verify(token)).clientId, victim.clientId, "the cache holds generation 1");
    let interfered = false;
    store.beforeNext("credentialChanges.record", async () => {
      interfered = true;
      const writes = f.cache.writes.length;
      await rejectsWith(f.admin.rotate(caller, victim.clientId, "r"), notFoundApiUser(victim.clientId));
      assert.equal(f.cache.writes.length, writes, "the failed rotate wrote nothing to the cache");
    });
    await f.admin.revoke({ clientId: theirAdmin.clientId, tmcId: foreign.tmcId }, victim.clientId, "r");
    assert.equal(interfered, true);
    assert.ok(
      (await storedApiUser(database.db, victim.clientId, storage.schema))?.revokedAt,
      "the revocation committed",
    );
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
});
