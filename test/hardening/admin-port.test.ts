// Issue 8, item 6: the operator surface (OperatorService in every protocol, its gRPC reflection,
// /metrics) can be served on a separate admin port, off the public one. Checked through real
// protocols: fetch (Connect JSON), connect-node (Connect, gRPC-Web), @grpc/grpc-js (gRPC,
// reflection, health) and the CLI as a child process. Without ADMIN_PORT nothing changes; the
// rest of the suite runs that way.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { OperatorService } from "../../gen/travel/operator/v1/operator_pb.js";
import { ConfigError, loadConfig } from "../../src/config/config.js";
import { backend, newStorage, serviceEnv, TEST_OPERATOR_TOKEN, type Storage } from "../helpers/backend.js";
import { runCli as runCliProcess, spawnServer, type CliResult, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage, operatorHeaders, startService, type RunningService } from "../helpers/service.js";

const OPERATOR = "travel.operator.v1.OperatorService";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// ---- independent gRPC clients (schema from proto/ via proto-loader) ----------------------

type Msg = Record<string, any>;
const grpcPackage = grpc.loadPackageDefinition(
  protoLoader.loadSync(
    ["travel/operator/v1/operator.proto", "grpc/reflection/v1/reflection.proto", "grpc/health/v1/health.proto"],
    {
      includeDirs: [fileURLToPath(new URL("../../proto", import.meta.url))],
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    },
  ),
) as any;

const grpcClients: grpc.Client[] = [];
function grpcClient(ctor: any, baseUrl: string): grpc.Client & Record<string, any> {
  const client = new ctor(new URL(baseUrl).host, grpc.credentials.createInsecure());
  grpcClients.push(client);
  return client;
}

function grpcUnary(
  client: grpc.Client & Record<string, any>,
  method: string,
  request: Msg,
  metadata = new grpc.Metadata(),
): Promise<Msg> {
  return new Promise((resolve, reject) =>
    client[method](request, metadata, { deadline: Date.now() + 10_000 }, (err: grpc.ServiceError | null, res: Msg) =>
      err ? reject(err) : resolve(res),
    ),
  );
}

function operatorMetadata(): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${TEST_OPERATOR_TOKEN}`);
  return metadata;
}

/** One gRPC reflection (v1) stream: the services listed, and whether the operator's file is found. */
async function reflect(baseUrl: string): Promise<{ services: string[]; operatorFile: "found" | "not found" }> {
  const call: grpc.ClientDuplexStream<Msg, Msg> = grpcClient(
    grpcPackage.grpc.reflection.v1.ServerReflection,
    baseUrl,
  ).ServerReflectionInfo();
  const responses: Msg[] = [];
  call.on("data", (r: Msg) => responses.push(r));
  const done = new Promise<void>((resolve, reject) => {
    call.on("error", reject);
    call.on("end", resolve);
  });
  call.write({ host: "", list_services: "" });
  call.write({ host: "", file_containing_symbol: `${OPERATOR}.CreateTmc` });
  call.end();
  await done;
  const [listed, symbol] = responses;
  assert.equal(listed?.message_response, "list_services_response", JSON.stringify(listed));
  if (symbol?.message_response === "error_response")
    assert.equal(symbol.error_response.error_code, grpc.status.NOT_FOUND);
  return {
    services: listed.list_services_response.service.map((s: Msg) => s.name).sort(),
    operatorFile: symbol?.message_response === "file_descriptor_response" ? "found" : "not found",
  };
}

/** An operator RPC over the Connect protocol's JSON, as plain curl sends it. */
function connectJson(
  baseUrl: string,
  method: string,
  body: object,
  headers: Record<string, string> = operatorHeaders,
): Promise<Response> {
  return fetch(`${baseUrl}/${OPERATOR}/${method}`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

/** The ErrorResponse of a failed answer, with its status and first errorCode. */
async function errorOf(
  response: Response,
): Promise<{ status: number; errorCode: string | undefined; debugIdentifier: string | undefined }> {
  const body = (await response.json()) as { errorMessages?: Array<{ errorCode: string }>; debugIdentifier?: string };
  return {
    status: response.status,
    errorCode: body.errorMessages?.[0]?.errorCode,
    debugIdentifier: body.debugIdentifier,
  };
}

/** The code an RPC through a connect-node transport failed with. */
async function connectCodeOf(transport: Transport): Promise<Code> {
  try {
    await createClient(OperatorService, transport).createTmc(
      { name: "Nowhere" },
      { headers: operatorHeaders, timeoutMs: 10_000 },
    );
  } catch (error) {
    return ConnectError.from(error).code;
  }
  assert.fail("the RPC succeeded");
}

// ---- the CLI as operators run it ----------------------------------------------------------

/** The CLI under a loaded machine: twice the default wait. */
const runCli = (args: readonly string[], env: Record<string, string>) => runCliProcess(args, env);

function cliJson(r: CliResult): Record<string, unknown> {
  assert.equal(r.code, 0, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr.slice(0, 3000)}`);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

