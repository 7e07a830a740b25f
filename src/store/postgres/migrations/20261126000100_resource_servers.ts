import type { Knex } from "knex";

/**
 * Resource servers: the platform's other services, each with a client id and secret
 * of its own to check the tokens addressed to it. A removed row stays as a tombstone, so a client
 * id is never reused; its credential state takes part in the credential changes like an API
 * user's (`change_seq`). An audience is served by at most one active resource server: the primary
 * key of resource_server_audiences, whose rows go when their server is removed.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("resource_servers", (t) => {
    t.text("client_id")
      .primary()
      .comment("'rs-' and 128 random bits; never reused, so removed rows stay as tombstones");
    t.text("name").notNullable();
    t.binary("secret_hash")
      .notNullable()
      .comment("HMAC-SHA-256 of the secret under the server pepper; never the secret");
    t.integer("credential_generation").notNullable().defaultTo(1).comment("Bumped on rotation");
    t.bigInteger("change_seq").notNullable().defaultTo(0).comment("The credential change that set the state");
    t.text("created_by").notNullable().comment("'operator'");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("rotated_at", { useTz: true }).nullable();
    t.timestamp("removed_at", { useTz: true }).nullable().comment("Tombstone: set once, never cleared");
  });
  await knex.schema.createTable("resource_server_audiences", (t) => {
    t.text("audience").primary().comment("An audience URI; served by one active resource server at most");
    t.text("client_id").notNullable().references("client_id").inTable("resource_servers");
    t.index(["client_id"], "resource_server_audiences_client_id_idx");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("resource_server_audiences");
  await knex.schema.dropTableIfExists("resource_servers");
}
