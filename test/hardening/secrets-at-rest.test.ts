import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { internalsOf } from "../../src/app/test-access.js";
import { accessToken, callApi } from "../helpers/api.js";
import { newStorage } from "../helpers/backend.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";

/**
 * SECURITY-CHECKLIST item 1: every secret the service hands out (client secrets, the secret inside
 * a SCIM token, refresh tokens, access tokens) appears nowhere at rest: not in any table of the
 * database, in no encoding an attacker would try (as is, base64, base64url, hex, and the SHA-256
 * of each), and not in the log. A dump of every table is searched, so a new table or column that
 * stores one in the clear fails this test without anyone having to remember it.
 */
interface Issued {
  readonly label: string;
  readonly value: string;
}

/** The forms a leaked secret could take in a dump. */
function formsOf(secret: string): string[] {
  const bytes = Buffer.from(secret, "utf8");
  const sha = crypto.createHash("sha256").update(bytes).digest();
  return [
    secret,
    bytes.toString("base64"),
    bytes.toString("hex"),
    sha.toString("hex"),
    sha.toString("base64"),
    sha.toString("base64url"),
  ];
}

describe("no secret is stored or logged in any form", () => {
  let running: RunningService;
  const storage = newStorage();
  const issued: Issued[] = [];

  before(async () => {
    running = await startService({ storage, env: { LOG_LEVEL: "trace" } });
    const base = running.baseUrl;
    const { tmcId } = await operatorCall<{ tmcId: string }>(base, "CreateTmc", { name: "Dump TMC", maxApiUsers: 20 });
    const { orgId } = await operatorCall<{ orgId: string }>(base, "CreateCompany", { tmcId, name: "Dump company" });
    const admin = await operatorCall<{ clientId: string; clientSecret: string }>(base, "CreateApiUser", { tmcId });
    issued.push({ label: "operator-created client secret", value: admin.clientSecret });
    const token = await accessToken(base, admin.clientId, admin.clientSecret);
    issued.push({ label: "access token", value: token });

    const user = (await (await callApi(base, "/v2/api-users", token, {})).json()) as {
      clientId: string;
      clientSecret: string;
    };
    issued.push({ label: "created client secret", value: user.clientSecret });
    const rotated = (await (
      await callApi(base, "/v2/api-users/rotate", token, { clientId: user.clientId })
    ).json()) as { clientSecret: string };
    issued.push({ label: "rotated client secret", value: rotated.clientSecret });
    const scim = (await (
      await callApi(base, "/v2/api-users", token, { orgId, role: "COMPANY_ADMIN", credentialType: "SCIM_TOKEN" })
    ).json()) as { scimToken: string };
    issued.push({ label: "SCIM token", value: scim.scimToken });
    const envelope = JSON.parse(Buffer.from(scim.scimToken, "base64").toString("utf8")) as { encryptedSecret: string };
    issued.push({ label: "SCIM token's sealed secret", value: envelope.encryptedSecret });

    // A refresh token comes with a token exchange of our own token.
    const exchange = await fetch(`${base}/v2/auth/oauth2-token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
        client_id: admin.clientId,
        client_secret: admin.clientSecret,
        subject_token: token,
        subject_token_type: "urn:ietf:params:oauth:token-type:access_token",
      }),
    });
    const exchanged = (await exchange.json()) as { access_token?: string; refresh_token?: string };
    assert.equal(exchange.status, 200, JSON.stringify(exchanged));
    assert.ok(exchanged.refresh_token, "the exchange answers with a refresh token");
    issued.push({ label: "exchanged access token", value: exchanged.access_token! });
    issued.push({ label: "refresh token", value: exchanged.refresh_token! });
    // Let the batched token audit trail reach the database before the dump.
    await running.service.close();
  });
  after(async () => {
    await dropStorage(storage);
  });

  test("a dump of every table and the whole log hold none of the issued secrets", async () => {
    // Reopen the same storage (the instance above is closed, its buffers flushed) and dump it.
    const reopened = await startService({ storage, listen: false });
    try {
      const db = internalsOf(reopened.service).db;
      const tables = (await db("information_schema.tables")
        .select("table_name")
        .whereRaw("table_schema = current_schema()")
        .andWhere("table_type", "BASE TABLE")) as Array<{ table_name: string }>;
      assert.ok(tables.length >= 8, `found the service's tables: ${tables.map((t) => t.table_name).join(", ")}`);
      let dump = "";
      let rows = 0;
      for (const { table_name } of tables) {
        const result = (await db.raw(`select row_to_json(t)::text as row from "${table_name}" t`)) as {
          rows: Array<{ row: string }>;
        };
        rows += result.rows.length;
        dump += result.rows.map((r) => r.row).join("\n");
      }
      assert.ok(rows > 10, `the dump holds the created rows (${rows})`);
      const log = running.logs();
      assert.ok(log.length > 1000, "the log was captured");
      for (const { label, value } of issued) {
        for (const form of formsOf(value)) {
          assert.ok(!dump.includes(form), `the ${label} is in the database dump (as ${form.slice(0, 12)}…)`);
          assert.ok(!log.includes(form), `the ${label} is in the log (as ${form.slice(0, 12)}…)`);
        }
      }
    } finally {
      await reopened.stop();
    }
  });

  test("the search itself finds a secret stored in the clear", async () => {
    // The check above must be able to fail: plant a secret in a column and look again.
    const reopened = await startService({ storage, listen: false });
    try {
      const db = internalsOf(reopened.service).db;
      const planted = issued[2]!.value;
      await db.raw("create table planted_leak (value text)");
      await db("planted_leak").insert({ value: Buffer.from(planted).toString("base64") });
      const result = (await db.raw(`select row_to_json(t)::text as row from "planted_leak" t`)) as {
        rows: Array<{ row: string }>;
      };
      const dump = result.rows.map((r) => r.row).join("\n");
      assert.ok(formsOf(planted).some((form) => dump.includes(form)));
      await db.raw("drop table planted_leak");
    } finally {
      await reopened.stop();
    }
  });
});