after(() => grpcClients.forEach((c) => c.close()));

// ---- settings ----------------------------------------------------------------------------------

describe("ADMIN_PORT, ADMIN_HOST and ADMIN_URL", () => {
  test("unset: no admin listener, and the CLI talks to SERVER_URL", () => {
    const config = loadConfig({ PORT: "9000" });
    assert.equal(config.http.admin, undefined);
    assert.equal(config.adminUrl, "http://127.0.0.1:9000");
    assert.equal(loadConfig({ SERVER_URL: "http://auth.internal:80" }).adminUrl, "http://auth.internal:80");
  });

  test("set: the admin listener binds to the loopback address unless told otherwise, and the CLI goes there", () => {
    const config = loadConfig({ HOST: "0.0.0.0", PORT: "8080", ADMIN_PORT: "9090" });
    assert.deepEqual(config.http.admin, { host: "127.0.0.1", port: 9090 });
    assert.equal(config.adminUrl, "http://127.0.0.1:9090");
    assert.equal(config.serverUrl, "http://127.0.0.1:8080", "the public address is unchanged");
    assert.deepEqual(loadConfig({ ADMIN_PORT: "9090", ADMIN_HOST: "::1" }).http.admin, { host: "::1", port: 9090 });
    assert.equal(loadConfig({ ADMIN_PORT: "9090", ADMIN_HOST: "::1" }).adminUrl, "http://[::1]:9090");
    assert.equal(
      loadConfig({ ADMIN_PORT: "9090", ADMIN_URL: "http://ops.internal:9999/" }).adminUrl,
      "http://ops.internal:9999",
    );
  });

  test("refused at start: the public port again, or a port or URL that is not one", () => {
    assert.throws(
      () => loadConfig({ PORT: "8080", ADMIN_PORT: "8080" }),
      (e: unknown) => e instanceof ConfigError && /ADMIN_PORT must differ from PORT/.test(e.message),
    );
    assert.throws(() => loadConfig({ ADMIN_PORT: "admin" }), ConfigError);
    assert.throws(() => loadConfig({ ADMIN_PORT: "70000" }), ConfigError);
    assert.throws(() => loadConfig({ ADMIN_URL: "not a url" }), ConfigError);
  });
});

// ---- one instance with an admin port ----------------------------------------------------------------

