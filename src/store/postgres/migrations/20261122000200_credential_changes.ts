import type { Knex } from "knex";

/**
 * Every credential change (rotation, revocation) gets a number from one Postgres sequence, kept
 * on the API user's row and in a short log. Redis holds each cached generation with the number
 * of the change it reflects, and a watermark: the highest change it has been told about. An
 * instance that knows of a later change than the watermark (through LISTEN/NOTIFY or by asking
 * Postgres) stops believing Redis, so a Redis that lost writes (a restart from a snapshot, a
 * failover to a lagging replica) can never bring a revoked credential back. Replaces the outbox.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("credential_changes", (t) => {
    t.bigIncrements("seq").primary().comment("Monotonic across instances; a rolled-back change leaves a gap");
    t.text("client_id").notNullable();
    t.timestamp("changed_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(["changed_at"], "credential_changes_changed_at_idx");
  });
  await knex.schema.alterTable("api_users", (t) => {
    t.bigInteger("change_seq")
      .notNullable()
      .defaultTo(0)
      .comment("credential_changes.seq of the last change to this credential");
  });
  await knex.schema.dropTableIfExists("credential_outbox");
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.createTable("credential_outbox", (t) => {
    t.text("client_id").primary();
    t.timestamp("changed_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.alterTable("api_users", (t) => t.dropColumn("change_seq"));
  await knex.schema.dropTableIfExists("credential_changes");
}
