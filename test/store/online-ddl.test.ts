// onOneConnection (src/store/postgres/online-ddl.ts): the lock_timeout a
// `transaction: false` migration sets holds for its statements, on the shared Postgres in a
// schema of this test's own.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import knexPkg from "knex";
import pg from "pg";
import { onOneConnection } from "../../src/store/postgres/online-ddl.js";
import { isPostgres, newStorage, TEST_DATABASE_URL } from "../helpers/backend.js";
import { dropStorage } from "../helpers/service.js";

describe("onOneConnection", { skip: !isPostgres && "Postgres backend only" }, () => {
  const storage = newStorage();
  const schema = storage.schema!;
  // Two connections, as the migrator's pool: a SET on one would not reach the other.
  const knex = knexPkg.knex({ client: "pg", connection: TEST_DATABASE_URL, pool: { min: 2, max: 2 } });
  const reader = new pg.Client({ connectionString: TEST_DATABASE_URL });
  after(async () => {
    await reader.end().catch(() => {});
    await knex.destroy();
    await dropStorage(storage);
  });

  // Without the lock_timeout the ALTER would wait for the reader for ever: the test's timeout ends it.
  it(
    "a statement queued behind a reader's lock fails after lock_timeout (55P03) instead of blocking the table",
    { timeout: 30_000 },
    async () => {
      await knex.raw(`create schema "${schema}"; create table "${schema}".things (id int)`);
      await reader.connect();
      await reader.query("begin");
      await reader.query(`select * from "${schema}".things`); // ACCESS SHARE until the transaction ends
      const started = Date.now();
      await assert.rejects(
        onOneConnection(
          knex,
          async (run) => {
            await run("select 1");
            await run(`alter table "${schema}".things add column note text`);
          },
          "300ms",
        ),
        (error: { code?: string }) => error.code === "55P03",
      );
      const waited = Date.now() - started;
      assert.ok(waited >= 300 && waited < 5_000, `${waited} ms`);
      await reader.query("rollback");
      await onOneConnection(knex, (run) => run(`alter table "${schema}".things add column note text`), "300ms");
      // The pooled connections go back without the setting.
      for (let i = 0; i < 2; i++) {
        const { rows } = (await knex.raw("show lock_timeout")) as { rows: Array<{ lock_timeout: string }> };
        assert.equal(rows[0]!.lock_timeout, "0");
      }
    },
  );

  it("refuses a lock_timeout that is not a duration", async () => {
    await assert.rejects(
      onOneConnection(knex, async () => undefined, "5 s" as "5s"),
      /lock_timeout must be like 5s or 500ms/,
    );
  });
});
