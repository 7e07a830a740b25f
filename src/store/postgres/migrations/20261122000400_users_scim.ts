import type { Knex } from "knex";

/**
 * SCIM provisioning on the `users` table:
 * - userName (email_normalized) and externalId become unique per company, not per TMC: a company
 *   provisions its users without learning about another company's; token exchange by email
 *   refuses an email that names more than one active user of the TMC;
 * - SCIM DELETE deactivates and hides a user from SCIM (`scim_deleted_at`); the uniqueness holds
 *   among the users SCIM sees, so a deleted user's userName can be provisioned again;
 * - indexes for each supported filter within a company: userName eq / sw (text_pattern_ops serves
 *   `=` and the `LIKE 'prefix%'` of sw), externalId eq, and paging by (created_at, id).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("users", (t) => {
    t.timestamp("scim_deleted_at", { useTz: true })
      .nullable()
      .comment("Set by SCIM DELETE: the user is inactive and no longer visible over SCIM");
  });
  await knex.raw("alter table users drop constraint if exists users_tmc_email_unique");
  await knex.raw("drop index if exists users_tmc_email_unique");
  await knex.raw("drop index if exists users_tmc_external_id_unique");
  await knex.raw("create index users_tmc_email_idx on users (tmc_id, email_normalized)");
  await knex.raw(
    "create unique index users_company_email_unique on users (company_id, email_normalized text_pattern_ops) where scim_deleted_at is null",
  );
  await knex.raw(
    "create unique index users_company_external_id_unique on users (company_id, external_id) where external_id is not null and scim_deleted_at is null",
  );
  await knex.raw(
    "create index users_company_created_idx on users (company_id, created_at, id) where scim_deleted_at is null",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("drop index if exists users_company_created_idx");
  await knex.raw("drop index if exists users_company_external_id_unique");
  await knex.raw("drop index if exists users_company_email_unique");
  await knex.raw("drop index if exists users_tmc_email_idx");
  await knex.raw(
    "create unique index users_tmc_external_id_unique on users (tmc_id, external_id) where external_id is not null",
  );
  await knex.raw("alter table users add constraint users_tmc_email_unique unique (tmc_id, email_normalized)");
  await knex.schema.alterTable("users", (t) => t.dropColumn("scim_deleted_at"));
}
