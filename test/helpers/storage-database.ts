import { openDatabase, type Database, type DatabaseOptions } from "../../src/store/postgres/database.js";
import { DEFAULT_MIGRATION_LOCK_TIMEOUT_MS, isPostgres, TEST_DATABASE_URL, type Storage } from "./backend.js";

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
