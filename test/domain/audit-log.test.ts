import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import pino from "pino";
import { Counter, Registry } from "prom-client";
import { AuditLog } from "../../src/domain/audit/audit-log.js";
import { openDatabase, type Database } from "../../src/store/database.js";
import { fetchToken } from "../helpers/api.js";
import { newStorage } from "../helpers/backend.js";
import { dropStorage, operatorCall, startService } from "../helpers/service.js";

function counters() {
  const registry = new Registry();
  const make = (name: string) => new Counter({ name, help: name, registers: [registry] });
  return { written: make("w"), writeFailures: make("f"), dropped: make("d") };
}
const valueOf = async (c: Counter) => (await c.get()).values[0]?.value ?? 0;

describe("audit log batching", () => {
  const storage = newStorage();
  let database: Database;
  after(async () => {
    await database?.close();
    await dropStorage(storage);
  });

  test("a failed write is retried and counted; close writes what is left, so nothing is lost", async () => {
    database = openDatabase({ databaseUrl: storage.env.DATABASE_URL, dataDir: storage.dataDir, schema: storage.schema ?? "public" });
    if (storage.schema) await database.db.raw(`create schema if not exists "${storage.schema}"`);
    const metrics = counters();
    // Before migrations the table does not exist: every write fails.
    const log = new AuditLog(database.db, pino({ level: "silent" }), metrics, { flushIntervalMs: 20, batchSize: 2, maxBuffered: 100 });
    for (let i = 0; i < 5; i++) {
      log.record({ action: "TOKEN_ISSUED", outcome: "SUCCESS", actor: `c${i}`, tmcId: null, targetClientId: null, debugIdentifier: `r${i}` });
    }
    // The embedded database takes a moment to open: wait for the first failed write.
    for (let i = 0; i < 200 && (await valueOf(metrics.writeFailures)) === 0; i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok((await valueOf(metrics.writeFailures)) >= 1, "write failures are counted");
    assert.equal(await valueOf(metrics.written), 0);

    await database.migrate();
    await log.close();
    assert.equal(await valueOf(metrics.written), 5);
    assert.equal(await valueOf(metrics.dropped), 0);
    const rows = await database.db("audit_events").orderBy("id").select("actor");
    assert.deepEqual(rows.map((r) => r.actor), ["c0", "c1", "c2", "c3", "c4"]);
  });
});

describe("token events in the audit trail", () => {
  test("issued, refused and rate-limited token requests are recorded, never with a secret", async () => {
    const running = await startService({ env: { TOKEN_RATE_LIMIT_PER_CLIENT: "2/60" } });
    try {
      const seed = await operatorCall<{ tmcId: string; clientId: string; clientSecret: string }>(running.baseUrl, "Seed", {});
      assert.equal((await fetchToken(running.baseUrl, seed.clientId, seed.clientSecret)).status, 200);
      assert.equal((await fetchToken(running.baseUrl, seed.clientId, "wrong-secret-value")).status, 403);
      assert.equal((await fetchToken(running.baseUrl, seed.clientId, seed.clientSecret)).status, 429);
      // Stopping flushes the buffer: read what reached the database through a second instance.
      await running.stop();
      const reader = await startService({ storage: running.storage });
      try {
        const { events } = await operatorCall<{ events: Array<Record<string, any>> }>(reader.baseUrl, "ListAuditEvents", { tmcId: seed.tmcId });
        const actions = events.map((e) => e.action);
        assert.ok(actions.includes("TOKEN_ISSUED") && actions.includes("API_USER_CREATE"), actions.join());
        const all = await reader.service.database.db("audit_events").select("action", "outcome", "actor", "details");
        const refused = all.filter((e) => e.action === "TOKEN_REFUSED");
        assert.equal(refused.length, 1);
        assert.equal(refused[0].actor, seed.clientId);
        assert.equal(refused[0].details.errorCode, "INVALID_CLIENT");
        assert.equal(all.filter((e) => e.action === "TOKEN_RATE_LIMITED" && e.outcome === "RATE_LIMITED").length, 1);
        const text = JSON.stringify(all);
        assert.equal(text.includes(seed.clientSecret), false);
        assert.equal(text.includes("wrong-secret-value"), false);
      } finally {
        await reader.stop();
      }
    } finally {
      await running.stop();
      await dropStorage(running.storage);
    }
  });
});
