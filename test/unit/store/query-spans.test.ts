import assert from "node:assert/strict";
import { test } from "node:test";
import { tableOf } from "../../../src/store/postgres/query-spans.js";

// A query span is named `<operation> <table>` (OpenTelemetry's database conventions) from the
// statement's first table: these are the statement shapes the repositories send.
test("tableOf: the first table a statement names, past subqueries, schema prefixes and function calls", () => {
  const cases: Array<[string, string | undefined]> = [
    ['select "client_id" from "api_users" where "tmc_id" = $1', "api_users"],
    ['insert into "audit_events" ("action", "actor") values ($1, $2)', "audit_events"],
    [
      "insert into audit_events\n  (occurred_at, action)\nselect occurred_at from json_to_recordset(?::json) as r",
      "audit_events",
    ],
    ['update "t_1"."api_users" set "credential_generation" = $1', "api_users"],
    ['delete from "revoked_access_tokens" where "expires_at" < $1', "revoked_access_tokens"],
    [
      'select "page".*, "total"."page_total" from (select count(*) as "page_total" from "api_users") as "total"',
      "api_users",
    ],
    ['select * from unnest($1::text[]) as u join "users" on true', "users"],
    ["with x as (select max(seq) from credential_changes) select * from x", "credential_changes"],
    [
      "with batch as (select * from json_to_recordset(?::json) as r(a text)), inserted as (insert into audit_events (a) select a from batch) select 1",
      "audit_events",
    ],
    ["select extract(epoch from now()) as t", undefined],
    ["select pg_advisory_xact_lock($1)", undefined],
    ["select 1", undefined],
  ];
  for (const [sql, table] of cases) assert.equal(tableOf(sql), table, sql);
});
