import type { Knex } from "knex";
import { inLockedTransaction } from "../online-ddl.js";

/**
 * A resource server's public key set (private_key_jwt, RFC 7523), as an API user's: a nullable
 * column without default, so adding it rewrites nothing and holds its lock for an instant.
 */
export async function up(knex: Knex): Promise<void> {
  await inLockedTransaction(knex, (trx) =>
    trx.schema.alterTable("resource_servers", (t) => {
      t.jsonb("public_keys")
        .nullable()
        .comment("JWK Set of public keys its client assertions are signed with; null: none registered");
    }),
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("resource_servers", (t) => t.dropColumn("public_keys"));
}