describe(`the operator surface on the admin port (${backend})`, () => {
  let running: RunningService;
  let admin: string;
  before(async () => {
    running = await startService({
      // X-Forwarded-For from the test's own address names the guessing address in the limit test.
      env: { ADMIN_PORT: "0", TRUSTED_PROXIES: "127.0.0.1", TOKEN_FAILURE_LIMIT: "5/900" },
    });
    admin = running.service.adminAddress!;
    assert.match(admin, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(admin, running.baseUrl);
  });
  after(async () => {
    await running?.stop();
    if (running) await dropStorage(running.storage);
  });

  test("Connect JSON: an operator RPC works on the admin port; the public port answers 404 ROUTE_NOT_FOUND", async () => {
    const created = await connectJson(admin, "CreateTmc", { name: "Admin-port TMC" });
    assert.equal(created.status, 200);
    const tmc = (await created.json()) as { tmcId: string; name: string };
    assert.match(tmc.tmcId, UUID);
    assert.equal(tmc.name, "Admin-port TMC");

    const refused = await errorOf(await connectJson(running.baseUrl, "CreateTmc", { name: "Public-port TMC" }));
    assert.equal(refused.status, 404);
    assert.equal(refused.errorCode, "ROUTE_NOT_FOUND");
    assert.match(refused.debugIdentifier ?? "", /\S/);
  });

  test("gRPC (grpc-js): the operator RPC works on the admin port and is UNIMPLEMENTED on the public port", async () => {
    const onAdmin = grpcClient(grpcPackage.travel.operator.v1.OperatorService, admin);
    const tmc = await grpcUnary(onAdmin, "CreateTmc", { name: "gRPC admin TMC" }, operatorMetadata());
    assert.match(tmc.tmc_id, UUID);
    const company = await grpcUnary(
      onAdmin,
      "CreateCompany",
      { tmc_id: tmc.tmc_id, name: "gRPC company" },
      operatorMetadata(),
    );
    assert.equal(company.tmc_id, tmc.tmc_id);

    const onPublic = grpcClient(grpcPackage.travel.operator.v1.OperatorService, running.baseUrl);
    await assert.rejects(
      grpcUnary(onPublic, "CreateTmc", { name: "gRPC public TMC" }, operatorMetadata()),
      (err: grpc.ServiceError) => {
        assert.equal(err.code, grpc.status.UNIMPLEMENTED, err.message);
        return true;
      },
    );
  });

  test("Connect, gRPC-Web and gRPC (connect-node): served on the admin port only", async () => {
    const transports = (baseUrl: string) => [
      createConnectTransport({ baseUrl, httpVersion: "1.1" }),
      createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }),
      createGrpcTransport({ baseUrl }),
    ];
    for (const transport of transports(admin)) {
      const tmc = await createClient(OperatorService, transport).createTmc(
        { name: "Every protocol" },
        { headers: operatorHeaders, timeoutMs: 10_000 },
      );
      assert.match(tmc.tmcId, UUID);
    }
    for (const transport of transports(running.baseUrl))
      assert.equal(Code[await connectCodeOf(transport)], Code[Code.Unimplemented]);
  });

  test("/metrics only on the admin port (the public one: 404 ROUTE_NOT_FOUND); both ports answer /healthz", async () => {
    const metrics = await fetch(`${admin}/metrics`);
    assert.equal(metrics.status, 200);
    const text = await metrics.text();
    // The admin port's own RPCs are counted in the one registry, with the public port's requests.
    assert.match(text, new RegExp(`rpc_requests_total\\{service="${OPERATOR}",method="CreateTmc",code="ok"\\} [1-9]`));
    assert.match(text, /process_cpu_seconds_total/);

    const refused = await errorOf(await fetch(`${running.baseUrl}/metrics`));
    assert.deepEqual([refused.status, refused.errorCode], [404, "ROUTE_NOT_FOUND"]);

    for (const base of [admin, running.baseUrl]) {
      const health = await fetch(`${base}/healthz`);
      assert.equal(health.status, 200, base);
      assert.deepEqual(await health.json(), { status: "ok" });
    }
    assert.equal((await fetch(`${running.baseUrl}/readyz`)).status, 200, "readiness stays on the public port");
  });

  test("the public port keeps everything else: REST, OpenAPI, JWKS", async () => {
    for (const path of ["/openapi.json", "/.well-known/jwks.json", "/.well-known/oauth-authorization-server"]) {
      assert.equal((await fetch(`${running.baseUrl}${path}`)).status, 200, path);
      assert.equal((await fetch(`${admin}${path}`)).status, 404, `${path} is not on the admin port`);
    }
    const unauthenticated = await errorOf(await fetch(`${running.baseUrl}/v2/api-users?limit=1`));
    assert.equal(unauthenticated.status, 401, "the REST gateway answers on the public port");
  });

  test("gRPC reflection lists and resolves OperatorService on the admin port only", async () => {
    const onAdmin = await reflect(admin);
    assert.deepEqual(onAdmin.services, [
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
      "grpc.reflection.v1alpha.ServerReflection",
      OPERATOR,
    ]);
    assert.equal(onAdmin.operatorFile, "found");

    const onPublic = await reflect(running.baseUrl);
    assert.ok(!onPublic.services.includes(OPERATOR), `public reflection lists ${onPublic.services.join(", ")}`);
    assert.ok(onPublic.services.includes("travel.auth.v2.AuthService"), "the public services stay listed");
    assert.equal(onPublic.operatorFile, "not found");
  });

  test("gRPC health reports OperatorService on the admin port, and knows nothing of it on the public port", async () => {
    const onAdmin = grpcClient(grpcPackage.grpc.health.v1.Health, admin);
    assert.equal((await grpcUnary(onAdmin, "Check", { service: OPERATOR })).status, "SERVING");
    const onPublic = grpcClient(grpcPackage.grpc.health.v1.Health, running.baseUrl);
    assert.equal((await grpcUnary(onPublic, "Check", { service: "travel.auth.v2.AuthService" })).status, "SERVING");
    await assert.rejects(
      grpcUnary(onPublic, "Check", { service: OPERATOR }),
      (err: grpc.ServiceError) => err.code === grpc.status.NOT_FOUND,
    );
  });

  test("the operator credential is required on the admin port, and guesses there are limited per address", async () => {
    const missing = await errorOf(await connectJson(admin, "GetTokenLockout", { address: "192.0.2.1" }, {}));
    assert.equal(missing.status, 401);
    const apiUserLike = await errorOf(
      await connectJson(
        admin,
        "GetTokenLockout",
        { address: "192.0.2.1" },
        { authorization: "Bearer not-the-operator" },
      ),
    );
    assert.equal(apiUserLike.status, 401);

    const guess = (address: string, token: string) =>
      connectJson(
        admin,
        "GetTokenLockout",
        { address: "192.0.2.1" },
        { authorization: `Bearer ${token}`, "x-forwarded-for": address },
      ).then((r) => r.status);
    const guesser = "203.0.113.66";
    const statuses = [];
    for (let i = 0; i < 7; i++) statuses.push(await guess(guesser, `guess-${i}`));
    assert.deepEqual(statuses, [...Array(5).fill(401), 429, 429]);
    assert.equal(await guess(guesser, TEST_OPERATOR_TOKEN), 200, "the right token passes at that address");
    assert.equal(await guess(guesser, "guess-again"), 429, "wrong ones stay refused there");
    assert.equal(await guess("192.0.2.250", TEST_OPERATOR_TOKEN), 200, "the operator elsewhere is not");
  });

  test("closing the service closes both ports", async () => {
    await running.stop();
    for (const base of [admin, running.baseUrl]) {
      await assert.rejects(
        fetch(`${base}/healthz`),
        (error: Error) => /ECONNREFUSED/.test(String((error.cause as Error | undefined)?.message ?? error.cause)),
        base,
      );
    }
  });
});

