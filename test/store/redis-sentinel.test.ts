import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { credentialKey } from "../../src/store/redis/credential-keys.js";
import { accessToken, callApi } from "../helpers/api.js";
import { isPostgres, newStorage, redisKeyPrefixOf } from "../helpers/backend.js";
import {
  SENTINEL_NAME,
  startPrivateRedisSentinel,
  type PrivateRedisSentinel,
} from "../helpers/private-redis-sentinel.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";

/**
 * REDIS_MODE=sentinel. One instance through a private sentinel: the revocation
 * lands on the primary the sentinel names; the primary killed, the sentinel promotes the replica
 * and the instance follows it, refusing the revoked token throughout.
 */
describe("Redis Sentinel", { skip: !isPostgres && "the embedded default has no Redis", timeout: 60_000 }, () => {
  const storage = newStorage();
  let redis: PrivateRedisSentinel;
  let service: RunningService;
  let admin: string;

  before(async () => {
    redis = await startPrivateRedisSentinel();
    service = await startService({
      storage,
      env: {
        REDIS_MODE: "sentinel",
        REDIS_URL: redis.url,
        REDIS_SENTINEL_NAME: SENTINEL_NAME,
        REDIS_RECONNECT_MAX_DELAY_MS: "100",
      },
    });
    await untilRedis("up");
    const seed = await operatorCall<{ clientId: string; clientSecret: string }>(service.baseUrl, "Seed", {});
    admin = await accessToken(service.baseUrl, seed.clientId, seed.clientSecret);
  });
  after(async () => {
    await service?.stop();
    await redis?.stop();
    await dropStorage(storage);
  });

  test("a revocation is kept on the sentinel's primary; after a failover the revoked token stays refused and the valid one is served", async () => {
    const [kept, revoked] = [await newClient(), await newClient()];
    assert.equal(
      (await callApi(service.baseUrl, "/v2/api-users/revoke", admin, { clientId: revoked.clientId })).status,
      204,
    );
    assert.equal(await statusOf(revoked.token), 401);
    const key = credentialKey(redisKeyPrefixOf(storage), revoked.clientId);
    assert.match(String(await redis.command(redis.primary, ["GET", key])), /^r:\d+$/);

    await redis.kill(redis.primary);
    let wrongAccepts = 0;
    let promoted = false;
    const refusedUntilPromoted = (async () => {
      for (let i = 0; i < 1_000 && !promoted; i++) if ((await statusOf(revoked.token)) === 200) wrongAccepts++;
    })();
    await redis.promoted(redis.replica).finally(() => (promoted = true));
    await refusedUntilPromoted;
    await untilRedis("up");
    assert.equal(wrongAccepts, 0);
    assert.equal(await statusOf(revoked.token), 401);
    assert.equal(await statusOf(kept.token), 200);
    assert.match(String(await redis.command(redis.replica, ["GET", key])), /^r:\d+$/, "the promoted replica holds it");
  });

  async function newClient() {
    const response = await callApi(service.baseUrl, "/v2/api-users", admin, {});
    const created = (await response.json()) as { clientId: string; clientSecret: string };
    assert.equal(response.status, 200, JSON.stringify(created));
    const token = await accessToken(service.baseUrl, created.clientId, created.clientSecret);
    assert.equal(await statusOf(token), 200);
    return { ...created, token };
  }

  async function statusOf(token: string): Promise<number> {
    return (await callApi(service.baseUrl, "/v2/api-users?limit=1", token)).status;
  }

  async function untilRedis(status: string): Promise<void> {
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      const ready = (await (await fetch(`${service.baseUrl}/readyz`)).json()) as { checks?: { redis?: string } };
      if (ready.checks?.redis === status) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`redis never ${status}`);
  }
});
