// MIGRATE_ON_START=false, for fleets whose migrations are a deploy step of their
// own (the CLI's `migrate` as the job). The server and the CLI run as child processes, as an
// operator runs them.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { migrationSource } from "../../src/store/postgres/migrations/index.js";
import { isPostgres, newStorage, serviceEnv, type Storage } from "../helpers/backend.js";
import { runCli, spawnServer, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";

const WAITING = "start-up: waiting for the migration job (MIGRATE_ON_START=false)";
/** Nothing listens there: the CLI runs in-process, as a migration job does. */
const NO_SERVER = "http://127.0.0.1:1";

const storages: Storage[] = [];
const servers: ServerProcess[] = [];
after(async () => {
  for (const server of servers) await server.stop();
  for (const storage of storages) await dropStorage(storage);
});

function fresh(): Storage {
  const storage = newStorage();
  storages.push(storage);
  return storage;
}

const allMigrations = async () => migrationSource.getMigrations([]);

describe("MIGRATE_ON_START=false", () => {
  test("the CLI's migrate (the migration job) on a fresh schema migrates only: its JSON, and no warning nor error", async () => {
    // It ran the background jobs and the change feed too, which failed on tables not there yet.
    const job = await runCli(["migrate"], serviceEnv(fresh(), { MIGRATE_ON_START: "false", SERVER_URL: NO_SERVER }));
    assert.equal(job.code, 0, job.stderr);
    assert.deepEqual(JSON.parse(job.stdout), { applied: await allMigrations() });
    // Only the CLI's own notes of where it runs ("cli: …"); nothing logged.
    assert.deepEqual(
      job.stderr
        .trimEnd()
        .split("\n")
        .filter((line) => !line.startsWith("cli: ")),
      [],
    );
  });

  test(
    "the schema behind: the instance waits, not ready, saying which migrations are pending; it starts once the job has migrated",
    { skip: !isPostgres && "Postgres only: another process can migrate while the instance waits" },
    async () => {
      const storage = fresh();
      let migrated: Promise<Awaited<ReturnType<typeof runCli>>> | undefined;
      const env = serviceEnv(storage, { MIGRATE_ON_START: "false", SERVER_URL: NO_SERVER });
      const server = await spawnServer(env, {
        // The job runs only once the instance has said it waits for it.
        onStdout: (stdout) => {
          if (!migrated && stdout.includes(WAITING)) migrated = runCli(["migrate"], env);
        },
      });
      servers.push(server);
      const job = await migrated!;
      assert.equal(job.code, 0, job.stderr);
      assert.deepEqual(JSON.parse(job.stdout), { applied: await allMigrations() });

      const lines = server.logLines();
      const waiting = lines.filter((line) => String(line.msg).startsWith(WAITING));
      assert.ok(waiting.length >= 1);
      assert.equal(waiting[0]!.level, 40, "a warning");
      assert.deepEqual(waiting[0]!.pending, await allMigrations());
      const listening = lines.findIndex((line) => String(line.msg).startsWith("service listening"));
      assert.ok(listening > lines.indexOf(waiting.at(-1)!), "it listened (could be ready) only after the wait");
      assert.equal((await fetch(`${server.address}/readyz`)).status, 200);
      assert.deepEqual(JSON.parse((await runCli(["migrate"], { ...env, SERVER_URL: server.address })).stdout), {
        applied: [],
      });
    },
  );

  test(
    "the schema still behind at MIGRATION_WAIT_TIMEOUT_MS: the start fails with exit 1 and says what to do",
    { skip: !isPostgres && "Postgres only (the embedded case is the next test)" },
    async () => {
      const storage = fresh();
      const env = serviceEnv(storage, { MIGRATE_ON_START: "false", MIGRATION_WAIT_TIMEOUT_MS: "1500" });
      const started = Date.now();
      const failed = await spawnServer(env).then(
        (server) => (servers.push(server), undefined),
        (error: Error) => error,
      );
      assert.ok(failed, "the server did not start");
      assert.ok(Date.now() - started >= 1500);
      assert.match(
        failed.message,
        /failed to start: the schema is not migrated: no migration applied after \d+ ms \(\d+ pending\); run the migration job \(the CLI's `migrate`\) or start with MIGRATE_ON_START=true/,
      );
      assert.match(failed.message, /server exited \(1\)/);
      assert.match(failed.message, new RegExp(WAITING.replace(/[()]/g, "\\$&")));
    },
  );

  test(
    "the embedded database behind: no one else can migrate it, so the start fails at once; after the CLI's migrate it starts",
    { skip: isPostgres && "the embedded database only" },
    async () => {
      const storage = fresh();
      const env = serviceEnv(storage, { MIGRATE_ON_START: "false", SERVER_URL: NO_SERVER });
      const first = await spawnServer(env).then(
        (server) => (servers.push(server), undefined),
        (error: Error) => error,
      );
      assert.ok(first, "the schema was behind: no start");
      assert.match(first.message, /server exited \(1\)/);
      assert.match(first.message, /the embedded database is this process's alone: stop it and run the CLI's `migrate`/);
      const job = await runCli(["migrate"], env);
      assert.equal(job.code, 0, job.stderr);
      const server = await spawnServer(env);
      servers.push(server);
      assert.equal((await fetch(`${server.address}/readyz`)).status, 200);
      assert.deepEqual(
        server.logLines().filter((line) => String(line.msg).startsWith(WAITING)),
        [],
      );
    },
  );
});
