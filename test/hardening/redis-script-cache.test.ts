import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient } from "redis";
import { fetchToken } from "../helpers/api.js";
import { isPostgres, newStorage } from "../helpers/backend.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";

/**
 * The token admission script goes to Redis by its digest (EVALSHA), not as 1.4 KB of
 * Lua per request (EVAL). A Redis that lost its script cache (a restart, SCRIPT FLUSH) answers
 * NOSCRIPT: the request must still succeed, and the next one go by digest again. Redis's MONITOR
 * on a private server shows which command each request sent.
 */
describe(
  "the admission script survives a flushed Redis script cache",
  { skip: !isPostgres && "the embedded default has no Redis" },
  () => {
    const storage = newStorage();
    let redis: PrivateRedis;
    let monitor: ReturnType<typeof createClient>;
    let running: RunningService;
    let seed: { clientId: string; clientSecret: string };
    const seen: string[] = [];
    let markers = 0;

    before(async () => {
      redis = await startPrivateRedis();
      monitor = createClient({ url: redis.url });
      monitor.on("error", () => {});
      await monitor.connect();
      await monitor.monitor((line) => seen.push(line));
      running = await startService({
        storage,
        env: {
          REDIS_URL: redis.url,
          TOKEN_RATE_LIMIT_PER_ADDRESS: "100000/60",
          TOKEN_RATE_LIMIT_PER_CLIENT: "100000/60",
        },
      });
      seed = await operatorCall(running.baseUrl, "Seed", {});
    });
    after(async () => {
      await running?.stop();
      monitor?.destroy();
      await redis?.stop();
      await dropStorage(storage);
    });

    /**
     * The scripts the service ran on Redis while `action` ran: "EVALSHA" or "EVAL" with the key
     * count, in order. Redis feeds MONITOR in execution order, so once a marker sent afterwards is
     * seen, everything the action sent is too.
     */
    async function scriptCalls(action: () => Promise<void>): Promise<string[]> {
      const from = seen.length;
      await action();
      const marker = `marker-${++markers}`;
      await redis.command(["ECHO", marker]);
      for (let i = 0; i < 100 && !seen.slice(from).some((l) => l.includes(marker)); i++)
        await new Promise((r) => setTimeout(r, 20));
      return seen
        .slice(from)
        .map((line) => /^\S+ \[\d+ [^\]]+\] "(EVALSHA|EVAL)" "(?:[^"\\]|\\.)*" "(\d+)"/i.exec(line))
        .filter((m) => m !== null)
        .map((m) => `${m[1]!.toUpperCase()} ${m[2]}`);
    }

    const issue = async () => {
      const response = await fetchToken(running.baseUrl, seed.clientId, seed.clientSecret);
      const body = (await response.json()) as { access_token?: string };
      assert.equal(response.status, 200, JSON.stringify(body));
      assert.ok(body.access_token);
    };

    // The admission script takes six keys (watermark, credential, four budgets).
    const ADMISSION = 6;

    test("after SCRIPT FLUSH the next token request succeeds (EVALSHA, NOSCRIPT, EVAL) and the one after goes by digest again", async () => {
      // The first requests fill the credential cache (the step-by-step path); then one script per request.
      let warm: string[] = [];
      for (let i = 0; i < 5 && warm.join() !== `EVALSHA ${ADMISSION}`; i++) warm = await scriptCalls(issue);
      assert.deepEqual(warm, [`EVALSHA ${ADMISSION}`], "a warm cache: the admission script by its digest only");

      await redis.command(["SCRIPT", "FLUSH"]);
      assert.deepEqual(
        await scriptCalls(issue),
        [`EVALSHA ${ADMISSION}`, `EVAL ${ADMISSION}`],
        "NOSCRIPT, then the script itself, in the same request",
      );
      assert.deepEqual(await scriptCalls(issue), [`EVALSHA ${ADMISSION}`], "the script is cached again");
    });
  },
);
