// CLI traps: `cli seed` with a DATA_DIR where no server runs silently created and
// seeded a new store (exit 0, nothing on stderr) whose credentials the running server refused;
// a seed sent while the server was still starting collided with it. Now the CLI says on stderr
// where it runs, refuses to create a store without --init, and waits for a starting server.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, describe, test } from "node:test";
import { isPostgres, newStorage, serviceEnv, type Storage } from "../helpers/backend.js";
import { runCli, spawnServer } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";
import { waitFor } from "../helpers/wait.js";

/** Nothing listens on port 1. */
const NO_SERVER = "http://127.0.0.1:1";
const storages: Storage[] = [];
function storage(options: { emptyDataDir?: boolean } = {}): Storage {
  const s = newStorage(options);
  storages.push(s);
  return s;
}
after(async () => {
  for (const s of storages) await dropStorage(s);
});

describe("the CLI says where it runs and creates no store unasked", { timeout: 600_000 }, () => {
  test(
    "no server, empty DATA_DIR: refused without --init, nothing written; with --init, created and said so",
    { skip: isPostgres && "embedded backend only (DATA_DIR)" },
    async () => {
      const s = storage({ emptyDataDir: true });
      const env = serviceEnv(s, { SERVER_URL: NO_SERVER });
      const refused = await runCli(["seed"], env);
      assert.equal(refused.code, 1, refused.stderr);
      assert.equal(refused.stdout, "");
      assert.match(refused.stderr, new RegExp(`^cli: using the server at ${NO_SERVER} \\(SERVER_URL\\)$`, "m"));
      assert.match(
        refused.stderr,
        new RegExp(
          `^error: no server answers at ${NO_SERVER} and DATA_DIR ${s.dataDir} holds no store; .*pass --init`,
          "m",
        ),
      );
      assert.deepEqual(fs.readdirSync(s.dataDir), [], "nothing was created in DATA_DIR");

      const created = await runCli(["tmc", "create", "--name", "Init Travel", "--init"], env);
      assert.equal(created.code, 0, created.stderr);
      assert.match(
        created.stderr,
        new RegExp(
          `^cli: no server answers at ${NO_SERVER}; running in-process on DATA_DIR ${s.dataDir} \\(embedded database, created now: --init\\)$`,
          "m",
        ),
      );
      assert.ok(fs.existsSync(path.join(s.dataDir, "pglite", "PG_VERSION")));

      // The store exists now: later runs need no --init, and say where they run.
      const again = await runCli(["tmc", "list"], env);
      assert.equal(again.code, 0, again.stderr);
      assert.match(
        again.stderr,
        new RegExp(
          `^cli: no server answers at ${NO_SERVER}; running in-process on DATA_DIR ${s.dataDir} \\(embedded database\\)$`,
          "m",
        ),
      );
    },
  );

  test(
    "Postgres: an offline run names the database without its credentials",
    { skip: !isPostgres && "postgres backend only" },
    async () => {
      const s = storage();
      const env = serviceEnv(s, {
        SERVER_URL: NO_SERVER,
        DATABASE_URL: s.env.DATABASE_URL!.replace("postgres://", "postgres://postgres:hunter2@"),
      });
      const r = await runCli(["migrate"], env);
      assert.equal(r.code, 0, r.stderr);
      assert.match(
        r.stderr,
        new RegExp(
          `^cli: no server answers at ${NO_SERVER}; running in-process on DATABASE_URL postgres://127\\.0\\.0\\.1:5432/test \\(schema ${s.schema}\\)$`,
          "m",
        ),
      );
      assert.equal(r.stderr.includes("hunter2"), false);
    },
  );

  /**
   * A server started on an empty DATA_DIR, and `whileStarting` run against it before it has
   * announced itself; it gets the started server's address once the start has ended.
   */
  async function duringFirstStart(
    whileStarting: (env: Record<string, string>, dataDir: string) => Promise<(address: string) => void>,
  ): Promise<void> {
    const s = storage({ emptyDataDir: true });
    const env = serviceEnv(s);
    const starting = spawnServer(env);
    let server: Awaited<typeof starting> | undefined;
    try {
      const check = await whileStarting(env, s.dataDir);
      server = await starting;
      check(server.address);
    } finally {
      server ??= await starting.catch(() => undefined);
      await server?.stop();
    }
  }

  test(
    "a command sent while the server is still starting waits for it and goes through it",
    { skip: isPostgres && "embedded backend only (the DATA_DIR lock)" },
    () =>
      // A first start (initdb, then migrations) is long enough to send a command while it runs.
      duringFirstStart(async (env, dataDir) => {
        // The server holds DATA_DIR (owner.pid) and has not announced its address (server.json): it is migrating.
        await waitFor("the server to claim DATA_DIR", () => fs.existsSync(path.join(dataDir, "owner.pid")), {
          timeoutMs: 60_000,
        });
        assert.equal(fs.existsSync(path.join(dataDir, "server.json")), false, "the server is still starting");
        const seeded = await runCli(["seed"], env);
        return (address) => {
          assert.equal(seeded.code, 0, seeded.stderr);
          assert.match(
            seeded.stderr,
            /^cli: DATA_DIR .* is held by process \d+, which has not announced a server yet; waiting for it/m,
          );
          assert.match(
            seeded.stderr,
            new RegExp(
              `^cli: using the server at ${address} \\(recorded by server process \\d+ in ${dataDir}/server\\.json\\)$`,
              "m",
            ),
          );
          assert.doesNotMatch(seeded.stderr, /in-process/);
          const seed = JSON.parse(seeded.stdout) as { tmcId: string };
          assert.ok(seed.tmcId);
        };
      }),
  );

  test(
    "a command run at the same moment as the server's start (npm start in another terminal) waits for it",
    { skip: isPostgres && "embedded backend only (the DATA_DIR lock)" },
    () =>
      // Nothing in DATA_DIR yet: the CLI must not tell the operator to pass --init to a server that is starting.
      duringFirstStart(async (env) => {
        const listed = await runCli(["tmc", "list"], env);
        return (address) => {
          assert.equal(listed.code, 0, listed.stderr);
          assert.doesNotMatch(listed.stderr, /--init|in-process/);
          assert.match(listed.stderr, new RegExp(`^cli: using the server at ${address} \\(recorded by`, "m"));
        };
      }),
  );
});
