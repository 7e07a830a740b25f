// DATA_DIR that cannot be created. Under /proc, mkdir answers ENOENT although the parent exists:
// Node's recursive mkdir then spun forever (100 % CPU, no signal answered), so the start hung
// silently after opening its ports until the test's backstop killed it.
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, describe, test } from "node:test";
import { isPostgres, newStorage, serviceEnv } from "../helpers/backend.js";
import { runToExit, spawnServer } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";

/** A DATA_DIR no process can create (not even root): procfs refuses new entries. */
const UNCREATABLE = `/proc/auth-svc-test-${process.pid}/data`;
/** A child that hangs is ended well before the helpers' backstop, so the test fails rather than waits. */
const HUNG_MS = 60_000;

describe("a DATA_DIR that cannot be written", { skip: !fs.existsSync("/proc/self") && "needs Linux's /proc" }, () => {
  const storage = newStorage();
  after(() => dropStorage(storage));

  test("where the data lives (embedded, or secrets generated there): exit 2, one line naming the path and errno", async () => {
    const env = serviceEnv(storage, { DATA_DIR: UNCREATABLE });
    // Without MASTER_KEY and OPERATOR_TOKEN an instance on Postgres generates them in DATA_DIR.
    delete env.MASTER_KEY;
    delete env.OPERATOR_TOKEN;
    const { code, stdout, stderr } = await runToExit("src/main.ts", [], env, HUNG_MS);
    assert.equal(code, 2, `${stdout}\n${stderr}`);
    assert.equal(stderr.trimEnd(), `configuration error: DATA_DIR ${UNCREATABLE} is not writable (ENOENT)`);
  });

  test(
    "on Postgres with the secrets given, DATA_DIR only keeps server.json for the CLI: one warning, and it serves",
    { skip: !isPostgres && "the embedded database lives in DATA_DIR" },
    async () => {
      const server = await spawnServer(serviceEnv(storage, { DATA_DIR: UNCREATABLE }));
      try {
        const warnings = server.logLines().filter((line) => Number(line.level) >= 40 && line.file !== undefined);
        assert.deepEqual(
          warnings.map(({ msg, file, code }) => ({ msg, file, code })),
          [
            {
              msg: `DATA_DIR ${UNCREATABLE} is not writable (ENOENT): ${UNCREATABLE}/server.json not written; a CLI on this host finds this server only through SERVER_URL/ADMIN_URL`,
              file: `${UNCREATABLE}/server.json`,
              code: "ENOENT",
            },
          ],
        );
        assert.equal((await fetch(`${server.address}/readyz`)).status, 200);
      } finally {
        assert.deepEqual(await server.stop(), { code: 0, signal: null }, server.stderr());
      }
    },
  );
});
