import type { Knex } from "knex";
import { inLockedTransaction } from "../online-ddl.js";

/**
 * Identifiers presented once only (client assertions', DPoP proofs' `jti`): the replay cache of
 * an instance without Redis, and the record of which Redis replay caches were ever started (a
 * Redis found without its marker was emptied, unless it was never started). New tables, under
 * lock_timeout as every migration is.
 */
export async function up(knex: Knex): Promise<void> {
  await inLockedTransaction(knex, async (trx) => {
    await trx.schema.createTable("used_once_ids", (t) => {
      t.text("namespace").notNullable().comment("Whose ids: client assertions, DPoP proofs…");
      t.text("id").notNullable().comment("The id presented (a jti)");
      t.timestamp("expires_at", { useTz: true }).notNullable().comment("Until when it is refused again");
      t.primary(["namespace", "id"], { constraintName: "used_once_ids_pkey" });
      t.index(["expires_at"], "used_once_ids_expires_at_idx");
    });
    await trx.schema.createTable("replay_cache_births", (t) => {
      t.text("name").primary().comment("A Redis replay cache's marker key");
      t.timestamp("started_at", { useTz: true }).notNullable().defaultTo(trx.fn.now());
    });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("replay_cache_births");
  await knex.schema.dropTableIfExists("used_once_ids");
}
