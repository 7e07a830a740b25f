// The migrations through openDatabase (src/store/database.ts) on fresh storage: a Postgres
// schema of its own, or a fresh embedded (PGlite) DATA_DIR. Up, idempotence, rollback, re-apply,
// and the constraints the initial schema enforces.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import type { Knex } from "knex";
import type { Database } from "../../src/store/postgres/database.js";
import { migrationSource } from "../../src/store/postgres/migrations/index.js";
import { isPostgres, newStorage, type Storage } from "../helpers/backend.js";
import { openStorageDatabase } from "../helpers/storage-database.js";
import { dropStorage } from "../helpers/service.js";

const TABLES = [
  "tmcs",
  "companies",
  "users",
  "api_users",
  "signing_keys",
  "audit_events",
  "payment_sources",
  "air_credits",
  "refresh_tokens",
  "trusted_issuers",
  "credential_changes",
] as const;

const opened: Database[] = [];
const storages: Storage[] = [];

/** openDatabase on a fresh storage, as createService would for the current backend. */
function open(storage = newStorage()): Database {
  if (!storages.includes(storage)) storages.push(storage);
  const database = openStorageDatabase(storage);
  opened.push(database);
  return database;
}

after(async () => {
  for (const database of opened) await database.close().catch(() => {});
  for (const storage of storages) {
    await dropStorage(storage);
    fs.rmSync(storage.dataDir, { recursive: true, force: true });
  }
});

async function allMigrationNames(): Promise<string[]> {
  return (await migrationSource.getMigrations([])).map((m) => migrationSource.getMigrationName(m));
}

async function existingTables(db: Knex): Promise<string[]> {
  const present: string[] = [];
  for (const table of TABLES) if (await db.schema.hasTable(table)) present.push(table);
  return present;
}

function rollbackConfig(database: Database): Knex.MigratorConfig {
  return isPostgres ? { migrationSource, schemaName: database.schema } : { migrationSource };
}

