import type { Knex } from "knex";

/**
 * The data model the spec implies. Every tenant-owned row carries its TMC so that ownership
 * checks are one indexed comparison. SQL is kept to what Postgres 15 (servers) and 18 (PGlite) share.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("tmcs", (t) => {
    t.uuid("id").primary();
    t.text("name").notNullable();
    t.integer("max_api_users")
      .notNullable()
      .defaultTo(5)
      .comment("Active API users allowed (spec 8); raised by the operator");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check("max_api_users >= 0", [], "tmcs_max_api_users_non_negative");
  });

  await knex.schema.createTable("companies", (t) => {
    t.uuid("id").primary().comment("The orgId of the API");
    t.uuid("tmc_id").notNullable().references("id").inTable("tmcs");
    t.text("name").notNullable();
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(["tmc_id"], "companies_tmc_id_idx");
  });

  await knex.schema.createTable("users", (t) => {
    t.uuid("id").primary();
    t.uuid("company_id").notNullable().references("id").inTable("companies");
    t.uuid("tmc_id")
      .notNullable()
      .references("id")
      .inTable("tmcs")
      .comment("Denormalised from the company for tenant checks");
    t.text("email").notNullable();
    t.text("email_normalized").notNullable().comment("lower(email): token exchange and SCIM match users by email");
    t.text("given_name").notNullable();
    t.text("family_name").notNullable();
    t.boolean("is_active").notNullable().defaultTo(true);
    t.text("external_id").nullable().comment("Partner-assigned id (SCIM externalId)");
    t.jsonb("profile").notNullable().defaultTo("{}").comment("The rest of the UserProfile document");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(["tmc_id", "email_normalized"], { indexName: "users_tmc_email_unique" });
    t.index(["company_id"], "users_company_id_idx");
  });
  await knex.raw(
    "create unique index users_tmc_external_id_unique on users (tmc_id, external_id) where external_id is not null",
  );

  await knex.schema.createTable("api_users", (t) => {
    t.text("client_id").primary().comment("Random; never reused, so revoked rows stay as tombstones");
    t.uuid("tmc_id").notNullable().references("id").inTable("tmcs");
    t.uuid("org_id").nullable().references("id").inTable("companies");
    t.text("role").notNullable();
    t.text("credential_type").notNullable();
    t.binary("secret_hash")
      .notNullable()
      .comment("HMAC-SHA-256 of the secret under the server pepper; never the secret");
    t.integer("credential_generation").notNullable().defaultTo(1).comment("Bumped on rotation; tokens carry it");
    t.text("created_by").nullable().comment("clientId of the creating admin, or 'operator'");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("rotated_at", { useTz: true }).nullable();
    t.timestamp("revoked_at", { useTz: true }).nullable().comment("Tombstone: set once, never cleared");
    t.check("role in ('TMC_ADMIN', 'COMPANY_ADMIN')", [], "api_users_role_known");
    t.check("credential_type in ('CLIENT_CREDENTIALS', 'SCIM_TOKEN')", [], "api_users_credential_type_known");
  });
  await knex.raw(
    "create index api_users_active_by_tmc_idx on api_users (tmc_id, created_at, client_id) where revoked_at is null",
  );

  await knex.schema.createTable("signing_keys", (t) => {
    t.text("kid").primary();
    t.text("alg").notNullable();
    t.jsonb("public_jwk").notNullable();
    t.text("private_jwk_ciphertext").notNullable().comment("AES-256-GCM under a key derived from MASTER_KEY");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("retired_at", { useTz: true }).nullable().comment("No longer signs; still verifies until not_after");
    t.timestamp("not_after", { useTz: true }).nullable().comment("After this no token it signed can be valid");
  });

  await knex.schema.createTable("audit_events", (t) => {
    t.bigIncrements("id").primary();
    t.timestamp("occurred_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.text("action").notNullable();
    t.text("outcome").notNullable();
    t.text("actor").nullable().comment("clientId of the caller, or 'operator'");
    t.uuid("tmc_id").nullable();
    t.text("target_client_id").nullable();
    t.text("debug_identifier").nullable();
    t.jsonb("details").notNullable().defaultTo("{}").comment("Never a secret or a token");
    t.index(["tmc_id", "occurred_at"], "audit_events_tmc_time_idx");
  });

  await knex.schema.createTable("payment_sources", (t) => {
    t.uuid("id").primary().comment("paymentSourceId of the air-credit API");
    t.uuid("company_id").notNullable().references("id").inTable("companies");
    t.text("fop_label").notNullable().comment("Form-of-payment label");
    t.text("card_company").nullable();
    t.text("card_last4").nullable();
    t.text("credit_usage_type").notNullable().defaultTo("PERSONAL");
    t.boolean("transferable").notNullable().defaultTo(true);
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(["company_id"], "payment_sources_company_id_idx");
  });

  await knex.schema.createTable("air_credits", (t) => {
    t.uuid("id").primary();
    t.uuid("company_id").notNullable().references("id").inTable("companies");
    t.uuid("payment_source_id").notNullable().references("id").inTable("payment_sources");
    t.uuid("traveler_user_id").nullable().references("id").inTable("users");
    t.text("supplier").notNullable();
    t.text("pcc").nullable().comment("Location code of the supplier account");
    t.text("airline_code").notNullable();
    t.text("ticket_number").notNullable();
    t.text("source_pnr").nullable();
    t.decimal("total_fare_amount", 12, 2).notNullable();
    t.text("currency_code").notNullable();
    t.date("issue_date").notNullable();
    t.date("expiry_date").notNullable();
    t.text("status").notNullable().defaultTo("OPEN");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(["company_id", "expiry_date"], "air_credits_company_expiry_idx");
    t.index(["payment_source_id"], "air_credits_payment_source_idx");
  });

  await knex.schema.createTable("service_settings", (t) => {
    t.text("key").primary();
    t.text("value").notNullable();
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    "service_settings",
    "air_credits",
    "payment_sources",
    "audit_events",
    "signing_keys",
    "api_users",
    "users",
    "companies",
    "tmcs",
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
}
