import type { Knex } from "knex";

/**
 * A signing key's activation time, stored with the key so every instance switches to it at the
 * same instant without talking to the others: a key is published (JWKS, verification) from
 * `created_at`, signs from `activates_at` until a newer key activates (`retired_at`), and is
 * dropped at `not_after`. Existing keys were active from their creation.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("signing_keys", (t) => {
    t.timestamp("activates_at", { useTz: true })
      .nullable()
      .comment("Instances sign with it from this instant (until a newer key activates)");
  });
  await knex("signing_keys").update({ activates_at: knex.ref("created_at") });
  await knex.schema.alterTable("signing_keys", (t) => {
    t.timestamp("activates_at", { useTz: true }).notNullable().alter();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("signing_keys", (t) => {
    t.dropColumn("activates_at");
  });
}