describe("migrations", () => {
  let database: Database;
  let db: Knex;

  before(() => {
    database = open();
    db = database.db;
  });

  it("migrate from empty applies every migration and creates every table", async () => {
    assert.equal(database.kind, isPostgres ? "postgres" : "pglite");
    assert.deepEqual(await existingTables(db), [], "nothing exists before the first migrate");
    const names = await allMigrationNames();
    assert.ok(names.length > 0);
    assert.deepEqual(await database.migrate(), names);
    assert.deepEqual(await existingTables(db), [...TABLES]);
    assert.equal(await database.ping(), true);

    const recorded = (await db("knex_migrations").select("name").orderBy("id")) as Array<{ name: string }>;
    assert.deepEqual(
      recorded.map((r) => r.name),
      names,
    );

    if (isPostgres) {
      // The tables live in the instance's schema (the knex instance's searchPath), not in public.
      const rows = (await db
        .select("table_name")
        .from("information_schema.tables")
        .where({ table_schema: database.schema })) as Array<{ table_name: string }>;
      const inSchema = rows.map((r) => r.table_name);
      for (const table of [...TABLES, "knex_migrations", "knex_migrations_lock"]) {
        assert.ok(inSchema.includes(table), `${table} in schema ${database.schema}`);
      }
    }
  });

  it("a second migrate applies nothing", async () => {
    assert.deepEqual(await database.migrate(), []);
    const [{ n }] = (await db("knex_migrations").count({ n: "*" })) as Array<{ n: string | number }>;
    assert.equal(Number(n), (await allMigrationNames()).length);
  });

  it("rollback of all migrations drops every table, and migrating again recreates them", async () => {
    await db("tmcs").insert({ id: crypto.randomUUID(), name: "gone after rollback" });
    const [, rolledBack] = (await db.migrate.rollback(rollbackConfig(database), true)) as [number, string[]];
    assert.deepEqual(rolledBack, [...(await allMigrationNames())].reverse());
    assert.deepEqual(await existingTables(db), [], "every table is dropped");
    assert.deepEqual(await db("knex_migrations").select("name"), []);

    assert.deepEqual(await database.migrate(), await allMigrationNames());
    assert.deepEqual(await existingTables(db), [...TABLES]);
    assert.deepEqual(await db("tmcs").select("id"), [], "the re-created tables start empty");
    assert.deepEqual(await database.migrate(), []);
  });

  describe("constraints of the initial schema", () => {
    let tmcId: string;
    let apiUserSeq = 0;

    before(async () => {
      tmcId = crypto.randomUUID();
      await db("tmcs").insert({ id: tmcId, name: "Constraint TMC" });
    });

    function apiUser(overrides: Record<string, unknown> = {}) {
      return {
        client_id: `client-${apiUserSeq++}-${crypto.randomUUID()}`,
        tmc_id: tmcId,
        role: "TMC_ADMIN",
        credential_type: "CLIENT_CREDENTIALS",
        secret_hash: crypto.randomBytes(32),
        ...overrides,
      };
    }

    /** Asserts a Postgres error with the given SQLSTATE (and constraint name, when given). */
    async function refused(query: Promise<unknown>, sqlState: string, constraint?: string) {
      await assert.rejects(query, (error: { code?: string; constraint?: string; message?: string }) => {
        assert.equal(error.code, sqlState, error.message);
        if (constraint)
          assert.ok(error.constraint === constraint || error.message?.includes(constraint), error.message);
        return true;
      });
    }

    it("tmcs: max_api_users defaults to 5, may be 0, and may not be negative", async () => {
      const row = await db("tmcs").where({ id: tmcId }).first();
      assert.equal(row.max_api_users, 5);
      await db("tmcs").insert({ id: crypto.randomUUID(), name: "zero", max_api_users: 0 });
      await refused(
        db("tmcs").insert({ id: crypto.randomUUID(), name: "negative", max_api_users: -1 }),
        "23514",
        "tmcs_max_api_users_non_negative",
      );
      await refused(
        db("tmcs").where({ id: tmcId }).update({ max_api_users: -5 }),
        "23514",
        "tmcs_max_api_users_non_negative",
      );
    });

    it("api_users: accepts the known roles and credential types", async () => {
      await db("api_users").insert(apiUser());
      const companyId = crypto.randomUUID();
      await db("companies").insert({ id: companyId, tmc_id: tmcId, name: "Co" });
      await db("api_users").insert(
        apiUser({ role: "COMPANY_ADMIN", credential_type: "SCIM_TOKEN", org_id: companyId }),
      );
      const rows = await db("api_users").where({ tmc_id: tmcId }).select("credential_generation", "revoked_at");
      assert.equal(rows.length, 2);
      for (const row of rows) assert.deepEqual([row.credential_generation, row.revoked_at], [1, null]);
    });

    it("api_users: refuses an unknown role", async () => {
      await refused(db("api_users").insert(apiUser({ role: "SUPER_ADMIN" })), "23514", "api_users_role_known");
      await refused(db("api_users").insert(apiUser({ role: "tmc_admin" })), "23514", "api_users_role_known");
    });

    it("api_users: refuses an unknown credential type", async () => {
      await refused(
        db("api_users").insert(apiUser({ credential_type: "PASSWORD" })),
        "23514",
        "api_users_credential_type_known",
      );
    });

    it("api_users: refuses a missing role, an unknown TMC, and a duplicate client_id", async () => {
      await refused(db("api_users").insert(apiUser({ role: null })), "23502");
      await refused(db("api_users").insert(apiUser({ tmc_id: crypto.randomUUID() })), "23503");
      const row = apiUser();
      await db("api_users").insert(row);
      await refused(db("api_users").insert({ ...row }), "23505");
    });

    it("users: the normalized email is unique per company (not per TMC), the external id too when set, among users SCIM has not deleted", async () => {
      const companyId = crypto.randomUUID();
      const otherCompanyId = crypto.randomUUID();
      await db("companies").insert({ id: companyId, tmc_id: tmcId, name: "People Co" });
      await db("companies").insert({ id: otherCompanyId, tmc_id: tmcId, name: "Other People Co" });
      const user = (overrides: Record<string, unknown>) => ({
        id: crypto.randomUUID(),
        company_id: companyId,
        tmc_id: tmcId,
        email: "a@example.com",
        email_normalized: "a@example.com",
        given_name: "A",
        family_name: "B",
        ...overrides,
      });
      const first = user({});
      await db("users").insert(first);
      await refused(db("users").insert(user({ email: "A@example.com" })), "23505", "users_company_email_unique");
      // Another company of the same TMC may hold the same email and external id (SCIM uniqueness is per company).
      await db("users").insert(user({ company_id: otherCompanyId, email: "A@example.com" }));
      // Two users without an external id are fine; the same external id twice is not.
      await db("users").insert(user({ email: "b@example.com", email_normalized: "b@example.com" }));
      await db("users").insert(
        user({ email: "c@example.com", email_normalized: "c@example.com", external_id: "ext-1" }),
      );
      await refused(
        db("users").insert(user({ email: "d@example.com", email_normalized: "d@example.com", external_id: "ext-1" })),
        "23505",
        "users_company_external_id_unique",
      );
      await db("users").insert(
        user({
          company_id: otherCompanyId,
          email: "d@example.com",
          email_normalized: "d@example.com",
          external_id: "ext-1",
        }),
      );
      // A user deleted over SCIM frees its email for a new user of the company.
      await db("users").where({ id: first.id }).update({ is_active: false, scim_deleted_at: db.fn.now() });
      await db("users").insert(user({}));
    });
  });
});

describe("concurrent migrate on Postgres", { skip: !isPostgres && "Postgres backend only" }, () => {
  it("two Database objects migrating one fresh schema at once: one applies everything, the other nothing", async () => {
    const storage = newStorage();
    const first = open(storage);
    const second = open(storage);
    const results = await Promise.all([first.migrate(), second.migrate()]);
    const names = await allMigrationNames();
    assert.deepEqual(results.map((applied) => applied.length).sort(), [0, names.length], JSON.stringify(results));
    assert.deepEqual(results.flat(), names);
    assert.deepEqual(await existingTables(second.db), [...TABLES]);
  });
});
