import type { Knex } from "knex";

/** Refresh tokens (exchange grants only) and the external issuers a TMC trusts for token exchange. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("refresh_tokens", (t) => {
    t.text("id").primary().comment("Random handle; the token itself is never stored");
    t.binary("token_hash").notNullable().comment("HMAC-SHA-256 of the opaque token under the server pepper");
    t.text("family_id")
      .notNullable()
      .comment("All refresh tokens descended from one exchange; reuse revokes the family");
    t.text("client_id").notNullable().references("client_id").inTable("api_users");
    t.uuid("tmc_id").notNullable();
    t.text("subject").notNullable();
    t.text("subject_kind").notNullable().comment("CLIENT (an API user) or USER (a user profile)");
    t.text("scope").notNullable();
    t.text("audience").notNullable();
    t.jsonb("bound_credentials")
      .notNullable()
      .defaultTo("[]")
      .comment("[clientId, generation] pairs the tokens die with");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("expires_at", { useTz: true }).notNullable();
    t.timestamp("used_at", { useTz: true }).nullable().comment("Set when rotated; a second use is a replay");
    t.timestamp("revoked_at", { useTz: true }).nullable();
    t.unique(["token_hash"], { indexName: "refresh_tokens_hash_unique" });
    t.index(["family_id"], "refresh_tokens_family_idx");
  });

  await knex.schema.createTable("trusted_issuers", (t) => {
    t.uuid("tmc_id").notNullable().references("id").inTable("tmcs");
    t.text("issuer").notNullable();
    t.text("jwks_uri").nullable();
    t.jsonb("jwks").nullable().comment("Inline JWKS when the issuer has no reachable URL");
    t.text("audience").nullable();
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(["tmc_id", "issuer"], { constraintName: "trusted_issuers_pk" });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("trusted_issuers");
  await knex.schema.dropTableIfExists("refresh_tokens");
}
