import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { credentialKey } from "../../src/store/redis/credential-keys.js";
import { accessToken, callApi } from "../helpers/api.js";
import { isPostgres, newStorage } from "../helpers/backend.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";

/**
 * Issue 8, failure 1: a Redis that restarted from its snapshot brought revoked tokens back (348
 * of 348 requests accepted over 20 s, on both instances). Postgres numbers every credential
 * change and every instance hears of it; a cache whose watermark is behind is never believed.
 */
describe(
  "revocation survives any Redis data loss",
  { skip: !isPostgres && "the embedded default has no Redis to lose" },
  () => {
    const storage = newStorage();
    let redis: PrivateRedis;
    let proxy: TcpProxy;
    let a: RunningService;
    let b: RunningService;
    let admin: string;

    before(async () => {
      redis = await startPrivateRedis();
      // A reaches Redis through a proxy the test can cut; B directly.
      proxy = await startTcpProxy(redis.port);
      const env = {
        REDIS_URL: redis.url,
        REDIS_RECONNECT_MAX_DELAY_MS: "100",
        TOKEN_RATE_LIMIT_PER_ADDRESS: "100000/60",
        TOKEN_RATE_LIMIT_PER_CLIENT: "100000/60",
      };
      [a, b] = await Promise.all([
        startService({ storage, env: { ...env, REDIS_URL: `redis://127.0.0.1:${proxy.port}` } }),
        startService({ storage, env }),
      ]);
      const seed = await operatorCall<{ clientId: string; clientSecret: string }>(a.baseUrl, "Seed", {});
      admin = await accessToken(a.baseUrl, seed.clientId, seed.clientSecret);
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await proxy?.close();
      await redis?.stop();
      await dropStorage(storage);
    });

    async function newClientToken() {
      const created = (await (await callApi(a.baseUrl, "/v2/api-users", admin, {})).json()) as {
        clientId: string;
        clientSecret: string;
      };
      const token = await accessToken(b.baseUrl, created.clientId, created.clientSecret);
      for (const instance of [a, b])
        assert.equal(
          (await callApi(instance.baseUrl, "/v2/api-users?limit=1", token)).status,
          200,
          "cached as valid on both",
        );
      return { clientId: created.clientId, token };
    }

    async function waitForRedis(instance: RunningService) {
      for (let i = 0; i < 100; i++) {
        const ready = (await (await fetch(`${instance.baseUrl}/readyz`)).json()) as { checks?: { redis?: string } };
        if (ready.checks?.redis === "up") return;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.fail("the instance did not reconnect to Redis");
    }

    test("snapshot, revoke, kill -9 Redis and restart it from the snapshot: 0 wrong accepts on both instances", async () => {
      const { clientId, token } = await newClientToken();
      await redis.snapshot();
      assert.equal((await callApi(a.baseUrl, "/v2/api-users/revoke", admin, { clientId })).status, 204);
      await redis.crashAndRestart();
      const restored = String(await redis.command(["KEYS", "*cred:*"]));
      assert.ok(restored.length > 0, "the snapshot brought credential keys back");
      await Promise.all([waitForRedis(a), waitForRedis(b)]);

      let wrongAccepts = 0;
      let refused = 0;
      const until = Date.now() + 3_000;
      while (Date.now() < until) {
        for (const instance of [a, b]) {
          const status = (await callApi(instance.baseUrl, "/v2/api-users?limit=1", token)).status;
          if (status === 200) wrongAccepts++;
          else if (status === 401) refused++;
        }
      }
      assert.equal(wrongAccepts, 0, `wrong accepts after the restore (${refused} refused)`);
      assert.ok(refused > 20);
      // The instances repaired the cache: it now holds the revocation and a watermark covering it.
      const value = String(await redis.command(["GET", credentialKey(keyPrefixOf(b), clientId)]));
      assert.match(value, /^r:\d+$/);
    });

    test("FLUSHALL: revoked tokens stay revoked", async () => {
      const { clientId, token } = await newClientToken();
      assert.equal((await callApi(b.baseUrl, "/v2/api-users/revoke", admin, { clientId })).status, 204);
      await redis.command(["FLUSHALL"]);
      for (let i = 0; i < 20; i++) {
        for (const instance of [a, b])
          assert.equal((await callApi(instance.baseUrl, "/v2/api-users?limit=1", token)).status, 401);
      }
    });

    test("a revocation through an instance cut off from Redis is refused on the other within one second (issue 8: 0.8 s, 34 wrong accepts)", async () => {
      const { clientId, token } = await newClientToken();
      await proxy.cut();
      try {
        const response = await callApi(a.baseUrl, "/v2/api-users/revoke", admin, { clientId });
        const answeredAt = Date.now();
        assert.equal(response.status, 204);
        let wrongAccepts = 0;
        let firstRefusalMs: number | undefined;
        while (Date.now() - answeredAt < 1_500) {
          const status = (await callApi(b.baseUrl, "/v2/api-users?limit=1", token)).status;
          if (status === 200) {
            assert.equal(firstRefusalMs, undefined, "once refused, refused for good");
            wrongAccepts++;
          } else {
            assert.equal(status, 401);
            firstRefusalMs ??= Date.now() - answeredAt;
          }
        }
        assert.ok(firstRefusalMs !== undefined && firstRefusalMs < 1_000, `refused on B after ${firstRefusalMs} ms`);
        assert.equal(wrongAccepts, 0, "B heard of the change before the revocation was answered");
        assert.equal(
          (await callApi(a.baseUrl, "/v2/api-users?limit=1", token)).status,
          401,
          "A, without Redis, asks Postgres",
        );
      } finally {
        await proxy.restore();
      }
    });
  },
);

function keyPrefixOf(instance: RunningService): string {
  return `test:${instance.storage.dataDir.split("/").pop()}:`;
}
