import type { Knex } from "knex";

/**
 * SCIM name.formatted and displayName: stored as the IdP sends them instead of being
 * derived from the name, so what Entra ID and Okta write reads back. Existing users keep what
 * SCIM showed them until now ("givenName familyName", nothing when both are empty).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("users", (t) => {
    t.text("display_name").nullable().comment("SCIM displayName, as the IdP set it");
    t.text("name_formatted").nullable().comment("SCIM name.formatted, as the IdP set it");
  });
  await knex.raw(
    "update users set display_name = nullif(trim(given_name || ' ' || family_name), ''), name_formatted = nullif(trim(given_name || ' ' || family_name), '')",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("users", (t) => {
    t.dropColumn("name_formatted");
    t.dropColumn("display_name");
  });
}
