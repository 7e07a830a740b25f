import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { AuthService } from "../../gen/travel/auth/v2/auth_pb.js";
import { accessToken } from "../helpers/api.js";
import { grpcJsUnary, jsonGrpcClient } from "../helpers/grpc-js.js";
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

  test("a token request's secret (Basic auth and form) and a Bearer token stay out of the log; each request's line names its id, method, path, status and duration", async () => {
    const tmc = await operatorCall<{ tmcId: string }>(running.baseUrl, "CreateTmc", { name: "Line TMC" });
    const { clientId, clientSecret } = await operatorCall<{ clientId: string; clientSecret: string }>(
      running.baseUrl,
      "CreateApiUser",
      { tmcId: tmc.tmcId },
    );
    const tokenUrl = `${running.baseUrl}/v2/auth/oauth2-token`;
    const form = { "content-type": "application/x-www-form-urlencoded" };
    const basicCredentials = Buffer.from(`${clientId}:${clientSecret}`).toString("base64");
    const basic = await fetch(tokenUrl, {
      method: "POST",
      headers: { ...form, authorization: `Basic ${basicCredentials}` },
      body: new URLSearchParams({ grant_type: "client_credentials" }),
    });
    const inForm = await fetch(tokenUrl, {
      method: "POST",
      headers: form,
      body: new URLSearchParams({ grant_type: "client_credentials", client_id: clientId, client_secret: clientSecret }),
    });
    const wrongSecret = `${clientSecret.slice(0, -4)}XXXX`;
    const refused = await fetch(tokenUrl, {
      method: "POST",
      headers: form,
      body: new URLSearchParams({ grant_type: "client_credentials", client_id: clientId, client_secret: wrongSecret }),
    });
    const issued = [
      (await basic.json()) as { access_token: string },
      (await inForm.json()) as { access_token: string },
    ];
    await refused.arrayBuffer();
    const token = await accessToken(running.baseUrl, clientId, clientSecret);
    const read = await fetch(`${running.baseUrl}/v2/api-users?limit=1`, {
      headers: { authorization: `Bearer ${token}` },
    });
    await read.arrayBuffer();
    assert.deepEqual([basic.status, inForm.status, refused.status, read.status], [200, 200, 403, 200]);

    const logs = running.logs();
    for (const secret of [clientSecret, basicCredentials, wrongSecret, token, ...issued.map((b) => b.access_token)])
      assert.equal(logs.includes(secret), false, `the log contains ${secret.slice(0, 6)}…`);
    const lines = logs
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, any>);
    for (const [response, method, path] of [
      [basic, "POST", "/v2/auth/oauth2-token"],
      [inForm, "POST", "/v2/auth/oauth2-token"],
      [refused, "POST", "/v2/auth/oauth2-token"],
      [read, "GET", "/v2/api-users?limit=…"],
    ] as const) {
      const reqId = response.headers.get("x-request-id");
      const line = lines.find((l) => l.reqId === reqId && l.msg === "request completed");
      assert.ok(line, `a "request completed" line for ${method} ${path} (${reqId})`);
      assert.equal(line.level, 30, "at info");
      assert.equal(line.req.method, method);
      assert.equal(line.req.url, path);
      assert.equal(line.res.statusCode, response.status);
      assert.equal(typeof line.responseTime, "number");
      assert.ok(line.responseTime > 0);
    }
  });

  test("a refused gRPC call's line says why, as a refused REST request's does: errorCode, RPC, which client and which check — never the secret", async () => {
    const tmc = await operatorCall<{ tmcId: string }>(running.baseUrl, "CreateTmc", { name: "gRPC line TMC" });
    const { clientId, clientSecret } = await operatorCall<{ clientId: string; clientSecret: string }>(
      running.baseUrl,
      "CreateApiUser",
      { tmcId: tmc.tmcId },
    );
    const wrongSecret = `${clientSecret.slice(0, -4)}YYYY`;
    const client = jsonGrpcClient(AuthService, new URL(running.baseUrl).host);
    try {
      const refused = await grpcJsUnary(client, "FetchOauth2Token", {
        grant_type: "client_credentials",
        client_id: clientId,
        client_secret: wrongSecret,
      });
      const issued = await grpcJsUnary(client, "FetchOauth2Token", {
        grant_type: "client_credentials",
        client_id: clientId,
        client_secret: clientSecret,
      });
      assert.deepEqual([refused.errorResponse?.errorMessages[0]?.errorCode, issued.code], ["INVALID_CLIENT", 0]);
      const lines = running
        .logs()
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, any>);
      const lineOf = (reqId: string | undefined) =>
        lines.find((l) => l.reqId === reqId && l.msg === "request completed");
      const refusedLine = lineOf(refused.requestId);
      assert.ok(refusedLine, `a "request completed" line for the refused call (${refused.requestId})`);
      assert.equal(refusedLine.req.url, "/travel.auth.v2.AuthService/FetchOauth2Token");
      assert.equal(refusedLine.errorCode, "INVALID_CLIENT");
      assert.equal(refusedLine.rpc, "travel.auth.v2.AuthService/FetchOauth2Token");
      assert.equal(refusedLine.clientId, clientId);
      assert.equal(refusedLine.refusalReason, "wrong secret");
      const issuedLine = lineOf(issued.requestId);
      assert.ok(issuedLine, "a line for the issued call");
      assert.equal(issuedLine.errorCode, undefined, "an answered call names no refusal");
      const logs = running.logs();
      for (const secret of [clientSecret, wrongSecret, String(issued.response?.access_token)])
        assert.equal(logs.includes(secret), false, `the log contains ${secret.slice(0, 6)}…`);
    } finally {
      client.close();
    }
  });
  test("a refused access token's line names the check that failed (here: signature), never the token", async () => {
    const tmc = await operatorCall<{ tmcId: string }>(running.baseUrl, "CreateTmc", { name: "Check TMC" });
    const { clientId, clientSecret } = await operatorCall<{ clientId: string; clientSecret: string }>(
      running.baseUrl,
      "CreateApiUser",
      { tmcId: tmc.tmcId },
    );
    const token = await accessToken(running.baseUrl, clientId, clientSecret);
    const [header, payload, signature] = token.split(".") as [string, string, string];
    const tampered = `${header}.${payload}.${signature[0] === "A" ? "B" : "A"}${signature.slice(1)}`;
    const response = await fetch(`${running.baseUrl}/v2/api-users?limit=1`, {
      headers: { authorization: `Bearer ${tampered}` },
    });
    assert.equal(response.status, 401);
    const requestId = response.headers.get("x-request-id");
    const line = running
      .logs()
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, any>)
      .find((l) => l.msg === "request completed" && l.reqId === requestId);
    assert.ok(line, `a "request completed" line for ${requestId}`);
    assert.equal(line.errorCode, "USER_NOT_AUTHENTICATED");
    assert.equal(line.refusalReason, "signature");
    assert.equal(running.logs().includes(signature.slice(1)), false, "the token's signature is not logged");
  });
});
