import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import {
  checkMigrations,
  checkMigrationSource,
  CUTOFF,
  migrationNames,
  MIGRATIONS_DIR,
  RULES,
} from "./online-ddl-rules.js";

/*
 * The online-DDL discipline (online-ddl-rules.ts) over the real migration files, and each rule
 * shown to fail: on migrations written before the cutoff that broke it, and on throwaway sources.
 */

const rulesOf = (source: string) => [...new Set(checkMigrationSource(source).map((v) => v.rule))].sort();

/** A migration that keeps every rule, for the bad ones to differ from by one thing. */
const GOOD = `
import type { Knex } from "knex";
import { onOneConnection } from "../online-ddl.js";
export const config = { transaction: false };
const STATEMENTS = [
  "alter table api_users add column last_token_at timestamptz", // nullable, no default: no rewrite
  "create index concurrently if not exists audit_events_action_idx on audit_events (tmc_id, action, occurred_at)",
];
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("audit_exports", (t) => {
    t.bigIncrements("id");
    t.text("tmc_id").notNullable().index();
  });
  await onOneConnection(knex, async (run) => {
    for (const sql of STATEMENTS) await run(sql);
  });
}
`;

describe("online DDL in migrations", () => {
  test("every migration newer than the cutoff keeps the rules", () => {
    assert.ok(migrationNames().includes(CUTOFF), `the cutoff ${CUTOFF} names a migration in ${MIGRATIONS_DIR}`);
    assert.deepEqual(checkMigrations(), []);
  });

  test("a migration that keeps them passes", () => {
    assert.deepEqual(checkMigrationSource(GOOD), []);
  });

  test("the rules find what the migrations before the cutoff did: a column type change, an index built while writes wait", () => {
    const source = (name: string) => fs.readFileSync(path.join(MIGRATIONS_DIR, `${name}.ts`), "utf8");
    assert.ok(rulesOf(source("20261122000500_air_credits_v3")).includes("no-column-type-change"));
    assert.ok(rulesOf(source("20261122000400_users_scim")).includes("index-not-concurrent"));
  });

  test("each rule fails on a throwaway bad migration", () => {
    const cases: Array<[string, string]> = [
      [
        "index-not-concurrent",
        GOOD.replace("create index concurrently if not exists", "create index if not exists").replace(
          "export const config = { transaction: false };",
          "",
        ),
      ],
      [
        "index-not-concurrent",
        GOOD.replace(
          "export async",
          'const f = (knex) => knex.schema.alterTable("users", (t) => t.index(["tmc_id"]));\nexport async',
        ),
      ],
      [
        "index-not-concurrent",
        GOOD.replace("create index concurrently", 'create unique index on "app"."audit_events"; --'),
      ],
      ["concurrently-outside-transaction", GOOD.replace("export const config = { transaction: false };", "")],
      [
        "no-column-type-change",
        GOOD.replace(
          "const STATEMENTS = [",
          'const STATEMENTS = ["alter table air_credits alter column total_fare_amount type numeric(15, 3)",',
        ),
      ],
      [
        "no-column-type-change",
        GOOD.replace(
          "export async",
          'const f = (knex) => knex.schema.alterTable("users", (t) => t.text("a").alter());\nexport async',
        ),
      ],
      [
        "no-volatile-default",
        GOOD.replace(
          "const STATEMENTS = [",
          'const STATEMENTS = ["alter table users add column ref uuid default gen_random_uuid()",',
        ),
      ],
      [
        "no-volatile-default",
        GOOD.replace("const STATEMENTS = [", 'const STATEMENTS = ["alter table users add column n bigserial",'),
      ],
      [
        "no-volatile-default",
        GOOD.replace(
          "export async",
          'const f = (knex) => knex.schema.alterTable("users", (t) => t.uuid("r").defaultTo(knex.raw("gen_random_uuid()")));\nexport async',
        ),
      ],
      ["lock-timeout", GOOD.replace("await onOneConnection(knex, ", "await withoutLockTimeout(knex, ")],
    ];
    for (const [rule, source] of cases) {
      assert.notEqual(source, GOOD, `the ${rule} case changes the good migration`);
      assert.deepEqual(rulesOf(source), [rule], source);
    }
    assert.deepEqual(
      [...new Set(cases.map(([rule]) => rule))].sort(),
      RULES.map((r) => r.name).sort(),
      "every rule has a case",
    );
  });

  test("what is not a violation: indexes of a table the migration creates, a comment, a non-volatile default", () => {
    const created = GOOD.replace(
      "const STATEMENTS = [",
      'const STATEMENTS = ["create table exports_v2 (id int)", "create index exports_v2_id on exports_v2 (id)", "alter table users add column seen boolean not null default false",',
    );
    assert.deepEqual(rulesOf(created), []);
    assert.deepEqual(rulesOf(GOOD.replace("export async", "// create index x on users (a)\nexport async")), []);
  });
});
