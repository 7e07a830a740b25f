import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { internalsOf } from "../../src/app/test-access.js";
import { fetchToken } from "../helpers/api.js";
import { dropStorage, operatorCall, startService } from "../helpers/service.js";

describe("token events in the audit trail", () => {
  test("issued, refused and rate-limited token requests are recorded, never with a secret", async () => {
    const running = await startService({ env: { TOKEN_RATE_LIMIT_PER_CLIENT: "2/60" } });
    try {
      const seed = await operatorCall<{ tmcId: string; clientId: string; clientSecret: string }>(
        running.baseUrl,
        "Seed",
        {},
      );
      assert.equal((await fetchToken(running.baseUrl, seed.clientId, seed.clientSecret)).status, 200);
      assert.equal((await fetchToken(running.baseUrl, seed.clientId, "wrong-secret-value")).status, 403);
      // Only an authenticated request spends the client's own budget (2 per minute): the refused one did not.
      assert.equal((await fetchToken(running.baseUrl, seed.clientId, seed.clientSecret)).status, 200);
      assert.equal((await fetchToken(running.baseUrl, seed.clientId, seed.clientSecret)).status, 429);
      // Stopping flushes the buffer: read what reached the database through a second instance.
      await running.stop();
      const reader = await startService({ storage: running.storage });
      try {
        const { events } = await operatorCall<{ events: Array<Record<string, any>> }>(
          reader.baseUrl,
          "ListAuditEvents",
          { tmcId: seed.tmcId },
        );
        const actions = events.map((e) => e.action);
        assert.ok(actions.includes("TOKEN_ISSUED") && actions.includes("API_USER_CREATE"), actions.join());
        const all = await internalsOf(reader.service)
          .db("audit_events")
          .select("action", "outcome", "actor", "details");
        const refused = all.filter((e: { action: string }) => e.action === "TOKEN_REFUSED");
        assert.equal(refused.length, 1);
        assert.equal(refused[0].actor, seed.clientId);
        assert.equal(refused[0].details.errorCode, "INVALID_CLIENT");
        assert.equal(
          all.filter(
            (e: { action: string; outcome: string }) =>
              e.action === "TOKEN_RATE_LIMITED" && e.outcome === "RATE_LIMITED",
          ).length,
          1,
        );
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
