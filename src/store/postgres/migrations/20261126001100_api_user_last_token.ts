import type { Knex } from "knex";
import { inLockedTransaction } from "../online-ddl.js";

/** The backfill commits slice by slice: no long transaction, nothing held across the trail. */
export const config = { transaction: false };

/** API users per backfill transaction. */
const SLICE = 500;

/**
 * When each API user last got a token, kept beside it: the operator's api-user list
 * read it from the audit trail, a scan that grows with the trail. The audit flush raises it once
 * per batch (greatest(): never backwards). A table of its own rather than a column of api_users:
 * the flush would take a row lock on the user every 250 ms while it gets tokens, and a rotation or
 * revocation locks that row with NOWAIT, so it would be refused (409) whenever the two met; and
 * api_users, read by every token request, keeps no churn of row versions. No foreign key for the
 * same reason (its check locks the user's row); users are never deleted (tombstones).
 *
 * Backfilled here online from the trail, a slice of users per short statement in client_id order.
 */
export async function up(knex: Knex): Promise<void> {
  await inLockedTransaction(knex, (trx) =>
    trx.schema.createTable("api_user_token_activity", (t) => {
      t.text("client_id").primary().comment("api_users.client_id (no foreign key: its check would lock the user)");
      t.uuid("tmc_id").notNullable().comment("The user's tenant: reads match it as well");
      t.timestamp("last_token_issued_at", { useTz: true })
        .notNullable()
        .comment("Newest TOKEN_ISSUED audit event of the client; raised per audit batch, never lowered");
    }),
  );
  let after = "";
  for (;;) {
    const { rows } = (await knex.raw(
      `with slice as (select client_id, tmc_id from api_users where client_id > ? order by client_id limit ?),
            raised as (
              insert into api_user_token_activity (client_id, tmc_id, last_token_issued_at)
              select s.client_id, s.tmc_id, issued.at
                from slice s
                cross join lateral (
                  select max(e.occurred_at) as at from audit_events e
                   where e.tmc_id = s.tmc_id and e.target_client_id = s.client_id and e.action = 'TOKEN_ISSUED') issued
               where issued.at is not null
               order by s.client_id
              on conflict (client_id) do update
                set last_token_issued_at = greatest(api_user_token_activity.last_token_issued_at, excluded.last_token_issued_at))
       select max(client_id) as last from slice`,
      [after, SLICE],
    )) as { rows: Array<{ last: string | null }> };
    if (!rows[0]?.last) break;
    after = rows[0].last;
  }
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("api_user_token_activity");
}
