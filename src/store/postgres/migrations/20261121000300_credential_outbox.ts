import type { Knex } from "knex";

/**
 * Credential changes Redis has not been told about yet (it was unreachable when they
 * committed). Every instance publishes and clears them once Redis answers again.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("credential_outbox", (t) => {
    t.text("client_id").primary();
    t.timestamp("changed_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("credential_outbox");
}
