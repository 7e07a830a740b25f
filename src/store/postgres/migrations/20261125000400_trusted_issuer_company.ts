import type { Knex } from "knex";

/**
 * An identity provider bound to one company of its TMC: its tokens name
 * users of that company only, so another company's users (a SCIM client may provision any
 * e-mail) can never make an exchange ambiguous or pick the wrong user. Null: TMC-wide, as before.
 * A nullable column without a default: no table rewrite.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("trusted_issuers", (t) => {
    t.uuid("company_id")
      .nullable()
      .references("id")
      .inTable("companies")
      .onDelete("CASCADE")
      .comment("The one company whose users its tokens name; null: any company of the TMC");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("trusted_issuers", (t) => {
    t.dropColumn("company_id");
  });
}
