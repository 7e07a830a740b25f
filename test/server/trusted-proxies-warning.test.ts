import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { backend, newStorage } from "../helpers/backend.js";
import { dropStorage, startService } from "../helpers/service.js";

/**
 * Without TRUSTED_PROXIES, behind a balancer every client shares
 * the balancer's address and with it the per-address budgets. A service reachable beyond loopback
 * with no TRUSTED_PROXIES says so loudly at start-up (a warning, not a refusal: see compose.ts).
 */
const WARNING = /TRUSTED_PROXIES is not set and the service listens beyond loopback/;

async function startupLogs(env: Record<string, string>): Promise<string> {
  const storage = newStorage();
  const running = await startService({ storage, env });
  try {
    return running.logs();
  } finally {
    await running.stop();
    await dropStorage(storage);
  }
}

describe(`the TRUSTED_PROXIES start-up warning (${backend})`, () => {
  test("listening on every interface without TRUSTED_PROXIES: one warning naming the setting, and the service still starts", async () => {
    const logs = await startupLogs({ HOST: "0.0.0.0" });
    const warnings = logs.split("\n").filter((line) => WARNING.test(line));
    assert.equal(warnings.length, 1, logs.slice(0, 2000));
    const line = JSON.parse(warnings[0]!) as { level: number; setting: string; hosts: string[] };
    assert.equal(line.level, 40, "logged at warn");
    assert.equal(line.setting, "TRUSTED_PROXIES");
    assert.deepEqual(line.hosts, ["0.0.0.0"]);
  });

  test("with TRUSTED_PROXIES set, or listening on loopback only, no warning", async () => {
    assert.doesNotMatch(await startupLogs({ HOST: "0.0.0.0", TRUSTED_PROXIES: "10.0.0.0/8" }), WARNING);
    assert.doesNotMatch(await startupLogs({ HOST: "127.0.0.1" }), WARNING);
  });
});
