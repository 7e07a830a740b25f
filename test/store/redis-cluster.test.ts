import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { createClient, createCluster, type RedisClusterType } from "redis";
import { credentialKey } from "../../src/store/redis/credential-keys.js";
import { accessToken, callApi, fetchToken } from "../helpers/api.js";
import { isPostgres, newStorage, redisKeyPrefixOf } from "../helpers/backend.js";
import { startPrivateRedisCluster, type PrivateRedisCluster } from "../helpers/private-redis-cluster.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";

/**
 * Against a Redis Cluster the service met MOVED, opened its breaker and sent
 * every credential check to Postgres, with rate limits per instance. Two instances in
 * REDIS_MODE=cluster on a private three-primary cluster: revocations, shared budgets, and a
 * primary killed mid-run after a write its replica never received (0 wrong accepts throughout).
 */
describe("Redis Cluster", { skip: !isPostgres && "the embedded default has no Redis", timeout: 60_000 }, () => {
  const storage = newStorage();
  const prefix = redisKeyPrefixOf(storage);
  let cluster: PrivateRedisCluster;
  let reader: RedisClusterType;
  let a: RunningService;
  let b: RunningService;
  let admin: string;

  before(async () => {
    cluster = await startPrivateRedisCluster();
    const env = {
      REDIS_MODE: "cluster",
      REDIS_URL: cluster.url,
      REDIS_RECONNECT_MAX_DELAY_MS: "100",
      TOKEN_RATE_LIMIT_PER_ADDRESS: "100000/60",
      TOKEN_RATE_LIMIT_PER_CLIENT: "5/60",
    };
    // One after the other: two first starts on a fresh schema can wait on each other's migration lock.
    a = await startService({ storage, env });
    b = await startService({ storage, env });
    await Promise.all([untilRedis(a, "up"), untilRedis(b, "up")]);
    reader = createCluster({ rootNodes: cluster.url.split(",").map((url) => ({ url })) });
    reader.on("error", () => {});
    await reader.connect();
  });
  // A tenant per test: a tenant holds at most 5 API users.
  beforeEach(async () => {
    const seed = await operatorCall<{ clientId: string; clientSecret: string }>(a.baseUrl, "Seed", {});
    admin = await accessToken(a.baseUrl, seed.clientId, seed.clientSecret);
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await reader?.close().catch(() => {});
    await cluster?.stop();
    await dropStorage(storage);
  });

  test("a revoked API user is refused at once on both instances, and the cluster holds the revocation (no Postgres fallback)", async () => {
    const before = await Promise.all([fallbacks(a), fallbacks(b)]);
    const [kept, revoked] = [await newClient(), await newClient()];
    assert.equal((await callApi(a.baseUrl, "/v2/api-users/revoke", admin, { clientId: revoked.clientId })).status, 204);
    for (const instance of [a, b]) {
      assert.equal(await statusOf(instance, revoked.token), 401, "revoked");
      assert.equal(await statusOf(instance, kept.token), 200, "the other client still served");
    }
    assert.match((await reader.get(credentialKey(prefix, revoked.clientId))) ?? "", /^r:\d+$/);
    assert.match((await reader.get(credentialKey(prefix, kept.clientId))) ?? "", /^g:\d+:\d+$/);
    assert.deepEqual(await Promise.all([fallbacks(a), fallbacks(b)]), before, "the cluster answered every check");
  });

  test("a client's token budget is shared by both instances (5 per minute in all, not per instance)", async () => {
    const { clientId, clientSecret } = await newClient();
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++)
      statuses.push((await fetchToken([a, b][i % 2]!.baseUrl, clientId, clientSecret)).status);
    // newClient() took one token already.
    assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429, 429, 429]);
    assert.equal(await metric(a, "rate_limiter_fallbacks_total"), 0);
    assert.equal(await metric(b, "rate_limiter_fallbacks_total"), 0);
  });

  test("a primary killed after a revocation its replica never received: 0 wrong accepts, readiness degraded then up, the cache repaired", async () => {
    const victims = [await newClient()];
    const kept = await newClient();
    // A regression to one watermark for every bucket (this layout's predecessor, `cred:watermark`)
    // shows as wrong accepts only when that key lives on another primary than the target's bucket.
    const singleWatermarkShard = (await cluster.shardOf(`${prefix}cred:watermark`)).primary;
    let target = await newClient();
    if ((await cluster.shardOf(credentialKey(prefix, target.clientId))).primary === singleWatermarkShard)
      target = await newClient();
    const key = credentialKey(prefix, target.clientId);
    const shard = await cluster.shardOf(key);
    // The target's valid state is cached and has reached the replica before it stops.
    assert.match((await reader.get(key)) ?? "", /^g:/);
    await untilReplicated(shard.replica, key, /^g:/);
    for (const v of victims)
      assert.equal((await callApi(a.baseUrl, "/v2/api-users/revoke", admin, { clientId: v.clientId })).status, 204);

    let wrongAccepts = 0;
    let refused = 0;
    const keptStatuses: number[] = [];
    const readiness = new Set<string>();
    let running = true;
    const revokedTokens = () => [...victims.map((v) => v.token), ...(targetRevoked ? [target.token] : [])];
    let targetRevoked = false;
    const load = (async () => {
      while (running) {
        for (const instance of [a, b]) {
          for (const token of revokedTokens()) {
            const status = await statusOf(instance, token);
            if (status === 200) wrongAccepts++;
            else if (status === 401) refused++;
          }
          keptStatuses.push(await statusOf(instance, kept.token));
        }
      }
    })();
    const probe = (async () => {
      while (running) {
        for (const instance of [a, b]) readiness.add(await redisStatus(instance));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    let keptBefore: number | undefined;
    let repaired: boolean | undefined;
    try {
      // The replica stops and its link is cut: the revocation below reaches the primary only.
      cluster.pause(shard.replica);
      await cluster.command(shard.primary, ["CLIENT", "KILL", "TYPE", "replica"]);
      assert.equal(
        (await callApi(a.baseUrl, "/v2/api-users/revoke", admin, { clientId: target.clientId })).status,
        204,
      );
      targetRevoked = true;
      assert.match((await reader.get(key)) ?? "", /^r:/, "the primary took the revocation");
      await cluster.kill(shard.primary);
      cluster.resume(shard.replica);
      assert.match(String(await replicaValue(shard.replica, key)), /^g:/, "the replica never received it");
      await cluster.healthy(shard.replica);
      await Promise.all([untilRedis(a, "up"), untilRedis(b, "up")]);
      // The instances find the promoted replica's bucket behind, and republish what it lost.
      repaired = await until("the revocation back in the cluster", async () =>
        /^r:/.test((await reader.get(key)) ?? ""),
      ).then(
        () => true,
        () => false,
      );
      keptBefore = keptStatuses.length;
      await new Promise((r) => setTimeout(r, 1_000));
    } finally {
      running = false;
      await Promise.all([load, probe]);
    }

    assert.equal(wrongAccepts, 0, `wrong accepts of revoked tokens (${refused} refused)`);
    assert.ok(refused > 50, `enough checks ran (${refused})`);
    assert.ok(repaired, "the instances republished the revocation the promoted replica lacked");
    assert.ok(readiness.has("degraded"), "readiness said degraded while a primary was down");
    assert.deepEqual(
      [...new Set(keptStatuses.slice(keptBefore ?? keptStatuses.length))],
      [200],
      "the valid client is served after the failover",
    );
    for (const instance of [a, b]) assert.equal(await statusOf(instance, target.token), 401);
  });

  async function newClient() {
    const response = await callApi(a.baseUrl, "/v2/api-users", admin, {});
    const created = (await response.json()) as { clientId: string; clientSecret: string };
    assert.equal(response.status, 200, JSON.stringify(created));
    const token = await accessToken(b.baseUrl, created.clientId, created.clientSecret);
    for (const instance of [a, b]) assert.equal(await statusOf(instance, token), 200, "valid on both");
    return { ...created, token };
  }

  async function untilReplicated(port: number, key: string, value: RegExp) {
    try {
      await until(`${key} on the replica`, async () => value.test(String(await replicaValue(port, key))));
    } catch (error) {
      // Say why: the replica's link to its primary and what it holds for the key.
      const replication = String(await cluster.command(port, ["INFO", "replication"]).catch((e: unknown) => e));
      const held = await replicaValue(port, key).catch((e: unknown) => String(e));
      throw new Error(
        `${String(error)}; the replica holds ${String(held)}; its INFO replication: ${replication.replace(/\r?\n/g, " ")}`,
        { cause: error },
      );
    }
  }
});

async function statusOf(instance: RunningService, token: string): Promise<number> {
  return (await callApi(instance.baseUrl, "/v2/api-users?limit=1", token)).status;
}

async function redisStatus(instance: RunningService): Promise<string> {
  const ready = (await (await fetch(`${instance.baseUrl}/readyz`)).json()) as { checks?: { redis?: string } };
  return ready.checks?.redis ?? "missing";
}

async function untilRedis(instance: RunningService, status: string): Promise<void> {
  await until(`redis ${status} on ${instance.baseUrl}`, async () => (await redisStatus(instance)) === status);
}

/** A key as a replica holds it (READONLY: a replica answers reads of its primary's slots). */
async function replicaValue(port: number, key: string): Promise<string | null> {
  const client = createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: false } });
  client.on("error", () => {});
  await client.connect();
  try {
    await client.sendCommand(["READONLY"]);
    return await client.get(key);
  } finally {
    client.destroy();
  }
}

async function metric(instance: RunningService, name: string): Promise<number> {
  const text = await (await fetch(`${instance.baseUrl}/metrics`)).text();
  return text
    .split("\n")
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}

function fallbacks(instance: RunningService): Promise<number> {
  return metric(instance, "credential_state_redis_fallbacks_total");
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`${what}: not within ${timeoutMs} ms`);
}
