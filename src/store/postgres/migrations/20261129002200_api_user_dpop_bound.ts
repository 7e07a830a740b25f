import type { Knex } from "knex";
import { inLockedTransaction } from "../online-ddl.js";

/**
 * An API user's DPoP policy (RFC 9449 5.2, dpop_bound_access_tokens): a column with a constant
 * default, which Postgres (11+) records in the catalogue without rewriting the table, so its lock
 * is held for an instant.
 */
export async function up(knex: Knex): Promise<void> {
  await inLockedTransaction(knex, (trx) =>
    trx.schema.alterTable("api_users", (t) => {
      t.boolean("dpop_bound_access_tokens")
        .notNullable()
        .defaultTo(false)
        .comment("every token request must carry a DPoP proof (RFC 9449 5.2)");
    }),
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("api_users", (t) => t.dropColumn("dpop_bound_access_tokens"));
}
