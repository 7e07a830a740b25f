// A REST client that hangs up while its request waits for its TMC's slot: the request leaves the
// queue and its work never runs. Before, the gateway gave the RPC no signal, so a retry storm of
// clients that time out and reconnect filled the TMC's queue with work nobody read the answer of,
// and each abandoned call ran once a slot freed (here: created an API user nobody saw created).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import knexPkg, { type Knex } from "knex";
import { backend, isPostgres, TEST_DATABASE_URL } from "../helpers/backend.js";
import { disposeService, newTenant, ROOMY_RATE_LIMITS, startTokenService } from "../helpers/token-kit.js";
import type { RunningService } from "../helpers/service.js";
import { tokenFor } from "../air-credits/air-credit-kit.js";

/** A pool of 4 at half per party: the TMC runs 2 calls at once and queues the rest, for up to 15 s. */
const ADMISSION = {
  DATABASE_POOL_MAX: "4",
  ADMISSION_PARTY_SHARE_PERCENT: "50",
  ADMISSION_QUEUE_PER_PARTY: "16",
  ADMISSION_QUEUE_WAIT_MS: "15000",
  REQUEST_DEADLINE_MS: "30000",
  // A busy row is retried (holding the slot, not a connection) for up to 15 s before 409.
  DATABASE_LOCK_WAIT_MS: "15000",
};
const RUNNING = 2;
const ABANDONED = 6;

// The TMC's running calls must stall while the queue fills: a row lock another connection holds.
// PGlite has one connection, so nothing can hold a lock beside the service's own calls.
describe(
  `a REST client that hangs up leaves its TMC's queue (${backend})`,
  {
    skip: !isPostgres && "needs a row lock held by a connection of the test's own (Postgres)",
  },
  () => {
    let running: RunningService;
    let db: Knex;
    let tmcId = "";
    let adminToken = "";

    before(async () => {
      running = await startTokenService({ env: { ...ROOMY_RATE_LIMITS, ...ADMISSION } });
      const tenant = await newTenant(running.baseUrl);
      tmcId = tenant.tmcId;
      adminToken = await tokenFor(running.baseUrl, tenant.admin);
      db = knexPkg.knex({
        client: "pg",
        connection: TEST_DATABASE_URL,
        searchPath: [running.storage.schema!],
        pool: { min: 0, max: 2 },
      });
    });
    after(async () => {
      await db?.destroy();
      await disposeService(running);
    });

    const apiUsers = async () =>
      Number((await db("api_users").where({ tmc_id: tmcId }).count<{ count: string }[]>({ count: "*" }))[0]!.count);

    /** Creates an API user of the TMC over REST; `signal` hangs up. */
    const create = (signal?: AbortSignal) =>
      fetch(`${running.baseUrl}/v2/api-users`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${adminToken}` },
        body: "{}",
        signal,
      });

    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    /** Whether `promise` is still unsettled once the timers that are due have run. */
    const pending = async (promise: Promise<unknown>) =>
      (await Promise.race([promise.then(() => false), sleep(0).then(() => true)])) === true;
    /** The instance's admission as /metrics shows it: calls running and waiting. */
    const admission = async () => {
      const text = await (await fetch(`${running.baseUrl}/metrics`)).text();
      const gauge = (state: string) =>
        Number(new RegExp(`^admission_calls\\{state="${state}"\\} (\\d+)$`, "m").exec(text)?.[1]);
      return { running: gauge("running"), waiting: gauge("waiting") };
    };
    /** Waits (up to `withinMs`) until /metrics shows `expected`. */
    const admissionReaches = async (expected: { running: number; waiting: number }, why: string, withinMs = 10_000) => {
      const deadline = Date.now() + withinMs;
      let seen = await admission();
      while (seen.running !== expected.running || seen.waiting !== expected.waiting) {
        assert.ok(Date.now() < deadline, `${why}: /metrics shows ${JSON.stringify(seen)}`);
        await sleep(20);
        seen = await admission();
      }
    };

    test("2 creates stall on a held row, 6 more queue and their clients hang up: only the 2 run", async () => {
      const atStart = await apiUsers();
      const holder = await db.transaction();
      let released = false;
      try {
        await holder.raw("select id from tmcs where id = ? for update", [tmcId]);
        // The first creates take the TMC's two slots and retry on the held row.
        const stalled = Array.from({ length: RUNNING }, () => create());
        await admissionReaches({ running: RUNNING, waiting: 0 }, "the first creates hold the TMC's slots");
        const hangUp = new AbortController();
        const abandoned = Array.from({ length: ABANDONED }, () =>
          create(hangUp.signal).then(
            (response) => `answered ${response.status}`,
            (error: unknown) => (error as Error).name,
          ),
        );
        // Queued in memory behind them, holding no connection.
        await admissionReaches({ running: RUNNING, waiting: ABANDONED }, "the later creates queue");
        hangUp.abort();
        assert.deepEqual(await Promise.all(abandoned), Array(ABANDONED).fill("AbortError"));
        // At once: well before their wait in the queue (15 s) would end it.
        await admissionReaches({ running: RUNNING, waiting: 0 }, "the abandoned creates leave the queue", 2_000);
        for (const call of stalled) assert.ok(await pending(call), "the first creates still wait for the row");
        // The slots free up only now: an abandoned call still queued would take one and run.
        await sleep(300);
        await holder.commit();
        released = true;
        assert.deepEqual(
          (await Promise.all(stalled)).map((response) => response.status),
          Array(RUNNING).fill(200),
        );
        await sleep(1_000);
        assert.equal(await apiUsers(), atStart + RUNNING, "only the creates whose clients waited ran");
      } finally {
        if (!released) await holder.rollback();
      }
      // The TMC is served again at once: nothing of the abandoned calls holds its share.
      assert.equal((await create()).status, 200);
      assert.equal(await apiUsers(), atStart + RUNNING + 1);
      // Each abandoned request has its access-log line, marked cancelled with nginx's 499, and its count.
      const lines = running
        .logs()
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map(
          (line) =>
            JSON.parse(line) as { level: number; msg: string; cancelled?: boolean; res?: { statusCode: number } },
        );
      assert.deepEqual(
        lines.filter((l) => l.msg === "request completed" && l.cancelled).map((l) => l.res?.statusCode),
        Array(ABANDONED).fill(499),
      );
      const metrics = await (await fetch(`${running.baseUrl}/metrics`)).text();
      assert.match(
        metrics,
        new RegExp(`^http_requests_total\\{method="POST",route="/v2/api-users",status="499"\\} ${ABANDONED}$`, "m"),
      );
      // Nothing of it was logged as a failure of the service.
      assert.deepEqual(
        lines.filter((entry) => entry.level >= 50),
        [],
      );
    });
  },
);
