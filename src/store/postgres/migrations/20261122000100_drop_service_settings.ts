import type { Knex } from "knex";

/** `service_settings` was created by the first migration and never used: nothing reads or writes it. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("service_settings");
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.createTable("service_settings", (t) => {
    t.text("key").primary();
    t.text("value").notNullable();
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}
