// @grpc/grpc-js clients built from the contract's descriptors (no generated stubs, no
// proto-loader), and one view of a unary call's outcome: its status, its initial metadata and
// trailers, and the travel.common.v1.ErrorResponse decoded from grpc-status-details-bin.
import * as grpc from "@grpc/grpc-js";
import { fromBinary, fromJson, toBinary, toJson, type DescService, type JsonObject } from "@bufbuild/protobuf";
import type { ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";
import { decodeRpcStatus, errorResponseIn, type AnyMessage } from "./grpc-status.js";

/** A grpc-js client of one service: a function per unary method, named as in the contract (`CreateTmc`). */
export type GenericGrpcClient = grpc.Client & Record<string, (...args: unknown[]) => grpc.ClientUnaryCall>;

type Serializers<T> = Pick<
  grpc.MethodDefinition<T, T>,
  "requestSerialize" | "requestDeserialize" | "responseSerialize" | "responseDeserialize"
>;

function genericClient<T>(
  service: DescService,
  address: string,
  options: grpc.ChannelOptions,
  serializers: (method: DescService["methods"][number]) => Serializers<T>,
): GenericGrpcClient {
  const definition: Record<string, grpc.MethodDefinition<T, T>> = {};
  for (const method of service.methods) {
    if (method.methodKind !== "unary") continue;
    definition[method.name] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: false,
      responseStream: false,
      ...serializers(method),
    };
  }
  const Client = grpc.makeGenericClientConstructor(definition, service.name);
  return new Client(address, grpc.credentials.createInsecure(), options) as unknown as GenericGrpcClient;
}

/** Requests and responses as protobuf JSON, protobuf binary on the wire (the descriptors do the encoding). */
export function jsonGrpcClient(service: DescService, address: string, options: grpc.ChannelOptions = {}) {
  return genericClient<JsonObject>(service, address, options, ({ input, output }) => ({
    requestSerialize: (json: JsonObject) => Buffer.from(toBinary(input, fromJson(input, json))),
    requestDeserialize: (bytes: Buffer) => toJson(input, fromBinary(input, bytes)) as JsonObject,
    responseSerialize: (json: JsonObject) => Buffer.from(toBinary(output, fromJson(output, json))),
    responseDeserialize: (bytes: Buffer) => toJson(output, fromBinary(output, bytes)) as JsonObject,
  }));
}

/** Requests and responses as the bytes they are: a test sends what it wants, however malformed or large. */
export function rawGrpcClient(service: DescService, address: string, options: grpc.ChannelOptions = {}) {
  const same = (bytes: Buffer) => bytes;
  return genericClient<Buffer>(service, address, options, () => ({
    requestSerialize: same,
    requestDeserialize: same,
    responseSerialize: same,
    responseDeserialize: same,
  }));
}

/** What a grpc-js caller sees of one unary call. */
export interface GrpcJsOutcome<R = JsonObject> {
  readonly ok: boolean;
  readonly response?: R;
  /** The gRPC status code (0 on success). */
  readonly code: grpc.status;
  /** grpc-message as grpc-js decoded it. */
  readonly details: string;
  /** The initial metadata (headers), when the server sent any before its trailers. */
  readonly headers?: grpc.Metadata;
  /** The trailers (of a trailers-only answer: its headers). */
  readonly trailers?: grpc.Metadata;
  /** google.rpc.Status decoded from grpc-status-details-bin, when the answer carries it. */
  readonly rpcStatus?: { code: number; message: string; details: AnyMessage[] };
  /** The travel.common.v1.ErrorResponse among rpcStatus's details. */
  readonly errorResponse?: ErrorResponse;
  /** The x-request-id the answer carried (headers or trailers). */
  readonly requestId?: string;
}

export interface UnaryOptions {
  /** Sent as request metadata; an `authorization` value is sent as it is. */
  readonly metadata?: Record<string, string>;
  /** Milliseconds from now, or a Date (default: 15 s). */
  readonly deadline?: number | Date;
  /** Sees the call as soon as it exists (to cancel it). */
  readonly onCall?: (call: grpc.ClientUnaryCall) => void;
}

/** Calls `method` of a generic client and resolves with its outcome, whatever it is (never rejects). */
export function grpcJsUnary<Q, R = JsonObject>(
  client: GenericGrpcClient,
  method: string,
  request: Q,
  options: UnaryOptions = {},
): Promise<GrpcJsOutcome<R>> {
  const fn = client[method];
  if (typeof fn !== "function") throw new Error(`the client has no unary method ${method}`);
  const metadata = new grpc.Metadata();
  for (const [name, value] of Object.entries(options.metadata ?? {})) metadata.set(name, value);
  const deadline =
    options.deadline instanceof Date ? options.deadline : new Date(Date.now() + (options.deadline ?? 15_000));
  return new Promise((resolve) => {
    let headers: grpc.Metadata | undefined;
    let settled: { err: grpc.ServiceError | null; response?: R } | undefined;
    // grpc-js calls back first, then emits "status" with the trailers (success or not).
    const call = fn.call(client, request, metadata, { deadline }, (err: grpc.ServiceError | null, response: R) => {
      settled = { err, response };
    });
    call.on("metadata", (m: grpc.Metadata) => (headers = m));
    call.on("status", (status: grpc.StatusObject) =>
      resolve(
        outcomeOf(
          settled?.err ?? (status.code === grpc.status.OK ? null : status),
          settled?.response,
          headers,
          status.metadata,
        ),
      ),
    );
    options.onCall?.(call);
  });
}

function outcomeOf<R>(
  err: Pick<grpc.StatusObject, "code" | "details"> | null,
  response: R | undefined,
  headers: grpc.Metadata | undefined,
  trailers: grpc.Metadata,
): GrpcJsOutcome<R> {
  const requestId = String(headers?.get("x-request-id")[0] ?? trailers.get("x-request-id")[0] ?? "") || undefined;
  if (!err) return { ok: true, response, code: grpc.status.OK, details: "", headers, trailers, requestId };
  const [bin] = trailers.get("grpc-status-details-bin");
  let rpcStatus: GrpcJsOutcome["rpcStatus"];
  let errorResponse: ErrorResponse | undefined;
  if (Buffer.isBuffer(bin)) {
    try {
      rpcStatus = decodeRpcStatus(new Uint8Array(bin));
      errorResponse = errorResponseIn(rpcStatus.details);
    } catch {
      // not a google.rpc.Status: left undefined, for the test to say so
    }
  }
  return { ok: false, code: err.code, details: err.details, headers, trailers, rpcStatus, errorResponse, requestId };
}
