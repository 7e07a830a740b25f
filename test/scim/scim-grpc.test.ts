// ScimService over gRPC with an independent client: @grpc/grpc-js, the schema loaded from proto/
// by @grpc/proto-loader, google.protobuf.Struct bodies built and read by hand, error details
// decoded from the grpc-status-details-bin trailer.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { backend } from "../helpers/backend.js";
import { decodeRpcStatus, errorResponseIn } from "../helpers/grpc-status.js";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";
import { newScimCompany, newTmc, newUser, PATCH_OP, USER_SCHEMA, type ScimTenant } from "./scim-kit.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const pkg = grpc.loadPackageDefinition(
  protoLoader.loadSync(["travel/scim/v2/scim.proto"], {
    includeDirs: [`${root}proto`],
    keepCase: false,
    longs: String,
    enums: String,
    defaults: false,
    oneofs: true,
  }),
) as any;

/** JSON → google.protobuf.Struct as proto-loader represents it. */
function toValue(value: unknown): Record<string, unknown> {
  if (value === null) return { nullValue: "NULL_VALUE" };
  if (typeof value === "boolean") return { boolValue: value };
  if (typeof value === "number") return { numberValue: value };
  if (typeof value === "string") return { stringValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  return { structValue: toStruct(value as Record<string, unknown>) };
}
function toStruct(json: Record<string, unknown>) {
  return { fields: Object.fromEntries(Object.entries(json).map(([k, v]) => [k, toValue(v)])) };
}
function fromValue(value: any): unknown {
  switch (value.kind) {
    case "nullValue":
      return null;
    case "boolValue":
    case "numberValue":
    case "stringValue":
      return value[value.kind];
    case "listValue":
      return (value.listValue.values ?? []).map(fromValue);
    default:
      return fromStruct(value.structValue);
  }
}
function fromStruct(struct: any): any {
  return Object.fromEntries(Object.entries(struct?.fields ?? {}).map(([k, v]) => [k, fromValue(v)]));
}

describe(`ScimService over gRPC with @grpc/grpc-js (${backend})`, () => {
  let running: RunningService;
  let a: ScimTenant;
  let client: any;
  before(async () => {
    running = await startService();
    a = await newScimCompany(running.baseUrl, await newTmc(running.baseUrl, "gRPC SCIM TMC"), "gRPC company");
    client = new pkg.travel.scim.v2.ScimService(new URL(running.baseUrl).host, grpc.credentials.createInsecure());
  });
  after(async () => {
    client?.close();
    await running.stop();
    await dropStorage(running.storage);
  });

  const call = (method: string, request: object, token: string | null = a.scimToken) =>
    new Promise<{ response?: any; error?: grpc.ServiceError; headers?: grpc.Metadata }>((resolve) => {
      const metadata = new grpc.Metadata();
      if (token !== null) metadata.set("authorization", `Bearer ${token}`);
      let headers: grpc.Metadata | undefined;
      const pending = client[method](
        request,
        metadata,
        { deadline: Date.now() + 10_000 },
        (error: grpc.ServiceError | null, response: any) => resolve(error ? { error, headers } : { response, headers }),
      );
      pending.on("metadata", (m: grpc.Metadata) => (headers = m));
    });

  const errorOf = (error: grpc.ServiceError) => {
    const [raw] = error.metadata.get("grpc-status-details-bin");
    return errorResponseIn(decodeRpcStatus(new Uint8Array(raw as Buffer)).details)!;
  };

  test("create, list with a filter, patch, get, delete; errors in the SCIM dialect as details", async () => {
    const created = await call("createUser", {
      resource: toStruct(newUser("grpc.user@a.example", { externalId: "g-1" })),
    });
    assert.equal(created.error, undefined, created.error?.message);
    const user = fromStruct(created.response.resource);
    assert.deepEqual(
      [user.schemas, user.userName, user.externalId, user.active],
      [[USER_SCHEMA], "grpc.user@a.example", "g-1", true],
    );
    assert.ok(created.headers?.get("location")[0]?.toString().endsWith(`/v2/scim/v2/Users/${user.id}`));

    const listed = await call("listUsers", { filter: 'userName eq "GRPC.user@a.example"', count: 10 });
    const list = fromStruct(listed.response.resource);
    assert.deepEqual([list.totalResults, list.Resources[0].id], [1, user.id]);

    const patched = await call("patchUser", {
      userId: user.id,
      patch: toStruct({ schemas: [PATCH_OP], Operations: [{ op: "Replace", path: "active", value: "False" }] }),
    });
    assert.equal(fromStruct(patched.response.resource).active, false);
    assert.equal(fromStruct((await call("getUser", { userId: user.id })).response.resource).active, false);

    const deleted = await call("deleteUser", { userId: user.id });
    assert.equal(deleted.error, undefined);
    const gone = await call("getUser", { userId: user.id });
    assert.equal(gone.error?.code, grpc.status.NOT_FOUND);
    const body = errorOf(gone.error!);
    assert.deepEqual(
      [body.schemas, body.detail, body.errorMessages[0]?.errorCode],
      [["urn:ietf:params:scim:api:messages:2.0:Error"], "User not found", "NOT_FOUND"],
    );

    const bad = await call("listUsers", { filter: 'userName eq "x' });
    assert.equal(bad.error?.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(errorOf(bad.error!).scimType, "invalidFilter");

    const conflict = await call("createUser", { resource: toStruct(newUser("dup@a.example")) });
    assert.equal(conflict.error, undefined);
    const again = await call("createUser", { resource: toStruct(newUser("DUP@a.example")) });
    assert.equal(again.error?.code, grpc.status.ALREADY_EXISTS);
    assert.equal(errorOf(again.error!).scimType, "uniqueness");

    const config = await call("getServiceProviderConfig", {});
    assert.equal(fromStruct(config.response.resource).patch.supported, true);
  });

  test("no token or a wrong one: UNAUTHENTICATED", async () => {
    assert.equal((await call("listUsers", {}, null)).error?.code, grpc.status.UNAUTHENTICATED);
    assert.equal((await call("listUsers", {}, "not-a-scim-token")).error?.code, grpc.status.UNAUTHENTICATED);
  });
});
