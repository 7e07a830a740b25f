// End-to-end test of src/rpc/reflection.ts and src/rpc/health.ts: a real h2c
// connect-node server, queried by independent clients (@grpc/grpc-js with
// @grpc/proto-loader, and the `buf curl` CLI).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { execFile } from "node:child_process";
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { file_travel_apiuser_v2_api_user } from "../../gen/travel/apiuser/v2/api_user_pb.js";
import { registerReflection } from "../../src/rpc/reflection.js";
import { createHealthService, registerHealth } from "../../src/rpc/health.js";
import { waitFor } from "../helpers/wait.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const API_USER_SERVICE = "travel.apiuser.v2.ApiUserService";

// ---- grpc-js client plumbing ------------------------------------------------

type Msg = Record<string, any>;
type ClientCtor = new (address: string, creds: grpc.ChannelCredentials) => grpc.Client & Record<string, any>;

const pkg = grpc.loadPackageDefinition(
  protoLoader.loadSync(
    ["grpc/reflection/v1/reflection.proto", "grpc/reflection/v1alpha/reflection.proto", "grpc/health/v1/health.proto"],
    { includeDirs: [`${root}proto`], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true },
  ),
) as any;

/** Sends `requests` on one reflection stream and collects all responses. */
async function reflect(client: grpc.Client & Record<string, any>, requests: Msg[]): Promise<Msg[]> {
  const call: grpc.ClientDuplexStream<Msg, Msg> = client.ServerReflectionInfo();
  const responses: Msg[] = [];
  call.on("data", (r: Msg) => responses.push(r));
  const done = new Promise<void>((resolve, reject) => {
    call.on("error", reject);
    call.on("end", resolve);
  });
  for (const r of requests) call.write({ host: "", ...r });
  call.end();
  await done;
  assert.equal(responses.length, requests.length);
  return responses;
}

function decodeFiles(response: Msg): FileDescriptorProto[] {
  assert.equal(response.message_response, "file_descriptor_response", JSON.stringify(response.error_response));
  return response.file_descriptor_response.file_descriptor_proto.map((b: Buffer) =>
    fromBinary(FileDescriptorProtoSchema, new Uint8Array(b)),
  );
}

function unary(client: grpc.Client & Record<string, any>, method: string, req: Msg): Promise<Msg> {
  return new Promise((resolve, reject) =>
    client[method](req, { deadline: Date.now() + 5000 }, (err: grpc.ServiceError | null, res: Msg) =>
      err ? reject(err) : resolve(res),
    ),
  );
}

// ---- server -------------------------------------------------------------------

let healthy = true;
let checkCalls = 0;
const health = createHealthService(
  async () => {
    checkCalls++;
    return healthy;
  },
  { services: [API_USER_SERVICE], pollIntervalMs: 25 },
);

let server: http2.Http2Server;
let address: string;
const sessions = new Set<http2.ServerHttp2Session>();
const clients: grpc.Client[] = [];
function client(ctor: ClientCtor) {
  const c = new ctor(address, grpc.credentials.createInsecure());
  clients.push(c);
  return c;
}

before(async () => {
  const routes = (router: ConnectRouter) => {
    registerReflection(router, [file_travel_apiuser_v2_api_user]);
    registerHealth(router, health);
  };
  server = http2.createServer(connectNodeAdapter({ routes }));
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  clients.forEach((c) => c.close());
  sessions.forEach((s) => s.destroy());
  await new Promise((resolve) => server.close(resolve));
});

// ---- reflection -----------------------------------------------------------------

