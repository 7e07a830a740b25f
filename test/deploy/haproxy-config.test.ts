// deploy/haproxy.cfg as run in front of the service (with private ports), for what a scale audit
// found it missing:
// - without `option forwardfor` the service saw HAProxy's address for every client, so the
//   per-address token budget (TOKEN_RATE_LIMIT_PER_ADDRESS, 300/60) was shared by all of them:
//   10 clients × 40 token requests at the defaults got 100 × 429; with it, 0;
// - a health check that timed out at 1 s and took a server DOWN after 2 failures counted the
//   event-loop stalls of a busy host (0.8–1 s) as deaths: 4 false DOWNs in two runs. A stall of a
//   few seconds must leave the server UP (a crashed or draining one still goes DOWN within the
//   drain: test/deploy/rolling-restart.test.ts).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { backend, newStorage, newTempDir, serviceEnv, type Storage } from "../helpers/backend.js";
import { freePort } from "../helpers/free-port.js";
import { haproxyMissing, startHaproxy } from "../helpers/haproxy.js";
import { spawnServer, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage, operatorCall } from "../helpers/service.js";
import { TOKEN_PATH } from "../helpers/token-kit.js";
import { waitFor } from "../helpers/wait.js";

const CLIENTS = 10;
const REQUESTS_PER_CLIENT = 40;
/** Longer than the stalls the audit saw (0.8–1 s), and than the old check's whole DOWN budget (2 × 1 s). */
const STALL_MS = 4_000;

/** POST of a form from a given local (source) address: each client of the test is a host of its own. */
function postFrom(localAddress: string, url: string, fields: Record<string, string>): Promise<number> {
  const body = new URLSearchParams(fields).toString();
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      {
        method: "POST",
        localAddress,
        agent: false,
        headers: { "content-type": "application/x-www-form-urlencoded", "content-length": Buffer.byteLength(body) },
      },
      (response) => {
        response.resume();
        response.on("end", () => resolve(response.statusCode ?? 0));
      },
    );
    request.on("error", reject);
    request.end(body);
  });
}

describe(`deploy/haproxy.cfg in front of the service (${backend})`, { skip: haproxyMissing }, () => {
  let storage: Storage;
  let instance: ServerProcess;
  let haproxy: Awaited<ReturnType<typeof startHaproxy>> | undefined;

  before(async () => {
    storage = newStorage();
    const port = await freePort();
    // The defaults' rate limits; HAProxy (on loopback) is the trusted proxy, as docs/operations.md says to set it.
    instance = await spawnServer(serviceEnv(storage, { PORT: String(port), TRUSTED_PROXIES: "127.0.0.1" }));
    // The three servers of the file are this one instance.
    haproxy = await startHaproxy([port, port, port], newTempDir());
    const proxy = haproxy;
    await waitFor(
      "HAProxy to see its servers UP",
      async () => Object.values(await proxy.states()).every((state) => state === "UP"),
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  });

  after(async () => {
    haproxy?.child.kill("SIGTERM");
    instance?.child.kill("SIGCONT");
    await instance?.stop(5_000);
    await dropStorage(storage);
  });

  it(`gives each client its own address budget: ${CLIENTS} clients × ${REQUESTS_PER_CLIENT} token requests, no 429`, async () => {
    // Each client its own API user (its own per-client budget), five to a TMC (the default cap).
    const clients: Array<{ clientId: string; clientSecret: string }> = [];
    for (let i = 0; i < CLIENTS; i += 5) {
      const { tmcId } = await operatorCall<{ tmcId: string }>(instance.address, "CreateTmc", { name: `Behind ${i}` });
      for (let j = i; j < Math.min(i + 5, CLIENTS); j++)
        clients.push(await operatorCall(instance.address, "CreateApiUser", { tmcId }));
    }
    const statuses = await Promise.all(
      clients.map(async (client, i) => {
        const seen: number[] = [];
        for (let n = 0; n < REQUESTS_PER_CLIENT; n++)
          seen.push(
            await postFrom(`127.0.0.${11 + i}`, `${haproxy!.rest}${TOKEN_PATH}`, {
              grant_type: "client_credentials",
              client_id: client.clientId,
              client_secret: client.clientSecret,
            }),
          );
        return seen;
      }),
    );
    const counts: Record<string, number> = {};
    for (const status of statuses.flat()) counts[status] = (counts[status] ?? 0) + 1;
    console.log(
      `${CLIENTS} clients × ${REQUESTS_PER_CLIENT} token requests through HAProxy: ${JSON.stringify(counts)}`,
    );
    assert.deepEqual(counts, { 200: CLIENTS * REQUESTS_PER_CLIENT });
  });

  it(`keeps a server UP through an event-loop stall of ${STALL_MS / 1000} s`, async () => {
    const seen = new Set<string>();
    let watching = true;
    const watch = (async () => {
      while (watching) {
        for (const state of Object.values(await haproxy!.states())) seen.add(state);
        await sleep(100);
      }
    })();
    try {
      // SIGSTOP freezes the whole process, as a stalled event loop does: the check's connection is
      // accepted by the kernel and its answer waits.
      instance.child.kill("SIGSTOP");
      await sleep(STALL_MS);
      instance.child.kill("SIGCONT");
      // Long enough for a check that failed during the stall to be followed by the next ones.
      await sleep(4_000);
    } finally {
      instance.child.kill("SIGCONT");
      watching = false;
      await watch;
    }
    assert.deepEqual(
      [...seen].filter((state) => !state.startsWith("UP")),
      [],
      `states seen: ${[...seen].join(", ")}`,
    );
  });
});
