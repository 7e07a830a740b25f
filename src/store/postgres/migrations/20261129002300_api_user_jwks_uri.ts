import type { Knex } from "knex";
import { inLockedTransaction } from "../online-ddl.js";

/**
 * An API user's key set registered by URL (private_key_jwt with a `jwks_uri`): a nullable column
 * without default, so adding it rewrites nothing and holds its lock for an instant. At most one of
 * public_keys and jwks_uri is set (the domain writes both together, one of them null).
 */
export async function up(knex: Knex): Promise<void> {
  await inLockedTransaction(knex, (trx) =>
    trx.schema.alterTable("api_users", (t) => {
      t.text("jwks_uri")
        .nullable()
        .comment("https URL of the JWK Set its client assertions are signed with; null: none (or inline public_keys)");
    }),
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("api_users", (t) => t.dropColumn("jwks_uri"));
}
