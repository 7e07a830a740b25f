import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { isPostgres, newStorage, serviceEnv, TEST_DATABASE_URL } from "../helpers/backend.js";
import { spawnServer, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";
import { proxyInFrontOf } from "../helpers/tcp-proxy.js";

const RETRY_WARNING = "start-up: migrations failed because the database is unavailable; retrying";

/**
 * An instance started before its database answers (a Postgres still starting, a
 * failover, a machine so busy the first connection misses the 500 ms acquire timeout) did not wait:
 * KnexTimeoutError in the migrations or in loading the signing keys, exit 1. Now start-up retries
 * that first work with a bounded backoff and starts once the database answers.
 */
describe(
  "start-up waits for a database that is not answering yet",
  { skip: !isPostgres && "the embedded database is in the process: it cannot be unreachable" },
  () => {
    const storage = newStorage();
    let server: ServerProcess | undefined;
    after(async () => {
      await server?.stop();
      await dropStorage(storage);
    });

    test("Postgres refuses connections when the instance starts: it logs a retry, then serves once Postgres answers", async () => {
      const { proxy, url } = await proxyInFrontOf(TEST_DATABASE_URL, 5432);
      try {
        await proxy.cut();
        let restoring: Promise<void> | undefined;
        server = await spawnServer(serviceEnv(storage, { DATABASE_URL: url }), {
          // Postgres "comes up" only after the instance has met the refusal and said it will retry.
          onStdout: (stdout) => {
            if (!restoring && stdout.includes(RETRY_WARNING)) restoring = proxy.restore();
          },
        });
        await restoring;
        const retries = server.logLines().filter((line) => line.msg === RETRY_WARNING);
        assert.ok(retries.length >= 1, `a retry warning was logged:\n${server.stdout()}`);
        assert.equal(retries[0]!.level, 40, "logged as a warning");
        assert.equal((await fetch(`${server.address}/readyz`)).status, 200);
      } finally {
        await proxy.close();
      }
    });
  },
);
