import { openDatabase, type Database } from "../../src/store/postgres/database.js";
import { DEFAULT_MIGRATION_LOCK_TIMEOUT_MS, isPostgres, TEST_DATABASE_URL, type Storage } from "./backend.js";

/** The storage's database as createService opens it on the current backend (not yet migrated). */
export function openStorageDatabase(storage: Storage): Database {
  const migrationLockTimeoutMs = DEFAULT_MIGRATION_LOCK_TIMEOUT_MS;
  return isPostgres
    ? openDatabase({
        databaseUrl: TEST_DATABASE_URL,
        dataDir: storage.dataDir,
        databaseSchema: storage.schema!,
        migrationLockTimeoutMs,
      })
    : openDatabase({
        databaseUrl: undefined,
        dataDir: storage.dataDir,
        databaseSchema: "public",
        migrationLockTimeoutMs,
      });
}
