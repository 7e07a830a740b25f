import type { Knex } from "knex";
import { inLockedTransaction } from "../online-ddl.js";

/**
 * A trusted issuer's registration number, raised by every registration (AddTrustedIssuer) of the
 * same issuer: the version of the issuer's key set held by URL, so registering an issuer again
 * drops, on every instance, the set held for the former registration (as a client's credential
 * generation does for its `jwks_uri`). A constant default: adding the column rewrites nothing.
 */
export async function up(knex: Knex): Promise<void> {
  await inLockedTransaction(knex, (trx) =>
    trx.schema.alterTable("trusted_issuers", (t) => {
      t.integer("registration")
        .notNullable()
        .defaultTo(1)
        .comment("Raised by every registration of the issuer: a key set held for an older one is not used");
    }),
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("trusted_issuers", (t) => t.dropColumn("registration"));
}
