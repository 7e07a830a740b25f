import type { Knex } from "knex";

/**
 * Air-credit dates become instants: the reference types issueDate,
 * expiryDate, usedDate and departureDate as DateTimeOffset, and an import that says
 * 2030-12-31T23:30:00-05:00 means 2031-01-01T04:30:00Z, which a DATE column cut to 2030-12-31.
 * timestamptz keeps the instant (in UTC); an existing date becomes its midnight UTC, the day it
 * named. The indexes on these columns are rebuilt by the type change.
 */
const COLUMNS = ["issue_date", "expiry_date", "used_date", "departure_date"];

export async function up(knex: Knex): Promise<void> {
  const changes = COLUMNS.map((c) => `ALTER COLUMN ${c} TYPE timestamptz USING (${c}::timestamp AT TIME ZONE 'UTC')`);
  await knex.raw(`ALTER TABLE air_credits ${changes.join(", ")}`);
}

export async function down(knex: Knex): Promise<void> {
  const changes = COLUMNS.map((c) => `ALTER COLUMN ${c} TYPE date USING ((${c} AT TIME ZONE 'UTC')::date)`);
  await knex.raw(`ALTER TABLE air_credits ${changes.join(", ")}`);
}
