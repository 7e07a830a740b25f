// Two instances through a PgBouncer in transaction mode, on a non-public DATABASE_SCHEMA of a
// database whose `public` schema holds the very same tables (with a per-connection
// search_path, the pooler lent a connection whose search_path was `public`, and writes went
// there, silently). The SQL names its schema, so `public` stays empty. The rest of the
// end-to-end tier runs through a pooler too (test/run.sh's PgBouncer tier); this file holds the
// trap that tier cannot set on the shared server.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import knexPkg, { type Knex } from "knex";
import { loadConfig } from "../../src/config/config.js";
import { openDatabase } from "../../src/store/postgres/database.js";
import { KnexUnitOfWork, knexOf } from "../../src/store/postgres/unit-of-work.js";
import { accessToken, callApi } from "../helpers/api.js";
import { isPostgres, newTempDir, removeTempDir, TEST_REDIS_URL, type Storage } from "../helpers/backend.js";
import { pgbouncerInstalled, startPrivatePgbouncer, type PrivatePgbouncer } from "../helpers/private-pgbouncer.js";
import { startPrivatePostgres, type PrivatePostgres } from "../helpers/private-postgres.js";
import { operatorCall, startService, type RunningService } from "../helpers/service.js";
import { waitFor } from "../helpers/wait.js";

const SCHEMA = "tenant_fleet";

