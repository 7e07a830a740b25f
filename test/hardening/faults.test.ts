import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { accessToken, callApi, fetchToken } from "../helpers/api.js";
import { isPostgres, newStorage, TEST_DATABASE_URL } from "../helpers/backend.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";

/**
 * Issue 8, failure 4: with Redis stopped by SIGSTOP every request waited out the stall (up to
 * 22.5 s), 637 piled up and /readyz said 200; during a Postgres stall requests waited out the
 * pool timeout and then got 500. Now: command, query and acquire timeouts, a circuit breaker, 503.
 */
interface Sample {
  readonly ms: number;
  readonly status: number;
}

/** `workers` loops sending `request` until `stop()` resolves; every answer's latency and status. */
async function load(workers: number, request: () => Promise<number>, stop: Promise<void>): Promise<Sample[]> {
  const samples: Sample[] = [];
  let stopped = false;
  void stop.then(() => (stopped = true));
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (!stopped) {
        const started = performance.now();
        const status = await request().catch(() => 0);
        samples.push({ ms: performance.now() - started, status });
      }
    }),
  );
  return samples;
}

function p99(samples: readonly Sample[]): number {
  const sorted = samples.map((s) => s.ms).sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe("bounded latency while a dependency stalls", { skip: !isPostgres && "the embedded default has no Redis or Postgres server to stall" }, () => {
  let redis: PrivateRedis;
  let pgProxy: TcpProxy;
  let running: RunningService;
  let seed: { clientId: string; clientSecret: string };
  let token: string;
  const storage = newStorage();

  before(async () => {
    redis = await startPrivateRedis();
    pgProxy = await startTcpProxy(Number(new URL(TEST_DATABASE_URL).port || 5432));
    const url = new URL(TEST_DATABASE_URL);
    url.port = String(pgProxy.port);
    running = await startService({
      storage,
      env: {
        DATABASE_URL: url.toString(),
        REDIS_URL: redis.url,
        TOKEN_RATE_LIMIT_PER_ADDRESS: "1000000/60",
        TOKEN_RATE_LIMIT_PER_CLIENT: "1000000/60",
        LOG_LEVEL: "warn",
      },
    });
    seed = await operatorCall(running.baseUrl, "Seed", {});
    token = await accessToken(running.baseUrl, seed.clientId, seed.clientSecret);
  });
  after(async () => {
    redis?.resume();
    pgProxy?.resume();
    await running?.stop();
    await pgProxy?.close();
    await redis?.stop();
    await dropStorage(storage);
  });

  const mixed = async () => {
    const issued = await fetchToken(running.baseUrl, seed.clientId, seed.clientSecret);
    await issued.arrayBuffer();
    if (issued.status !== 200) return issued.status;
    const read = await callApi(running.baseUrl, "/v2/api-users?limit=1", token);
    await read.arrayBuffer();
    return read.status;
  };

  test("Redis stalled (SIGSTOP) for 20 s: every request still answered 200, p99 under 2 s, readiness degraded, then back to normal", async () => {
    const stop = sleep(22_000);
    const loading = load(8, mixed, stop);
    await sleep(1_000);
    redis.pause();
    await sleep(2_000);
    const during = (await (await fetch(`${running.baseUrl}/readyz`)).json()) as { status: string; checks: Record<string, string> };
    assert.equal(during.status, "degraded");
    assert.equal(during.checks.redis, "degraded");
    await sleep(18_000);
    redis.resume();
    const samples = await loading;
    const failures = samples.filter((s) => s.status !== 200);
    assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of ${samples.length} not 200`);
    assert.ok(p99(samples) < 2_000, `p99 ${p99(samples).toFixed(0)} ms over ${samples.length} requests`);
    // Recovery without a restart: the breaker closes and readiness says ready.
    let status = "";
    for (let i = 0; i < 50 && status !== "ready"; i++) {
      status = ((await (await fetch(`${running.baseUrl}/readyz`)).json()) as { status: string }).status;
      if (status !== "ready") await sleep(200);
    }
    assert.equal(status, "ready");
    console.log(`redis stall: ${samples.length} requests, p99 ${p99(samples).toFixed(0)} ms, 0 non-200`);
  });

  test("Postgres stalled for 20 s: answers are 503 (never 500), p99 under 2 s, then service resumes", async () => {
    const stop = sleep(22_000);
    const loading = load(8, mixed, stop);
    await sleep(1_000);
    pgProxy.stall();
    await sleep(20_000);
    pgProxy.resume();
    const samples = await loading;
    const statuses = new Set(samples.map((s) => s.status));
    assert.ok(![...statuses].some((s) => s >= 500 && s !== 503), `statuses: ${[...statuses].join(",")}`);
    assert.ok(samples.some((s) => s.status === 503), "the stall was felt");
    assert.ok(p99(samples) < 2_000, `p99 ${p99(samples).toFixed(0)} ms over ${samples.length} requests`);
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = await mixed();
      if (status !== 200) await sleep(200);
    }
    assert.equal(status, 200, "service resumed without a restart");
    console.log(`postgres stall: ${samples.length} requests, p99 ${p99(samples).toFixed(0)} ms, statuses ${[...statuses].join(",")}`);
  });
});
