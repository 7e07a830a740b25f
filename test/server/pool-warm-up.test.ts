// A restarted instance answered 500/503 while its pool (min 0) opened connections
// one request at a time, and a start failed outright when its first database reads were slow. Now
// DATABASE_POOL_MIN connections are open before the port opens (and stay open), and start-up reads
// that meet a stalled database retry with a bounded backoff.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import knexPkg from "knex";
import { isPostgres, newStorage, PRODUCTION_DATABASE_TIMEOUTS, serviceEnv, type Storage } from "../helpers/backend.js";
import { startPrivatePostgres, type PrivatePostgres } from "../helpers/private-postgres.js";
import { spawnServer, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";
import { proxyInFrontOf } from "../helpers/tcp-proxy.js";

const RETRY_WARNING = "start-up: migrations failed because the database is unavailable; retrying";

describe(
  "the database pool warms up before the instance says ready",
  { skip: !isPostgres && "the embedded database has one in-process connection" },
  () => {
    const storages: Storage[] = [];
    const servers: ServerProcess[] = [];
    let postgres: PrivatePostgres | undefined;
    after(async () => {
      await Promise.all(servers.map((server) => server.stop()));
      for (const storage of storages) await dropStorage(storage);
      postgres?.stop();
    });

    test("DATABASE_POOL_MIN connections are open when the port opens", async () => {
      // A Postgres of this test's own: every session on it is the instance's.
      postgres = await startPrivatePostgres();
      const storage = newStorage();
      storages.push(storage);
      const server = await spawnServer(
        serviceEnv(storage, { DATABASE_URL: postgres.url, DATABASE_POOL_MIN: "8", DATABASE_POOL_MAX: "10" }),
      );
      servers.push(server);
      const admin = knexPkg.knex({ client: "pg", connection: postgres.url, pool: { min: 0, max: 1 } });
      try {
        const sessions = async () => {
          const { rows } = (await admin.raw(
            "select count(*)::int as n from pg_stat_activity where application_name = 'auth-api-user-service'",
          )) as { rows: Array<{ n: number }> };
          return rows[0]!.n;
        };
        // Beside the request pool: at most the jobs pool (2) and the change feed's LISTEN session.
        const atListen = await sessions();
        assert.ok(atListen >= 8, `${atListen} sessions when the instance listened; the request pool alone keeps 8`);
        assert.equal((await fetch(`${server.address}/readyz`)).status, 200);
      } finally {
        await admin.destroy();
      }
    });

    test("Postgres stalled at start (connections open but nothing answers): start-up retries, then serves once it answers", async () => {
      const storage = newStorage();
      storages.push(storage);
      const { proxy, url } = await proxyInFrontOf(storage.env.DATABASE_URL!, 5432);
      try {
        proxy.stall();
        let resumed = false;
        const server = await spawnServer(serviceEnv(storage, { ...PRODUCTION_DATABASE_TIMEOUTS, DATABASE_URL: url }), {
          // The database "answers again" only once the instance has met the stall and said it retries.
          onStdout: (stdout) => {
            if (!resumed && stdout.includes(RETRY_WARNING)) {
              resumed = true;
              proxy.resume();
            }
          },
        });
        servers.push(server);
        const retry = server.logLines().find((line) => line.msg === RETRY_WARNING);
        assert.ok(retry, `a retry warning was logged:\n${server.stdout()}`);
        assert.match(JSON.stringify(retry.err), /timeout|Timeout/, "the stall surfaced as a timeout, which is retried");
        assert.equal((await fetch(`${server.address}/readyz`)).status, 200);
      } finally {
        proxy.resume();
        await proxy.close();
      }
    });
  },
);
