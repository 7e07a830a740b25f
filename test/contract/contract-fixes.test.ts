// Regression tests for the contract fixes of the restructuring issue, against the real server:
// gRPC health Check of an unknown service is NOT_FOUND (it was INTERNAL with a logged stack
// trace), and reflection serves travel.common.v1.ErrorResponse so tools can decode error details.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const pkg = grpc.loadPackageDefinition(
  protoLoader.loadSync(["grpc/reflection/v1/reflection.proto", "grpc/health/v1/health.proto"], {
    includeDirs: [`${root}proto`],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  }),
) as any;

describe("contract fixes on the real server", () => {
  let running: RunningService;
  let address: string;
  before(async () => {
    running = await startService();
    address = new URL(running.baseUrl).host;
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  test("health Check of an unknown service is NOT_FOUND with an ErrorResponse, and logs no failure", async () => {
    const client = new pkg.grpc.health.v1.Health(address, grpc.credentials.createInsecure());
    try {
      const err = await new Promise<grpc.ServiceError>((resolve, reject) =>
        client.Check({ service: "no.such.Service" }, (e: grpc.ServiceError | null) =>
          e ? resolve(e) : reject(new Error("expected an error")),
        ),
      );
      assert.equal(err.code, grpc.status.NOT_FOUND, err.details);
      assert.equal(err.details, 'unknown service "no.such.Service"');
      assert.ok(err.metadata.get("grpc-status-details-bin").length > 0, "the ErrorResponse detail travels with it");
      const known = await new Promise<{ status: string }>((resolve, reject) =>
        client.Check(
          { service: "travel.apiuser.v2.ApiUserService" },
          (e: grpc.ServiceError | null, r: { status: string }) => (e ? reject(e) : resolve(r)),
        ),
      );
      assert.equal(known.status, "SERVING");
    } finally {
      client.close();
    }
    const failures = running
      .logs()
      .split("\n")
      .filter((l) => l.includes('"rpc failed"'));
    assert.deepEqual(failures, [], "no internal failure was logged");
  });

  test("reflection serves travel.common.v1.ErrorResponse", async () => {
    const client = new pkg.grpc.reflection.v1.ServerReflection(address, grpc.credentials.createInsecure());
    try {
      const call = client.ServerReflectionInfo();
      const response = await new Promise<any>((resolve, reject) => {
        call.on("data", resolve);
        call.on("error", reject);
        call.write({ host: "", file_containing_symbol: "travel.common.v1.ErrorResponse" });
        call.end();
      });
      assert.equal(response.message_response, "file_descriptor_response", JSON.stringify(response.error_response));
      const files = response.file_descriptor_response.file_descriptor_proto.map((b: Buffer) =>
        fromBinary(FileDescriptorProtoSchema, new Uint8Array(b)),
      );
      assert.equal(files[0].name, "travel/common/v1/error.proto");
      assert.ok(files[0].messageType.some((m: { name: string }) => m.name === "ErrorResponse"));
    } finally {
      client.close();
    }
  });
});
