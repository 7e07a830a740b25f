import type { Knex } from "knex";

/** The RFC 8693 `act` chain of the exchange a refresh-token family descends from, re-issued on every refresh. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("refresh_tokens", (t) => {
    t.jsonb("act").nullable().comment("The delegation chain of the exchange (RFC 8693 act claim)");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("refresh_tokens", (t) => t.dropColumn("act"));
}
