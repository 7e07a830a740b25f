import type { Knex } from "knex";
import { inLockedTransaction } from "../online-ddl.js";

/**
 * SCIM attributes the user profile has no place for (emails beyond the userName, phone numbers,
 * addresses, nickName, userType, locale, timezone, profileUrl, name.middleName and the honorifics),
 * kept as the IdP sent them so that what Entra ID and Okta write reads back. Additive and online:
 * a nullable column without a default is a catalogue change (no rewrite), under lock_timeout;
 * the previous version never reads it. Null: nothing sent yet (the userName stands in as the one
 * work email, as before).
 */
export async function up(knex: Knex): Promise<void> {
  await inLockedTransaction(knex, (trx) =>
    trx.schema.alterTable("users", (t) => {
      t.jsonb("scim_attributes")
        .nullable()
        .comment("SCIM attributes the profile has no place for, as the IdP sent them");
    }),
  );
}

export async function down(knex: Knex): Promise<void> {
  await inLockedTransaction(knex, (trx) =>
    trx.schema.alterTable("users", (t) => {
      t.dropColumn("scim_attributes");
    }),
  );
}
