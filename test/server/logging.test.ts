import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { dropStorage, operatorCall, operatorHeaders, startService, type RunningService } from "../helpers/service.js";

describe("logs never carry credentials", () => {
  let running: RunningService;
  before(async () => {
    running = await startService({ env: { LOG_LEVEL: "trace" } });
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  test("secrets from create, Authorization headers and secret-looking query values stay out of the log", async () => {
    const tmc = await operatorCall<{ tmcId: string }>(running.baseUrl, "CreateTmc", { name: "Log TMC" });
    const created = await operatorCall<{ clientId: string; clientSecret: string }>(running.baseUrl, "CreateApiUser", {
      tmcId: tmc.tmcId,
    });
    const company = await operatorCall<{ orgId: string }>(running.baseUrl, "CreateCompany", {
      tmcId: tmc.tmcId,
      name: "Co",
    });
    const scim = await operatorCall<{ scimToken: string }>(running.baseUrl, "CreateApiUser", {
      tmcId: tmc.tmcId,
      orgId: company.orgId,
      role: "COMPANY_ADMIN",
      credentialType: "SCIM_TOKEN",
    });
    await fetch(`${running.baseUrl}/v2/api-users?limit=1`, {
      headers: { authorization: "Bearer top-secret-bearer-value" },
    });
    await fetch(`${running.baseUrl}/v2/auth/oauth2-token?client_secret=query-secret-value`, { method: "POST" });
    await fetch(`${running.baseUrl}/get-auth-token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ clientId: created.clientId, clientSecret: created.clientSecret }),
    });
    const logs = running.logs();
    // The log did record these requests (trace level), just not their credentials.
    assert.ok(logs.split("\n").filter((l) => l.includes("/get-auth-token")).length >= 1);
    for (const secret of [
      created.clientSecret,
      scim.scimToken,
      "top-secret-bearer-value",
      "query-secret-value",
      operatorHeaders.authorization.slice(7),
    ]) {
      assert.equal(logs.includes(secret), false, `the log contains ${secret.slice(0, 6)}…`);
    }
    assert.match(logs, /"url":"\/v2\/auth\/oauth2-token\?client_secret=…"/);
  });
});
