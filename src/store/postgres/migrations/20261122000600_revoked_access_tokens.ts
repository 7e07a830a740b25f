import type { Knex } from "knex";

/**
 * Access tokens revoked one by one (RFC 7009), by `jti`, until they expire. Each revocation is a
 * numbered credential change (credential_changes, client id `jti:<jti>`), so every instance
 * learns of it like a rotation; `change_seq` is that number.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("revoked_access_tokens", (t) => {
    t.text("jti").primary();
    t.text("client_id").notNullable().comment("The API user the token was issued to (who revoked it)");
    t.uuid("tmc_id").notNullable().references("id").inTable("tmcs");
    t.timestamp("expires_at", { useTz: true }).notNullable().comment("The token's exp: the row is useless after it");
    t.timestamp("revoked_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.bigInteger("change_seq").notNullable().defaultTo(0);
    t.index(["expires_at"], "revoked_access_tokens_expires_idx");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("revoked_access_tokens");
}
