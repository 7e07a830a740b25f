import { after, before } from "node:test";
import { openDatabase, type Database, type DatabaseOptions } from "../../src/store/postgres/database.js";
import { KnexUnitOfWork } from "../../src/store/postgres/unit-of-work.js";
import {
  DEFAULT_MIGRATION_LOCK_TIMEOUT_MS,
  isPostgres,
  newStorage,
  TEST_DATABASE_URL,
  type Storage,
} from "./backend.js";
import { dropStorage } from "./service.js";

/**
 * The storage's database as createService opens it on the current backend (not yet migrated);
 * `overrides` for tests of those options (a lock timeout, another URL).
 */
export function openStorageDatabase(storage: Storage, overrides: Partial<DatabaseOptions> = {}): Database {
  return openDatabase({
    databaseUrl: isPostgres ? TEST_DATABASE_URL : undefined,
    dataDir: storage.dataDir,
    databaseSchema: isPostgres ? storage.schema! : "public",
    migrationLockTimeoutMs: DEFAULT_MIGRATION_LOCK_TIMEOUT_MS,
    ...overrides,
  });
}

/**
 * A fresh storage of the suite's own, migrated before its tests and dropped after them; `get()`
 * answers its database and a unit of work over the request pool once `before` has run.
 */
export function migratedStorageForSuite(): () => { database: Database; uow: KnexUnitOfWork } {
  const storage = newStorage();
  let opened: { database: Database; uow: KnexUnitOfWork } | undefined;
  before(async () => {
    const database = openStorageDatabase(storage);
    await database.migrate();
    opened = { database, uow: new KnexUnitOfWork(database.db) };
  });
  after(async () => {
    await opened?.database.close();
    await dropStorage(storage);
  });
  return () => {
    if (!opened) throw new Error("the suite's storage is opened in its before hook");
    return opened;
  };
}
