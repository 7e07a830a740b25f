import type { Knex } from "knex";

/**
 * RFC 8936 poll delivery of Security Event Tokens: each resource server's position in
 * the credential-change log, shared by every instance. `acknowledged_through`: every change up to
 * it is acknowledged (or was no event); ssf_acknowledged_sets: changes above it acknowledged one by
 * one, folded into the position once every change before them is.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("ssf_poll_positions", (t) => {
    t.text("resource_server_id").primary().references("client_id").inTable("resource_servers");
    t.bigInteger("acknowledged_through")
      .notNullable()
      .comment("credential_changes.seq: every SET up to it is acknowledged");
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.createTable("ssf_acknowledged_sets", (t) => {
    t.text("resource_server_id").notNullable().references("resource_server_id").inTable("ssf_poll_positions");
    t.bigInteger("seq").notNullable().comment("credential_changes.seq of a SET acknowledged out of order");
    t.primary(["resource_server_id", "seq"], { constraintName: "ssf_acknowledged_sets_pkey" });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("ssf_acknowledged_sets");
  await knex.schema.dropTableIfExists("ssf_poll_positions");
}
