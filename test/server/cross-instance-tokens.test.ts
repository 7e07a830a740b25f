import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { accessToken, callApi, fetchToken } from "../helpers/api.js";
import { createClient, type RedisClientType } from "redis";
import { credentialKey as credentialKeyOf } from "../../src/store/redis/credential-keys.js";
import { isPostgres, newStorage, redisKeyPrefixOf, TEST_REDIS_URL, type Storage } from "../helpers/backend.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";
import { waitFor } from "../helpers/wait.js";

// Several instances share state only through Postgres and Redis: the embedded default is one instance.
describe(
  "tokens across two instances on one Postgres and Redis",
  { skip: !isPostgres && "needs a shared Postgres and Redis" },
  () => {
    let storage: Storage;
    let a: RunningService;
    let b: RunningService;
    let admin: { clientId: string; clientSecret: string };
    before(async () => {
      storage = newStorage();
      [a, b] = await Promise.all([startService({ storage }), startService({ storage })]);
      admin = await operatorCall(a.baseUrl, "Seed", {});
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      if (storage) await dropStorage(storage);
    });

    test("a token from A works on B; after rotation through B, A refuses it on the very next request", async () => {
      const adminOnB = await accessToken(b.baseUrl, admin.clientId, admin.clientSecret);
      const created = (await (await callApi(b.baseUrl, "/v2/api-users", adminOnB, {})).json()) as {
        clientId: string;
        clientSecret: string;
      };
      const fromA = await accessToken(a.baseUrl, created.clientId, created.clientSecret);
      assert.equal((await callApi(b.baseUrl, "/v2/api-users", fromA)).status, 200, "A's token works on B");
      assert.equal((await callApi(a.baseUrl, "/v2/api-users", fromA)).status, 200, "and on A, so A has it cached");

      const rotated = await callApi(b.baseUrl, "/v2/api-users/rotate", adminOnB, { clientId: created.clientId });
      assert.equal(rotated.status, 200);
      const { clientSecret: newSecret } = (await rotated.json()) as { clientSecret: string };

      const refused = await callApi(a.baseUrl, "/v2/api-users", fromA);
      assert.equal(refused.status, 401);
      assert.equal(((await refused.json()) as any).errorMessages[0].message, "The access token has been revoked");
      assert.equal(
        (await fetchToken(a.baseUrl, created.clientId, created.clientSecret)).status,
        403,
        "the old secret is dead on A",
      );
      const renewed = await accessToken(a.baseUrl, created.clientId, newSecret);
      assert.equal((await callApi(b.baseUrl, "/v2/api-users", renewed)).status, 200, "the new secret works everywhere");
    });

    test("after revocation through B, A refuses every token of that API user at once", async () => {
      const adminOnA = await accessToken(a.baseUrl, admin.clientId, admin.clientSecret);
      const created = (await (await callApi(a.baseUrl, "/v2/api-users", adminOnA, {})).json()) as {
        clientId: string;
        clientSecret: string;
      };
      const tokens = await Promise.all([
        accessToken(a.baseUrl, created.clientId, created.clientSecret),
        accessToken(b.baseUrl, created.clientId, created.clientSecret),
      ]);
      for (const token of tokens) assert.equal((await callApi(a.baseUrl, "/v2/api-users", token)).status, 200);

      const adminOnB = await accessToken(b.baseUrl, admin.clientId, admin.clientSecret);
      assert.equal(
        (await callApi(b.baseUrl, "/v2/api-users/revoke", adminOnB, { clientId: created.clientId })).status,
        204,
      );
      for (const token of tokens) {
        assert.equal((await callApi(a.baseUrl, "/v2/api-users", token)).status, 401);
        assert.equal((await callApi(b.baseUrl, "/v2/api-users", token)).status, 401);
      }
      assert.equal((await fetchToken(a.baseUrl, created.clientId, created.clientSecret)).status, 403);
    });
  },
);

describe("with Redis unreachable", { skip: !isPostgres && "the embedded default has no Redis to lose" }, () => {
  let proxy: TcpProxy;
  let running: RunningService;
  let admin: { clientId: string; clientSecret: string };
  /** The test's own look at Redis (directly, not through the proxy the service uses). */
  let redis: RedisClientType;
  before(async () => {
    proxy = await startTcpProxy(Number(new URL(TEST_REDIS_URL).port || 6379), new URL(TEST_REDIS_URL).hostname);
    running = await startService({
      env: {
        REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
        // Short intervals instead of waiting out the defaults: the test polls for what it awaits.
        CREDENTIAL_RECONCILE_INTERVAL_MS: "50",
        REDIS_RECONNECT_MAX_DELAY_MS: "100",
        REDIS_BREAKER_OPEN_MS: "100",
      },
    });
    admin = await operatorCall(running.baseUrl, "Seed", {});
    redis = createClient({ url: TEST_REDIS_URL });
    redis.on("error", () => {});
    await redis.connect();
  });
  after(async () => {
    if (redis?.isOpen) await redis.close();
    await running?.stop();
    await proxy?.close();
    if (running) await dropStorage(running.storage);
  });

  /** Where the service caches a client's credential state in Redis (src/store/redis/generation-cache.ts). */
  const credentialKey = (clientId: string) => credentialKeyOf(redisKeyPrefixOf(running.storage), clientId);

  test("a revoked token stays refused, issuance goes on under the fallback limiter, and Redis catches up on return", async () => {
    const adminToken = await accessToken(running.baseUrl, admin.clientId, admin.clientSecret);
    const created = (await (await callApi(running.baseUrl, "/v2/api-users", adminToken, {})).json()) as {
      clientId: string;
      clientSecret: string;
    };
    const victim = await accessToken(running.baseUrl, created.clientId, created.clientSecret);
    // Wait until Redis is believed and holds the victim's valid credential state: the stale value a
    // partition would leave behind.
    const stale = await waitFor(
      "Redis to hold the victim's credential state",
      async () =>
        (await callApi(running.baseUrl, "/v2/api-users", victim)).status === 200 &&
        (await redis.get(credentialKey(created.clientId))),
    );
    assert.equal((await callApi(running.baseUrl, "/v2/api-users", victim)).status, 200);

    await proxy.cut();
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users/revoke", adminToken, { clientId: created.clientId })).status,
      204,
    );
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users", victim)).status,
      401,
      "refused from Postgres, never accepted",
    );
    const issued = await fetchToken(running.baseUrl, admin.clientId, admin.clientSecret);
    assert.equal(issued.status, 200, "issuance still works");
    assert.ok(issued.headers.get("ratelimit"), "and is still rate limited (in memory)");
    const metrics = await (await fetch(`${running.baseUrl}/metrics`)).text();
    assert.match(metrics, /rate_limiter_fallbacks_total [1-9]/);
    assert.match(metrics, /credential_state_redis_fallbacks_total\{operation="write"\} [1-9]/);

    assert.equal(await redis.get(credentialKey(created.clientId)), stale, "Redis still holds the victim's old state");

    await proxy.restore();
    // Redis still holds the victim's old state until the service republishes the revocation: every
    // request until then, and after, is refused.
    await waitFor(
      "the revocation to be republished to Redis",
      async () => {
        assert.equal(
          (await callApi(running.baseUrl, "/v2/api-users", victim)).status,
          401,
          "never accepted while Redis comes back",
        );
        const state = await redis.get(credentialKey(created.clientId));
        return state !== null && state !== stale;
      },
      { timeoutMs: 15_000 },
    );
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users", victim)).status,
      401,
      "refused once Redis is back and trusted again",
    );
  });
});
