import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { isPostgres, newStorage, serviceEnv } from "../helpers/backend.js";
import { freePort } from "../helpers/free-port.js";
import { runToExit } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";

/** Runs the service until it exits: its exit code, the last line it wrote to stderr, and all it wrote. */
async function startUntilExit(
  env: Record<string, string>,
): Promise<{ code: number | null; last: string; all: string }> {
  const { code, stdout, stderr } = await runToExit("src/main.ts", [], env);
  return { code, last: stderr.trimEnd().split("\n").at(-1) ?? "", all: `${stdout}\n${stderr}` };
}

/**
 * A start that cannot reach its database, or finds its schema never migrated (MIGRATE_ON_START=false
 * and no migration job run), ended with the pool's symptom as its last line ("Knex: Timeout acquiring
 * a connection. The pool is probably full") after ~39 s; now the last line says which it is.
 */
describe(
  "a start-up that fails names its cause",
  { skip: !isPostgres && "the embedded database is in the process: it is never unreachable nor migrated by a job" },
  () => {
    const storage = newStorage();
    after(() => dropStorage(storage));

    test("Postgres not answering: the last line names its host:port and the refusal, never the password", async () => {
      const port = await freePort(); // closed: nothing listens there
      const { code, last, all } = await startUntilExit(
        serviceEnv(storage, {
          DATABASE_URL: `postgres://auth:not-to-be-printed@127.0.0.1:${port}/test`,
          MIGRATE_ON_START: "false",
          DATABASE_STARTUP_WAIT_MS: "500",
        }),
      );
      assert.equal(code, 1, all);
      assert.match(
        last,
        new RegExp(
          `^failed to start: Postgres at 127\\.0\\.0\\.1:${port} did not answer \\(connection refused \\(ECONNREFUSED\\)\\)`,
        ),
        all,
      );
      assert.doesNotMatch(all, /not-to-be-printed/, "no credentials of DATABASE_URL in what it wrote");
    });

    test("a schema no migration was applied to: the last line says it is not migrated and what to run", async () => {
      // The storage's own schema, which nothing has migrated (dropped after).
      const { code, last, all } = await startUntilExit(
        serviceEnv(storage, { MIGRATE_ON_START: "false", MIGRATION_WAIT_TIMEOUT_MS: "0" }),
      );
      assert.equal(code, 1, all);
      assert.match(last, /^failed to start: the schema is not migrated: no migration applied/, all);
      assert.match(last, /run the migration job \(the CLI's `migrate`\) or start with MIGRATE_ON_START=true/);
    });
  },
);
