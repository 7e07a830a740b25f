// A new pool connection that fails its setup queries is closed, not left open. Knex's Postgres
// dialect runs `select version()` and `set search_path` on each connection it opens; when one of
// them failed (a "Query read timeout" after an event-loop stall under load), knex rejected without
// ending the connection: its socket stayed open after the pool was destroyed and kept the process
// alive (two-instances.test.ts passed and never exited). A proxy we own holds the server's answer
// to one setup query past the pool's query timeout; the shared Postgres is never stalled.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { DEFAULT_MIGRATION_LOCK_TIMEOUT_MS, isPostgres, newTempDir, TEST_DATABASE_URL } from "../helpers/backend.js";
import { proxyInFrontOf, type TcpProxy } from "../helpers/tcp-proxy.js";
import { waitFor } from "../helpers/wait.js";
import { openDatabase } from "../../src/store/postgres/database.js";

const QUERY_TIMEOUT_MS = 300;

describe("a pool connection whose setup query fails", { skip: !isPostgres && "Postgres backend only" }, () => {
  const proxies: TcpProxy[] = [];
  after(async () => {
    for (const proxy of proxies) await proxy.close();
  });

  for (const setupQuery of ["select version()", "set search_path"]) {
    test(`is closed when the server does not answer "${setupQuery}" in time`, async () => {
      const { proxy, url } = await proxyInFrontOf(TEST_DATABASE_URL, 5432);
      proxies.push(proxy);
      proxy.holdAnswersAfter(setupQuery);
      // Session mode (the default): the request pool sets search_path on each connection.
      const database = openDatabase({
        databaseUrl: url,
        dataDir: newTempDir(),
        databaseSchema: "setup_failure",
        migrationLockTimeoutMs: DEFAULT_MIGRATION_LOCK_TIMEOUT_MS,
        databaseQueryTimeoutMs: QUERY_TIMEOUT_MS,
        databaseAcquireTimeoutMs: 5_000,
      });
      await assert.rejects(database.db.raw("select 1"), /Query read timeout/);
      await database.close();
      await waitFor("the failed connection's socket to close", () => proxy.openSockets() === 0, {
        timeoutMs: 3_000,
      });
    });
  }
});
