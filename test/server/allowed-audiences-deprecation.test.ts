import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { backend, newStorage } from "../helpers/backend.js";
import { dropStorage, startService } from "../helpers/service.js";

/**
 * ALLOWED_AUDIENCES keeps working, and a deployment that sets it is told once at
 * start-up to register each audience as a resource server instead.
 */
const NOTICE =
  /ALLOWED_AUDIENCES is deprecated: register each audience as a resource server \(resource-server create\)/;

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

describe(`the ALLOWED_AUDIENCES deprecation notice (${backend})`, () => {
  test("set: one warning at start-up naming the setting and its audiences", async () => {
    const logs = await startupLogs({ ALLOWED_AUDIENCES: "https://trips.example/api,https://hotels.example/api" });
    const notices = logs.split("\n").filter((line) => NOTICE.test(line));
    assert.equal(notices.length, 1, logs.slice(0, 2000));
    const line = JSON.parse(notices[0]!) as { level: number; setting: string; audiences: string[] };
    assert.equal(line.level, 40, "logged at warn");
    assert.equal(line.setting, "ALLOWED_AUDIENCES");
    assert.deepEqual(line.audiences, ["https://trips.example/api", "https://hotels.example/api"]);
  });

  test("unset: no notice", async () => {
    assert.doesNotMatch(await startupLogs({}), NOTICE);
  });
});