describe(
  "two instances through PgBouncer (transaction mode) on a non-public schema",
  { skip: !isPostgres ? "needs Postgres" : !pgbouncerInstalled() && "needs pgbouncer (.ci/run installs it)" },
  () => {
    let server: PrivatePostgres;
    let pooler: PrivatePgbouncer;
    let direct: Knex;
    let storage: Storage;
    let a: RunningService;
    let b: RunningService;
    const rowsIn = async (schema: string, table: string) =>
      Number(((await direct.withSchema(schema).from(table).count({ n: "*" }).first()) as { n: string }).n);
    const tablesOf = async (schema: string) =>
      ((await direct("pg_tables").where({ schemaname: schema }).pluck("tablename")) as string[]).filter(
        (t) => !t.startsWith("knex_migrations"),
      );

    before(async () => {
      server = await startPrivatePostgres();
      // The trap: every table of ours, empty, in `public`, where an unqualified statement on a
      // pooled connection (search_path "$user", public) would find it.
      const trap = openDatabase({ ...loadConfig({}).storage, databaseUrl: server.url, databaseSchema: "public" });
      try {
        await trap.migrate();
      } finally {
        await trap.close();
      }
      direct = knexPkg.knex({ client: "pg", connection: server.url, pool: { min: 0, max: 2 } });
      pooler = await startPrivatePgbouncer(server.url);
      const dataDir = newTempDir();
      storage = {
        env: {
          DATA_DIR: dataDir,
          DATABASE_URL: pooler.url,
          DATABASE_DIRECT_URL: server.url,
          DATABASE_POOL_MODE: "transaction",
          DATABASE_SCHEMA: SCHEMA,
          REDIS_URL: TEST_REDIS_URL,
        },
        dataDir,
        schema: undefined, // on the private server, which goes whole
      };
      [a, b] = await Promise.all([startService({ storage }), startService({ storage })]);
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await direct?.destroy();
      pooler?.stop();
      server?.stop();
      if (storage) removeTempDir(storage.dataDir);
    });

    test("tenants, API users, tokens, cross-instance revocation and the audit trail: all in the schema, nothing in public", async () => {
      const seed = await operatorCall<{
        tmcId: string;
        clientId: string;
        clientSecret: string;
        airCreditCount: number;
      }>(a.baseUrl, "Seed", {});
      assert.ok(seed.airCreditCount > 0);
      const admin = await accessToken(b.baseUrl, seed.clientId, seed.clientSecret);
      const created = (await (await callApi(b.baseUrl, "/v2/api-users", admin, {})).json()) as {
        clientId: string;
        clientSecret: string;
      };
      const token = await accessToken(a.baseUrl, created.clientId, created.clientSecret);
      assert.equal((await callApi(a.baseUrl, "/v2/api-users", token)).status, 200, "A's token works on A");
      assert.equal((await callApi(b.baseUrl, "/v2/api-users", token)).status, 200, "and on B");
      assert.equal(
        (await callApi(b.baseUrl, "/v2/api-users/revoke", admin, { clientId: created.clientId })).status,
        204,
      );
      assert.equal(
        (await callApi(a.baseUrl, "/v2/api-users", token)).status,
        401,
        "revoked through B: A refuses at once",
      );

      // The token events reach the trail: a batch flushed by a background job through the pooler
      // (awaited in either schema, so a write into public is reported as such below).
      const tokenEvents = async (schema: string) =>
        Number(
          (
            (await direct
              .withSchema(schema)
              .from("audit_events")
              .where({ action: "TOKEN_ISSUED" })
              .count({ n: "*" })
              .first()) as { n: string }
          ).n,
        );
      await waitFor(
        "the token events flushed",
        async () => (await tokenEvents(SCHEMA)) + (await tokenEvents("public")) >= 2,
      );

      const publicTables = await tablesOf("public");
      assert.deepEqual(publicTables.sort(), (await tablesOf(SCHEMA)).sort(), "public holds the same tables (the trap)");
      const written: string[] = [];
      for (const table of publicTables) if ((await rowsIn("public", table)) > 0) written.push(table);
      assert.deepEqual(written, [], "nothing was written into public");
      for (const table of ["tmcs", "api_users", "air_credits", "credential_changes", "audit_events", "signing_keys"])
        assert.ok((await rowsIn(SCHEMA, table)) > 0, `${SCHEMA}.${table} holds the rows`);

      // The audit search reads them back through the pooler.
      const page = await operatorCall<{ events?: Array<{ action: string; target?: { clientId?: string } }> }>(
        a.baseUrl,
        "ListAuditEvents",
        { tmcId: seed.tmcId, actions: ["TOKEN_ISSUED"] },
      );
      assert.ok((page.events ?? []).length >= 2, JSON.stringify(page));
      assert.ok(page.events!.every((e) => e.action === "TOKEN_ISSUED"));
    });

    test("the pooler refuses the session mode's startup parameters; in transaction mode every transaction carries the timeouts", async () => {
      const settings = {
        ...loadConfig({}).storage,
        databaseUrl: pooler.url,
        databaseDirectUrl: server.url,
        databaseSchema: SCHEMA,
        databaseQueryTimeoutMs: 1_500,
        databaseLockTimeoutMs: 300,
      };
      const session = openDatabase({ ...settings, databasePoolMode: "session" });
      try {
        await assert.rejects(session.db.raw("select 1"), /unsupported startup parameter: statement_timeout/);
      } finally {
        await session.close();
      }
      const pooled = openDatabase({ ...settings, databasePoolMode: "transaction" });
      try {
        const show = async (tx: Knex | Knex.Transaction) =>
          (
            (await tx.raw(
              "select current_setting('statement_timeout') as s, current_setting('lock_timeout') as l",
            )) as {
              rows: Array<{ s: string; l: string }>;
            }
          ).rows[0];
        const inTransaction = await new KnexUnitOfWork(pooled.db).transaction((tx) => show(knexOf(tx)));
        assert.deepEqual(inTransaction, { s: "1500ms", l: "300ms" });
        // A busy row: the lock wait ends at lock_timeout (55P03), set in that transaction's BEGIN.
        const holder = await direct.transaction();
        try {
          const [tmc] = (await holder.withSchema(SCHEMA).from("tmcs").select("id").limit(1).forUpdate()) as Array<{
            id: string;
          }>;
          const started = Date.now();
          await assert.rejects(
            pooled.db.transaction((trx) =>
              trx.withSchema(SCHEMA).from("tmcs").where({ id: tmc!.id }).update({ name: "x" }),
            ),
            (error: { code?: string }) => error.code === "55P03",
          );
          assert.ok(Date.now() - started < 1_400, "ended by lock_timeout, before the statement timeout");
        } finally {
          await holder.rollback();
        }
      } finally {
        await pooled.close();
      }
    });
  },
);
