import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { fetchToken } from "../helpers/api.js";
import { isPostgres, newStorage, PRODUCTION_DATABASE_TIMEOUTS, TEST_DATABASE_URL } from "../helpers/backend.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";
import { proxyInFrontOf } from "../helpers/tcp-proxy.js";

describe("probes, metrics and the API description", () => {
  let running: RunningService;
  before(async () => {
    running = await startService();
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  test("GET /healthz answers while the process lives", async () => {
    const response = await fetch(`${running.baseUrl}/healthz`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { status: "ok" });
  });

  test("GET /readyz reports the database and Redis reachable, on the backend in use", async () => {
    const response = await fetch(`${running.baseUrl}/readyz`);
    assert.equal(response.status, 200);
    const body = (await response.json()) as { checks: object; storage: { database: string; redis: string } };
    assert.deepEqual(body.checks, { database: "up", redis: "up" });
    assert.deepEqual(
      body.storage,
      isPostgres ? { database: "postgres", redis: "redis" } : { database: "pglite", redis: "memory" },
    );
  });

  test("buf curl lists the six services, reflection and health over gRPC reflection", async () => {
    const { stdout } = await promisify(execFile)("node_modules/.bin/buf", [
      "curl",
      "--http2-prior-knowledge",
      "--list-services",
      running.baseUrl,
    ]);
    assert.deepEqual(stdout.trim().split("\n").sort(), [
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
      "grpc.reflection.v1alpha.ServerReflection",
      "travel.aircredit.v3.AirCreditService",
      "travel.apiuser.v2.ApiUserService",
      "travel.auth.v2.AuthService",
      "travel.operator.v1.OperatorService",
      "travel.scim.v2.ScimService",
      "travel.user.v2.UserService",
    ]);
  });

  test("buf curl as docs/cli.md shows it (default protocol) prints a refusal's ErrorResponse decoded", async () => {
    const refused = await promisify(execFile)("node_modules/.bin/buf", [
      "curl",
      "--http2-prior-knowledge",
      "-H",
      `authorization: Bearer ${"x".repeat(40)}`,
      "-d",
      '{"name": "X"}',
      `${running.baseUrl}/travel.operator.v1.OperatorService/CreateTmc`,
    ]).then(
      () => assert.fail("a wrong operator token was accepted"),
      (error: { stderr: string }) => JSON.parse(error.stderr) as any,
    );
    assert.equal(refused.code, "unauthenticated");
    const { debug } = refused.details[0];
    assert.match(debug.debugIdentifier, /^[0-9a-f-]{36}$/);
    assert.equal(debug.errorMessages[0].errorCode, "USER_NOT_AUTHENTICATED");
  });

  test("GET /metrics exposes request counts and latencies by route and by RPC", async () => {
    await fetch(`${running.baseUrl}/v2/api-users?limit=1`);
    await operatorCall(running.baseUrl, "CreateTmc", { name: "Metrics TMC" });
    const text = await (await fetch(`${running.baseUrl}/metrics`)).text();
    assert.match(text, /http_requests_total\{method="GET",route="\/v2\/api-users",status="401"\} [1-9]/);
    assert.match(text, /http_request_duration_seconds_bucket\{le="[\d.]+",method="GET",route="\/v2\/api-users"\}/);
    assert.match(
      text,
      /rpc_requests_total\{service="travel.apiuser.v2.ApiUserService",method="GetApiUsers",code="unauthenticated"\} [1-9]/,
    );
    assert.match(
      text,
      /rpc_requests_total\{service="travel.operator.v1.OperatorService",method="CreateTmc",code="ok"\} [1-9]/,
    );
    assert.match(text, /process_cpu_seconds_total/);
    // Readiness, read at the scrape: each dependency's current status 1, the others 0.
    assert.match(text, /readiness_dependency_status\{dependency="database",status="up"\} 1\n/);
    assert.match(text, /readiness_dependency_status\{dependency="redis",status="up"\} 1\n/);
    assert.match(text, /readiness_dependency_status\{dependency="redis",status="degraded"\} 0\n/);
    // Admission, read at the scrape: the adaptive limit (twice the pool to start), nothing running now.
    assert.match(text, /^admission_concurrency_limit \d+$/m);
    assert.match(text, /^admission_calls\{state="running"\} 0$/m);
    assert.match(text, /^admission_calls\{state="waiting"\} 0$/m);
  });

  test("GET /metrics passes `promtool check metrics` (Prometheus's own linter of the exposition format)", async () => {
    await fetch(`${running.baseUrl}/v2/api-users?limit=1`);
    const text = await (await fetch(`${running.baseUrl}/metrics`)).text();
    const check = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
    if (check.error) throw new Error(`promtool is needed (apt-get install prometheus): ${check.error.message}`);
    assert.equal(check.status, 0, `${check.stdout}${check.stderr}`);
    // The check can fail: a gauge named like a counter is what it refused on prom-client's defaults.
    const wrong = `${text}# HELP made_up_total A gauge.\n# TYPE made_up_total gauge\nmade_up_total 1\n`;
    assert.notEqual(spawnSync("promtool", ["check", "metrics"], { input: wrong, encoding: "utf8" }).status, 0);
  });

  test("GET /metrics counts the audit events written per tenant, each under its own tmc_id", async () => {
    const busy = await operatorCall<{ tmcId: string; clientId: string; clientSecret: string }>(
      running.baseUrl,
      "Seed",
      {},
    );
    const quiet = await operatorCall<{ tmcId: string; clientId: string; clientSecret: string }>(
      running.baseUrl,
      "Seed",
      {},
    );
    for (let i = 0; i < 3; i++)
      assert.equal((await fetchToken(running.baseUrl, busy.clientId, busy.clientSecret)).status, 200);
    assert.equal((await fetchToken(running.baseUrl, quiet.clientId, quiet.clientSecret)).status, 200);
    // The audit batch is written off the request path (every 250 ms): scrape until it is.
    const written = (text: string, tmcId: string) =>
      Number(new RegExp(`audit_events_written_total\\{tmc_id="${tmcId}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    let text = "";
    for (let i = 0; i < 50 && (written(text, busy.tmcId) < 3 || written(text, quiet.tmcId) < 1); i++) {
      await new Promise((r) => setTimeout(r, 100));
      text = await (await fetch(`${running.baseUrl}/metrics`)).text();
    }
    // Three tokens issued to one tenant, one to the other (TOKEN_ISSUED each).
    assert.equal(
      written(text, busy.tmcId),
      3,
      text
        .split("\n")
        .filter((l) => l.startsWith("audit_events_written"))
        .join("\n"),
    );
    assert.equal(written(text, quiet.tmcId), 1);
  });

  test("GET /openapi.json is OpenAPI 3.1 derived from the contract, with the documented names", async () => {
    const doc = (await (await fetch(`${running.baseUrl}/openapi.json`)).json()) as any;
    assert.equal(doc.openapi, "3.1.0");
    const op = (path: string, verb: string) => doc.paths[path]?.[verb];
    assert.equal(op("/v2/auth/oauth2-token", "post").operationId, "fetchOauth2Token");
    assert.ok(op("/v2/auth/oauth2-token", "post").requestBody.content["application/x-www-form-urlencoded"]);
    // No bearer token: the client authenticates with HTTP Basic or the form's client_secret.
    assert.deepEqual(op("/v2/auth/oauth2-token", "post").security, [{ ClientSecretBasic: [] }, {}]);
    assert.deepEqual(doc.servers, [{ url: "http://auth.test" }], "the public URL (TOKEN_ISSUER)");
    assert.equal(op("/v2/api-users", "post").operationId, "createApiUser");
    assert.ok(op("/v2/api-users", "post").responses["409"]);
    assert.equal(op("/v2/api-users", "get").operationId, "getApiUsers");
    const limit = op("/v2/api-users", "get").parameters.find((p: { name: string }) => p.name === "limit");
    assert.deepEqual(
      { in: limit.in, minimum: limit.schema.minimum, maximum: limit.schema.maximum },
      { in: "query", minimum: 0, maximum: 100 },
    );
    assert.ok(op("/v2/api-users/revoke", "post").responses["204"]);
    assert.equal(op("/v2/users/{userId}", "get").operationId, "getUserInfo");
    assert.equal(op("/v3/air/company-credits/migrations", "post").operationId, "migrateUnusedCreditsInCompanyCredits");
    const schemas = doc.components.schemas;
    assert.deepEqual(Object.keys(schemas["travel.auth.v2.FetchOauth2TokenResponse"].properties).sort(), [
      "access_token",
      "expires_in",
      "issued_token_type",
      "refresh_token",
      "scope",
      "token_type",
    ]);
    assert.deepEqual(Object.keys(schemas["travel.apiuser.v2.GetApiUsersResponse"].properties).sort(), [
      "apiUsers",
      "totalCount",
    ]);
    assert.deepEqual(schemas["travel.apiuser.v2.ApiUserRole"].enum, [
      "API_USER_ROLE_UNSPECIFIED",
      "TMC_ADMIN",
      "COMPANY_ADMIN",
    ]);
    assert.ok(schemas["travel.aircredit.v3.ListCompanyTransferableUnusedCreditsResponse"].properties.unusedCreditInfos);
    assert.equal(schemas["travel.apiuser.v2.CreateApiUserRequest"].properties.tmcId.format, "uuid");
    // Every $ref resolves.
    const refs = JSON.stringify(doc).match(/#\/components\/schemas\/[\w.]+/g) ?? [];
    for (const ref of new Set(refs)) assert.ok(schemas[ref.split("/").pop()!], `${ref} resolves`);
  });
});

describe("readiness when a dependency is down", () => {
  test("Redis unreachable: /readyz stays 200 and says degraded (the fallbacks serve; one Redis blip must not empty a load balancer)", async () => {
    const running = await startService({ env: { REDIS_URL: "redis://127.0.0.1:1" } });
    try {
      const response = await fetch(`${running.baseUrl}/readyz`);
      assert.equal(response.status, 200);
      const body = (await response.json()) as any;
      assert.equal(body.status, "degraded");
      assert.deepEqual(body.checks, { database: "up", redis: "degraded" });
      // The same state on /metrics, for the AuthReadinessDegraded alert.
      const metrics = await (await fetch(`${running.baseUrl}/metrics`)).text();
      assert.match(metrics, /readiness_dependency_status\{dependency="redis",status="degraded"\} 1\n/);
      assert.match(metrics, /readiness_dependency_status\{dependency="redis",status="up"\} 0\n/);
      assert.match(metrics, /readiness_dependency_status\{dependency="database",status="up"\} 1\n/);
      // Liveness is independent of dependencies.
      assert.equal((await fetch(`${running.baseUrl}/healthz`)).status, 200);
    } finally {
      await running.stop();
      await dropStorage(running.storage);
    }
  });

  test(
    "Postgres unreachable: /readyz → 503 ErrorResponse naming it, within its own timeout; RPCs → 503, not 500",
    { skip: !isPostgres && "the embedded database cannot be cut off" },
    async () => {
      const { proxy, url } = await proxyInFrontOf(TEST_DATABASE_URL, 5432);
      const storage = newStorage();
      const running = await startService({
        storage,
        env: { ...PRODUCTION_DATABASE_TIMEOUTS, DATABASE_URL: url, READINESS_TIMEOUT_MS: "500" },
      });
      try {
        const seed = await operatorCall<{ clientId: string; clientSecret: string }>(running.baseUrl, "Seed", {});
        await proxy.cut();
        // /readyz answers at once from the state its background check refreshes (READINESS_INTERVAL_MS,
        // 1 s), which turns "down" within an interval plus the check's own timeout (500 ms here).
        const cutAt = Date.now();
        let response: Response;
        for (;;) {
          const started = Date.now();
          response = await fetch(`${running.baseUrl}/readyz`);
          assert.ok(Date.now() - started < 1_500, "readiness answers from its last check, not after a new one");
          if (response.status !== 200 || Date.now() - cutAt > 10_000) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        assert.equal(response.status, 503);
        assert.ok(Date.now() - cutAt < 1_000 + 500 + 1_500, `not ready ${Date.now() - cutAt} ms after the cut`);
        const body = (await response.json()) as any;
        assert.equal(body.errorMessages[0].errorCode, "SERVICE_NOT_READY");
        assert.deepEqual(body.errorMessages[0].errorParameters, [
          { name: "database", value: "down" },
          { name: "redis", value: "up" },
        ]);
        const metrics = await (await fetch(`${running.baseUrl}/metrics`)).text();
        assert.match(metrics, /readiness_dependency_status\{dependency="database",status="down"\} 1\n/);
        const token = await fetchToken(running.baseUrl, seed.clientId, seed.clientSecret);
        assert.equal(token.status, 503, await token.clone().text());
        assert.equal(((await token.json()) as any).errorMessages[0].errorCode, "DEPENDENCY_UNAVAILABLE");
        await proxy.restore();
        // Service resumes without a restart.
        let status = 0;
        for (let i = 0; i < 50 && status !== 200; i++) {
          status = (await fetchToken(running.baseUrl, seed.clientId, seed.clientSecret)).status;
          if (status !== 200) await new Promise((r) => setTimeout(r, 100));
        }
        assert.equal(status, 200);
      } finally {
        await running.stop();
        await proxy.close();
        await dropStorage(storage);
      }
    },
  );

  test(
    "Postgres stalled: /readyz still answers in milliseconds, from the last check, while the check waits out its timeout",
    { skip: !isPostgres && "the embedded database cannot be stalled" },
    async () => {
      const { proxy, url } = await proxyInFrontOf(TEST_DATABASE_URL, 5432);
      const storage = newStorage();
      const running = await startService({
        storage,
        env: { ...PRODUCTION_DATABASE_TIMEOUTS, DATABASE_URL: url, READINESS_TIMEOUT_MS: "2000" },
      });
      try {
        proxy.stall();
        // A probe that checked for itself would wait READINESS_TIMEOUT_MS (2 s) here, as HAProxy's did under load.
        const latencies: number[] = [];
        let status = 200;
        const stalledAt = Date.now();
        while (status === 200 && Date.now() - stalledAt < 10_000) {
          const started = Date.now();
          status = (await fetch(`${running.baseUrl}/readyz`)).status;
          latencies.push(Date.now() - started);
          await new Promise((r) => setTimeout(r, 100));
        }
        assert.equal(status, 503, "the stall shows once a check has timed out");
        assert.ok(latencies.length >= 5, `${latencies.length} probes before the stall showed`);
        assert.ok(Math.max(...latencies) < 500, `every probe answered at once: ${latencies.join(", ")} ms`);
      } finally {
        proxy.resume();
        await running.stop();
        await proxy.close();
        await dropStorage(storage);
      }
    },
  );
});