for (const version of ["v1", "v1alpha"] as const) {
  describe(`reflection ${version}`, () => {
    const reflection = () => client(pkg.grpc.reflection[version].ServerReflection);

    it("list_services lists the given, reflection and health services", async () => {
      const [res] = await reflect(reflection(), [{ list_services: "" }]);
      const names = res!.list_services_response.service.map((s: Msg) => s.name);
      for (const name of [
        API_USER_SERVICE,
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
        "grpc.health.v1.Health",
      ]) {
        assert.ok(names.includes(name), `${name} missing from ${names}`);
      }
      assert.equal(new Set(names).size, names.length, "no duplicates");
    });

    it("file_containing_symbol returns the file plus transitive dependencies", async () => {
      const [res] = await reflect(reflection(), [{ file_containing_symbol: API_USER_SERVICE }]);
      assert.equal(res!.original_request.file_containing_symbol, API_USER_SERVICE);
      const files = decodeFiles(res!);
      const names = files.map((f) => f.name);
      assert.equal(names[0], "travel/apiuser/v2/api_user.proto");
      for (const dep of [
        "google/api/annotations.proto",
        "google/api/http.proto",
        "google/protobuf/descriptor.proto",
        "buf/validate/validate.proto",
      ]) {
        assert.ok(names.includes(dep), `${dep} missing from ${names}`);
      }
      assert.equal(new Set(names).size, names.length, "each file sent once");
      // The set is self-contained: a registry can be built from it alone.
      const byName = new Map(files.map((f) => [f.name, f]));
      const registry = createFileRegistry(files[0]!, (name) => byName.get(name));
      // The same methods as the compiled descriptor: a new RPC needs no change here.
      assert.deepEqual(
        registry.getService(API_USER_SERVICE)?.methods.map((m) => m.name),
        file_travel_apiuser_v2_api_user.services
          .find((s) => s.typeName === API_USER_SERVICE)!
          .methods.map((m) => m.name),
      );
    });

    it("file_containing_symbol resolves methods, messages, enums, values, fields, nested types and dependency symbols", async () => {
      const cases: [string, string][] = [
        [`${API_USER_SERVICE}.CreateApiUser`, "travel/apiuser/v2/api_user.proto"],
        ["travel.apiuser.v2.CreateApiUserRequest", "travel/apiuser/v2/api_user.proto"],
        ["travel.apiuser.v2.CreateApiUserRequest.tmc_id", "travel/apiuser/v2/api_user.proto"],
        ["travel.apiuser.v2.ApiUserRole", "travel/apiuser/v2/api_user.proto"],
        ["travel.apiuser.v2.TMC_ADMIN", "travel/apiuser/v2/api_user.proto"],
        [".travel.apiuser.v2.GetApiUsersResponse", "travel/apiuser/v2/api_user.proto"],
        ["google.protobuf.DescriptorProto.ExtensionRange", "google/protobuf/descriptor.proto"],
        ["google.protobuf.FieldDescriptorProto.Type", "google/protobuf/descriptor.proto"],
        ["google.api.http", "google/api/annotations.proto"],
        ["buf.validate.field", "buf/validate/validate.proto"],
        ["grpc.health.v1.Health.Watch", "grpc/health/v1/health.proto"],
        ["grpc.health.v1.HealthCheckResponse.ServingStatus", "grpc/health/v1/health.proto"],
        [`grpc.reflection.${version}.ServerReflection`, `grpc/reflection/${version}/reflection.proto`],
      ];
      const responses = await reflect(
        reflection(),
        cases.map(([symbol]) => ({ file_containing_symbol: symbol })),
      );
      cases.forEach(([symbol, file], i) => assert.equal(decodeFiles(responses[i]!)[0]!.name, file, symbol));
    });

    it("file_by_filename, file_containing_extension and all_extension_numbers_of_type", async () => {
      const [byName, byExt, numbers] = await reflect(reflection(), [
        { file_by_filename: "google/api/annotations.proto" },
        { file_containing_extension: { containing_type: "google.protobuf.MethodOptions", extension_number: 72295728 } },
        { all_extension_numbers_of_type: "google.protobuf.MethodOptions" },
      ]);
      assert.deepEqual(
        decodeFiles(byName!).map((f) => f.name),
        ["google/api/annotations.proto", "google/api/http.proto", "google/protobuf/descriptor.proto"],
      );
      assert.equal(decodeFiles(byExt!)[0]!.name, "google/api/annotations.proto");
      assert.equal(numbers!.message_response, "all_extension_numbers_response");
      assert.equal(numbers!.all_extension_numbers_response.base_type_name, "google.protobuf.MethodOptions");
      assert.ok(numbers!.all_extension_numbers_response.extension_number.includes(72295728));
    });

    it("unknown names give error_response NOT_FOUND and keep the stream usable", async () => {
      const responses = await reflect(reflection(), [
        { file_containing_symbol: "no.such.Symbol" },
        { file_by_filename: "travel/apiuser/v2/api_user" }, // DescFile.name, not a proto filename
        { file_containing_extension: { containing_type: "google.protobuf.MethodOptions", extension_number: 1 } },
        { all_extension_numbers_of_type: "no.such.Message" },
        { list_services: "" },
      ]);
      for (const res of responses.slice(0, 4)) {
        assert.equal(res.message_response, "error_response");
        assert.equal(res.error_response.error_code, grpc.status.NOT_FOUND);
      }
      assert.equal(responses[4]!.message_response, "list_services_response");
    });
  });
}

// ---- health ------------------------------------------------------------------