// ---- the server process and the CLI ---------------------------------------------------------------

describe(`the CLI and the server process with an admin port (${backend})`, () => {
  let storage: Storage;
  let server: ServerProcess;
  let adminAddress: string;
  before(async () => {
    storage = newStorage();
    server = await spawnServer(serviceEnv(storage, { ADMIN_PORT: "0" }));
    const listening = server.logLines().find((line) => String(line.msg).startsWith("service listening"))!;
    adminAddress = String(listening.adminAddress);
  });
  after(async () => {
    try {
      await server?.stop(5_000);
    } finally {
      if (storage) await dropStorage(storage);
    }
  });

  test("the start log line reports the admin address beside the public one", () => {
    assert.match(adminAddress, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(new URL(adminAddress).port, String(server.port));
  });

  test("with ADMIN_URL the CLI sends its RPC to the admin port", async () => {
    // SERVER_URL names the public port, which would refuse the RPC: success proves ADMIN_URL was used.
    const tmc = cliJson(
      await runCli(
        ["tmc", "create", "--name", "Via ADMIN_URL"],
        serviceEnv(storage, { SERVER_URL: server.address, ADMIN_URL: adminAddress }),
      ),
    );
    assert.match(String(tmc.tmcId), UUID);
    assert.equal(tmc.name, "Via ADMIN_URL");
  });

  test("with ADMIN_PORT alone the CLI derives the admin address (ADMIN_HOST, default loopback)", async () => {
    const env = serviceEnv(storage, { PORT: String(server.port), ADMIN_PORT: new URL(adminAddress).port });
    const tmc = cliJson(await runCli(["tmc", "create", "--name", "Via ADMIN_PORT"], env));
    assert.match(String(tmc.tmcId), UUID);
  });

  test("pointed at the public port only, the CLI is refused there (and does not fall back in-process)", async () => {
    const r = await runCli(
      ["tmc", "create", "--name", "Via the public port"],
      serviceEnv(storage, { SERVER_URL: server.address }),
    );
    assert.equal(r.code, 1, `stdout: ${r.stdout}\nstderr: ${r.stderr}`);
    assert.equal(r.stdout, "");
    assert.match(
      r.stderr,
      new RegExp(
        `^error: ${server.address} does not serve OperatorService \\((Unimplemented|ROUTE_NOT_FOUND)\\); .*set ADMIN_URL or ADMIN_PORT`,
        "m",
      ),
    );
  });

  test("SIGTERM drains and closes both ports: exit 0", async () => {
    const status = await server.stop(15_000);
    assert.deepEqual(status, { code: 0, signal: null }, server.stderr());
    await assert.rejects(fetch(`${adminAddress}/healthz`));
  });

  test("with no server answering at the admin address the CLI runs in-process, opening no port", async () => {
    // ADMIN_PORT 1 could not be bound without privileges: the in-process instance must not try.
    const tmc = cliJson(
      await runCli(
        ["tmc", "create", "--name", "Offline"],
        serviceEnv(storage, { ADMIN_PORT: "1", ADMIN_URL: "http://127.0.0.1:1" }),
      ),
    );
    assert.match(String(tmc.tmcId), UUID);
  });
});
