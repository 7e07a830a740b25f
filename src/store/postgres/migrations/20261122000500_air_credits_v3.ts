import type { Knex } from "knex";

/**
 * Air credits v3: every UnusedCreditInfo field the list and the migration use, kept on
 * the credit row itself (denormalised from its payment source, so a list page is one index scan),
 * one credit per ticket number per company, and indexes for the list's filters.
 *
 * Amounts stay NUMERIC (never floats), widened to three decimals for currencies with three
 * minor-unit digits (KWD, BHD, ...).
 */
/** Columns with an index of their own over the transferable credits. */
const INDEXED = ["fop_label", "pcc", "legal_entity_name", "airline_code", "supplier"];

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("air_credits", (t) => {
    t.text("spotnana_pnr").nullable();
    t.text("airline_name").nullable();
    t.date("departure_date").nullable();
    t.date("used_date").nullable();
    t.jsonb("passenger_name").nullable().comment("Reference Name object (given, family1, ...)");
    t.text("email").nullable().comment("Email of the passenger owning the credit");
    t.text("departure_country").nullable();
    t.text("arrival_country").nullable();
    t.text("segments_available").nullable();
    t.text("ticket_type").notNullable().defaultTo("ETICKET");
    t.text("source").notNullable().defaultTo("SABRE").comment("ThirdPartySource");
    t.text("trip_id").nullable();
    t.text("redeem_via").nullable();
    t.text("source_of_truth").nullable();
    t.text("owning_pcc").nullable();
    t.text("credit_usage_type")
      .notNullable()
      .defaultTo("PERSONAL")
      .comment("PERSONAL or COMPANY: the truth, changed by MigrateCompanyCredits");
    t.text("fop_label").nullable();
    t.text("fop_card_access_type").nullable();
    t.jsonb("fop_info").nullable().comment("Reference UnusedCreditFop object, card number masked");
    t.text("previous_ticket").nullable();
    t.text("legal_entity_name").nullable();
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw("ALTER TABLE air_credits ALTER COLUMN total_fare_amount TYPE numeric(15, 3)");
  // Existing rows take their usage type and label from their payment source.
  await knex.raw(
    "UPDATE air_credits AS c SET credit_usage_type = p.credit_usage_type, fop_label = p.fop_label FROM payment_sources AS p WHERE p.id = c.payment_source_id",
  );
  await knex.schema.alterTable("air_credits", (t) => {
    t.unique(["company_id", "ticket_number"], { indexName: "air_credits_company_ticket_key" });
  });
  // The list: a company's open, non-company credits in (expiry date, ticket number) order.
  // Every index carries the filtered columns and the row id, so counting the matches of any
  // filter combination, and finding a page's rows, reads the index alone.
  const including = (key: string) =>
    `INCLUDE (${["id", ...INDEXED, "fop_card_access_type"].filter((c) => c !== key).join(", ")})`;
  await knex.raw(
    `CREATE INDEX air_credits_transferable_idx ON air_credits (company_id, expiry_date, ticket_number) ${including("")} WHERE status = 'OPEN' AND credit_usage_type <> 'COMPANY'`,
  );
  // The distinct-value lists (loose index scans) and the equality filters.
  for (const column of INDEXED) {
    await knex.raw(
      `CREATE INDEX air_credits_transferable_${column}_idx ON air_credits (company_id, ${column}, expiry_date) ${including(column)} WHERE status = 'OPEN' AND credit_usage_type <> 'COMPANY'`,
    );
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const column of INDEXED) {
    await knex.raw(`DROP INDEX IF EXISTS air_credits_transferable_${column}_idx`);
  }
  await knex.raw("DROP INDEX IF EXISTS air_credits_transferable_idx");
  await knex.schema.alterTable("air_credits", (t) => {
    t.dropUnique(["company_id", "ticket_number"], "air_credits_company_ticket_key");
  });
  await knex.raw("ALTER TABLE air_credits ALTER COLUMN total_fare_amount TYPE numeric(12, 2)");
  await knex.schema.alterTable("air_credits", (t) => {
    for (const column of [
      "spotnana_pnr",
      "airline_name",
      "departure_date",
      "used_date",
      "passenger_name",
      "email",
      "departure_country",
      "arrival_country",
      "segments_available",
      "ticket_type",
      "source",
      "trip_id",
      "redeem_via",
      "source_of_truth",
      "owning_pcc",
      "credit_usage_type",
      "fop_label",
      "fop_card_access_type",
      "fop_info",
      "previous_ticket",
      "legal_entity_name",
      "updated_at",
    ]) {
      t.dropColumn(column);
    }
  });
}