describe("health", () => {
  const healthClient = () => client(pkg.grpc.health.v1.Health);

  it("Check reports SERVING / NOT_SERVING from check() for '' and registered services", async () => {
    const c = healthClient();
    healthy = true;
    assert.equal((await unary(c, "Check", { service: "" })).status, "SERVING");
    assert.equal((await unary(c, "Check", { service: API_USER_SERVICE })).status, "SERVING");
    healthy = false;
    assert.equal((await unary(c, "Check", { service: "" })).status, "NOT_SERVING");
    assert.equal((await unary(c, "Check", { service: API_USER_SERVICE })).status, "NOT_SERVING");
    healthy = true;
  });

  it("Check for an unknown service fails with NOT_FOUND", async () => {
    await assert.rejects(unary(healthClient(), "Check", { service: "no.such.Service" }), (err: grpc.ServiceError) => {
      assert.equal(err.code, grpc.status.NOT_FOUND);
      return true;
    });
  });

  it("List returns every status", async () => {
    healthy = true;
    const res = await unary(healthClient(), "List", {});
    assert.deepEqual(res.statuses, { "": { status: "SERVING" }, [API_USER_SERVICE]: { status: "SERVING" } });
  });

  it("Watch sends the initial status, then changes, and stops polling on cancel", async () => {
    healthy = true;
    const call: grpc.ClientReadableStream<Msg> = healthClient().Watch({ service: "" });
    const received: string[] = [];
    const waiters: (() => void)[] = [];
    call.on("data", (r: Msg) => {
      received.push(r.status);
      waiters.splice(0).forEach((w) => w());
    });
    const ended = new Promise<grpc.ServiceError>((resolve) => call.on("error", resolve));
    const next = (count: number) =>
      new Promise<void>((resolve) => (received.length >= count ? resolve() : waiters.push(resolve)));

    await next(1);
    assert.deepEqual(received, ["SERVING"]);
    // Several polls without a change send nothing.
    const polled = checkCalls;
    await waitFor("three more health polls", () => checkCalls >= polled + 3, { timeoutMs: 2_000, intervalMs: 5 });
    assert.deepEqual(received, ["SERVING"]);
    healthy = false;
    await next(2);
    healthy = true;
    await next(3);
    assert.deepEqual(received, ["SERVING", "NOT_SERVING", "SERVING"]);

    call.cancel();
    assert.equal((await ended).code, grpc.status.CANCELLED);
    // The server notices the cancellation: no poll during two poll intervals (a poll in flight may finish).
    let seen = checkCalls;
    await waitFor(
      "the server to stop polling",
      async () => {
        await sleep(2 * health.pollIntervalMs);
        const quiet = checkCalls === seen;
        seen = checkCalls;
        return quiet;
      },
      { timeoutMs: 2_000, intervalMs: 0 },
    );
    // Negative assertion: six more poll intervals pass without a poll.
    await sleep(6 * health.pollIntervalMs);
    assert.equal(checkCalls, seen, "server stopped polling after the client went away");
  });

  it("Watch for an unknown service sends SERVICE_UNKNOWN without ending the call", async () => {
    const call: grpc.ClientReadableStream<Msg> = healthClient().Watch({ service: "no.such.Service" });
    call.on("error", () => {}); // CANCELLED below
    const [first] = (await once(call, "data")) as [Msg];
    assert.equal(first.status, "SERVICE_UNKNOWN");
    // Negative assertion: the call is still open four poll intervals later.
    await sleep(4 * health.pollIntervalMs);
    assert.equal(call.destroyed, false);
    call.cancel();
  });
});

// ---- buf curl (real CLI, Go reflection client) -------------------------------------

describe("buf curl", () => {
  const buf = (...args: string[]) =>
    promisify(execFile)(`${root}node_modules/.bin/buf`, ["curl", "--http2-prior-knowledge", ...args], {
      timeout: 30_000,
    });

  it("--list-services lists the services via reflection", async () => {
    const { stdout } = await buf("--list-services", `http://${address}`);
    const names = stdout.trim().split("\n");
    for (const name of [API_USER_SERVICE, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"]) {
      assert.ok(names.includes(name), `${name} missing from ${stdout}`);
    }
  });

  it("--list-methods resolves the schema of ApiUserService via reflection", async () => {
    const { stdout } = await buf("--list-methods", `http://${address}`);
    assert.ok(stdout.includes(`${API_USER_SERVICE}/CreateApiUser`), stdout);
  });

  it("calls Health/Check using the reflected schema", async () => {
    healthy = true;
    const { stdout } = await buf("--protocol", "grpc", "-d", "{}", `http://${address}/grpc.health.v1.Health/Check`);
    assert.deepEqual(JSON.parse(stdout), { status: "SERVING" });
  });
});
