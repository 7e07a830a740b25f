import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import zlib from "node:zlib";
import { after, before, describe, test } from "node:test";
import { fromBinary, fromJson, type DescMessage, type DescMethodUnary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { ApiUserService } from "../../gen/travel/apiuser/v2/api_user_pb.js";
import { ErrorResponseSchema, type ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";
import { accessToken } from "../helpers/api.js";
import { decodeRpcStatus, errorResponseIn } from "../helpers/grpc-status.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";

/**
 * Hardening issue, "every error is an ErrorResponse": connect's protocol layer refuses some
 * requests before the interceptor chain runs (a message that does not decode, a body that does
 * not decompress, an unknown encoding, a bad timeout header, a wrong content type or verb, a
 * message over the body limit). Those answers used to carry no ErrorResponse, some were 5xx (a
 * malformed protobuf message was INTERNAL, a truncated gzip body too) and some were no answer at
 * all (an error message with a lone surrogate broke the gRPC trailer writer: an empty 200). Now
 * each one, on every protocol, is a client error carrying the ErrorResponse detail whose
 * debugIdentifier is the x-request-id of the answer and of the log line that records it.
 */
const BODY_LIMIT_BYTES = 65_536;
const ROTATE = "/travel.apiuser.v2.ApiUserService/RotateClientSecret";
const rotateMethod = ApiUserService.method.rotateClientSecret as DescMethodUnary<DescMessage, DescMessage>;

/** One answer, whatever the protocol: its code, HTTP status, request id and the ErrorResponse detail. */
interface Answer {
  status: number;
  code?: Code;
  message?: string;
  requestId: string | undefined;
  errorResponse?: ErrorResponse;
  headers: Record<string, string>;
  raw: string;
}

function frame(flags: number, data: Uint8Array, declaredLength = data.byteLength): Buffer {
  const header = Buffer.alloc(5);
  header[0] = flags;
  header.writeUInt32BE(declaredLength, 1);
  return Buffer.concat([header, data]);
}

/** A RotateClientSecretRequest whose clientId (field 1) is `size` bytes long, encoded by hand. */
function bigMessage(size: number): Buffer {
  const varint: number[] = [];
  for (let n = size; ; n = Math.floor(n / 128)) {
    if (n < 128) {
      varint.push(n);
      break;
    }
    varint.push((n & 0x7f) | 0x80);
  }
  return Buffer.concat([Buffer.from([0x0a, ...varint]), Buffer.alloc(size, "x")]);
}

function connectAnswer(status: number, headers: Record<string, string>, body: Buffer): Answer {
  const raw = `HTTP ${status} ${body.toString("utf8").slice(0, 400)}`;
  let json: { code?: string; message?: string; details?: Array<{ type: string; value: string }> };
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch {
    return { status, requestId: headers["x-request-id"], headers, raw };
  }
  const detail = json.details?.find((d) => d.type === "travel.common.v1.ErrorResponse");
  const codeName = (json.code ?? "").replace(/(^|_)([a-z])/g, (_, __, c: string) => c.toUpperCase());
  return {
    status,
    code: Code[codeName as keyof typeof Code],
    message: json.message,
    requestId: headers["x-request-id"],
    errorResponse: detail ? fromBinary(ErrorResponseSchema, Buffer.from(detail.value, "base64")) : undefined,
    headers,
    raw,
  };
}

/** gRPC and gRPC-Web: grpc-status in the trailers (or in the headers of a trailers-only answer). */
function grpcAnswer(
  status: number,
  headers: Record<string, string>,
  trailers: Record<string, string>,
  body: Buffer,
): Answer {
  const t = trailers["grpc-status"] !== undefined ? trailers : headers;
  const details = t["grpc-status-details-bin"];
  return {
    status,
    code: t["grpc-status"] === undefined ? undefined : (Number(t["grpc-status"]) as Code),
    message: t["grpc-message"] === undefined ? undefined : decodeURIComponent(t["grpc-message"]),
    requestId: headers["x-request-id"],
    errorResponse: details ? errorResponseIn(decodeRpcStatus(Buffer.from(details, "base64")).details) : undefined,
    headers,
    raw: `HTTP ${status} headers ${JSON.stringify(headers)} trailers ${JSON.stringify(trailers)} body ${body.toString("latin1").slice(0, 200)}`,
  };
}

/** The trailer envelope of a gRPC-Web body, as headers. */
function grpcWebTrailers(body: Buffer): Record<string, string> {
  const trailers: Record<string, string> = {};
  for (let at = 0; at + 5 <= body.length;) {
    const length = body.readUInt32BE(at + 1);
    if (body[at]! & 0x80) {
      for (const line of body
        .subarray(at + 5, at + 5 + length)
        .toString("utf8")
        .split("\r\n")) {
        const i = line.indexOf(":");
        if (i > 0) trailers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
    }
    at += 5 + length;
  }
  return trailers;
}

const headersOf = (response: Response) => Object.fromEntries(response.headers);

describe("connect's protocol refusals carry the ErrorResponse on every protocol", () => {
  let running: RunningService;
  let baseUrl: string;
  let adminToken: string;

  before(async () => {
    running = await startService({ env: { BODY_LIMIT_BYTES: String(BODY_LIMIT_BYTES) } });
    baseUrl = running.baseUrl;
    const seed = await operatorCall<{ clientId: string; clientSecret: string }>(baseUrl, "Seed", {});
    adminToken = await accessToken(baseUrl, seed.clientId, seed.clientSecret);
  });
  after(async () => {
    if (!running) return;
    await running.stop();
    await dropStorage(running.storage);
  });

  const auth = () => ({ authorization: `Bearer ${adminToken}` });

  async function connectCall(
    init: { method?: string; headers: Record<string, string>; body?: Uint8Array | string },
    path = ROTATE,
  ): Promise<Answer> {
    const response = await fetch(`${baseUrl}${path}`, {
      method: init.method ?? "POST",
      headers: { ...auth(), ...init.headers },
      body: init.body,
    });
    return connectAnswer(response.status, headersOf(response), Buffer.from(await response.arrayBuffer()));
  }

  async function grpcWebCall(
    contentType: string,
    body: Uint8Array | string,
    path = ROTATE,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    const response = await fetch(`${baseUrl}${path}`, {
      method: "POST",
      headers: { ...auth(), "content-type": contentType, "x-grpc-web": "1", ...headers },
      body,
    });
    const bytes = Buffer.from(await response.arrayBuffer());
    return grpcAnswer(response.status, headersOf(response), grpcWebTrailers(bytes), bytes);
  }

  /** A raw gRPC call over h2c, the body sent as given. */
  async function grpcCall(headers: Record<string, string>, body: Uint8Array, path = ROTATE): Promise<Answer> {
    const session = http2.connect(baseUrl);
    session.on("error", () => undefined);
    try {
      return await new Promise<Answer>((resolve, reject) => {
        const stream = session.request({
          ":method": "POST",
          ":path": path,
          "content-type": "application/grpc",
          te: "trailers",
          ...auth(),
          ...headers,
        });
        let status = 0;
        let responseHeaders: Record<string, string> = {};
        let trailers: Record<string, string> = {};
        const chunks: Buffer[] = [];
        const flat = (h: http2.IncomingHttpHeaders) =>
          Object.fromEntries(Object.entries(h).map(([k, v]) => [k, String(v)]));
        stream.on("response", (h) => {
          status = Number(h[":status"]);
          responseHeaders = flat(h);
        });
        stream.on("trailers", (h) => (trailers = flat(h)));
        stream.on("data", (chunk: Buffer) => chunks.push(chunk));
        stream.on("error", reject);
        // The answer is complete at the end of the server's side (an oversized upload is not read to its end).
        const done = () => resolve(grpcAnswer(status, responseHeaders, trailers, Buffer.concat(chunks)));
        stream.on("end", done);
        stream.on("close", done);
        stream.end(body);
      });
    } finally {
      session.close();
    }
  }

  /** A @grpc/grpc-js call of RotateClientSecret whose serializer sends the given bytes as they are. */
  async function grpcJsCall(payload: Buffer): Promise<Answer> {
    const Client = grpc.makeGenericClientConstructor(
      {
        RotateClientSecret: {
          path: ROTATE,
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      "ApiUserService",
    );
    const client = new Client(new URL(baseUrl).host, grpc.credentials.createInsecure(), {
      "grpc.max_send_message_length": -1,
    }) as unknown as grpc.Client & Record<string, (...args: unknown[]) => grpc.ClientUnaryCall>;
    try {
      return await new Promise<Answer>((resolve) => {
        const metadata = new grpc.Metadata();
        metadata.set("authorization", auth().authorization);
        let requestId: string | undefined;
        const call = client.RotateClientSecret!(
          payload,
          metadata,
          { deadline: Date.now() + 15_000 },
          (err: grpc.ServiceError | null) => {
            if (!err)
              return resolve({ status: 200, code: undefined, requestId, headers: {}, raw: "unexpected success" });
            const [details] = err.metadata.get("grpc-status-details-bin");
            // A trailers-only answer (a refusal before any message) has its x-request-id among the status's metadata.
            requestId ??= err.metadata.get("x-request-id").map(String)[0];
            resolve({
              status: 200,
              code: err.code as number as Code,
              message: err.details,
              requestId,
              errorResponse: Buffer.isBuffer(details) ? errorResponseIn(decodeRpcStatus(details).details) : undefined,
              headers: {},
              raw: `${grpc.status[err.code]} ${err.details}`,
            });
          },
        );
        call.on("metadata", (m: grpc.Metadata) => (requestId = String(m.get("x-request-id")[0] ?? "")));
      });
    } finally {
      client.close();
    }
  }

  /**
   * The answer is `code` with the ErrorResponse of `errorCode`, its debugIdentifier the request id
   * the logs name at info (refusals of the protocol layer; the interceptor chain's are not logged).
   */
  function assertRefusal(
    answer: Answer,
    expected: { code: Code; errorCode: string; status?: number; message?: RegExp; byInterceptor?: boolean },
  ): void {
    const context = answer.raw;
    if (expected.status !== undefined) assert.equal(answer.status, expected.status, context);
    assert.equal(answer.code, expected.code, `code ${Code[answer.code ?? -1]}: ${context}`);
    assert.ok(answer.errorResponse, `an ErrorResponse detail: ${context}`);
    const first = answer.errorResponse.errorMessages[0];
    assert.equal(first?.errorCode, expected.errorCode, context);
    if (expected.message) assert.match(first?.message ?? "", expected.message, context);
    assert.ok(answer.requestId, `an x-request-id: ${context}`);
    assert.equal(answer.errorResponse.debugIdentifier, answer.requestId, `debugIdentifier = x-request-id: ${context}`);
    assert.ok(
      ((answer.message ?? "") as string & { isWellFormed(): boolean }).isWellFormed(),
      `a well-formed message: ${context}`,
    );
    if (expected.byInterceptor) return;
    const logged = running
      .logs()
      .split("\n")
      .filter((line) => line.includes(answer.requestId!))
      .map((line) => JSON.parse(line) as { level: number; msg: string; errorCode?: string });
    assert.ok(
      logged.some((l) => l.level === 30 && l.errorCode === expected.errorCode),
      `logged at info with the request id: ${JSON.stringify(logged)}`,
    );
  }

  const invalid = (message?: RegExp) => ({ code: Code.InvalidArgument, errorCode: "API_VALIDATION_FAILED", message });

  describe("Connect (HTTP/1.1)", () => {
    test("malformed protobuf binary is 400 INVALID_ARGUMENT, not 500 INTERNAL", async () => {
      const answer = await connectCall({ headers: { "content-type": "application/proto" }, body: Buffer.from([0xff]) });
      assertRefusal(answer, { ...invalid(/could not be decoded: parse binary/), status: 400 });
    });

    test("JSON that is not JSON, or of the wrong type, is 400", async () => {
      assertRefusal(await connectCall({ headers: { "content-type": "application/json" }, body: "{" }), {
        ...invalid(/could not be decoded/),
        status: 400,
      });
      assertRefusal(await connectCall({ headers: { "content-type": "application/json" }, body: '{"clientId": 5}' }), {
        ...invalid(/client_id/),
        status: 400,
      });
    });

    test("an unsupported content type is 415 UNSUPPORTED_MEDIA_TYPE with a body", async () => {
      for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "application/proto; charset=x"]) {
        const answer = await connectCall({ headers: { "content-type": contentType }, body: "x" });
        assertRefusal(answer, { code: Code.InvalidArgument, errorCode: "UNSUPPORTED_MEDIA_TYPE", status: 415 });
      }
    });

    test("GET on an RPC path is 404 ROUTE_NOT_FOUND with a body", async () => {
      assertRefusal(await connectCall({ method: "GET", headers: {} }), {
        code: Code.NotFound,
        errorCode: "ROUTE_NOT_FOUND",
        status: 404,
        message: /RPCs take POST/,
      });
    });

    test("an invalid connect-timeout-ms is 400", async () => {
      const answer = await connectCall({
        headers: { "content-type": "application/json", "connect-timeout-ms": "abc" },
        body: "{}",
      });
      assertRefusal(answer, { ...invalid(/timeout/), status: 400 });
    });

    test("a body its gzip or brotli encoding cannot decompress (garbage or cut short) is 400, not 500", async () => {
      const cases: Array<[string, Uint8Array | string]> = [
        ["gzip", "not gzip"],
        ["gzip", zlib.gzipSync(Buffer.from("{}")).subarray(0, 12)],
        ["br", "xx"],
      ];
      for (const [encoding, body] of cases) {
        const answer = await connectCall({
          headers: { "content-type": "application/json", "content-encoding": encoding },
          body,
        });
        assertRefusal(answer, { ...invalid(/decompression failed/), status: 400 });
      }
    });

    test("an unknown content-encoding is 400 (not 501), and says which encodings are supported", async () => {
      const answer = await connectCall({
        headers: { "content-type": "application/json", "content-encoding": "zstd" },
        body: "{}",
      });
      assertRefusal(answer, { ...invalid(/unknown compression "zstd"/), status: 400 });
      assert.match(answer.headers["accept-encoding"] ?? "", /gzip/);
    });

    test("a message over the body limit is 413 PAYLOAD_TOO_LARGE, like REST, and the connection is closed", async () => {
      const answer = await connectCall({ headers: { "content-type": "application/proto" }, body: bigMessage(200_000) });
      assertRefusal(answer, { code: Code.InvalidArgument, errorCode: "PAYLOAD_TOO_LARGE", status: 413 });
      assert.equal(answer.headers.connection, "close", answer.raw);
      const rest = await fetch(`${baseUrl}/v2/api-users/rotate`, {
        method: "POST",
        headers: { ...auth(), "content-type": "application/json" },
        body: JSON.stringify({ clientId: "x".repeat(200_000) }),
      });
      const restBody = (await rest.json()) as ErrorResponse;
      assert.equal(rest.status, 413);
      assert.equal(restBody.errorMessages[0]!.message, answer.errorResponse!.errorMessages[0]!.message);
    });

    test("errors of the interceptor chain pass untouched (their detail is already there)", async () => {
      const answer = await connectCall({
        headers: { "content-type": "application/json" },
        body: '{"clientId": "nobody"}',
      });
      assert.equal(answer.status, 404, answer.raw);
      assert.equal(answer.errorResponse?.errorMessages[0]?.errorCode, "NOT_FOUND");
      assert.equal(answer.errorResponse?.debugIdentifier, answer.requestId);
    });
  });

  describe("gRPC-Web (HTTP/1.1)", () => {
    test("an incomplete envelope, a compressed flag without an encoding, no message or two are INVALID_ARGUMENT", async () => {
      const message = Buffer.from([0x0a, 0x01, 0x78]);
      const bodies: Array<[string, Buffer, RegExp]> = [
        ["incomplete envelope", frame(0, message, 9), /incomplete envelope/],
        ["compressed flag", frame(1, message), /compressed envelope/],
        ["no message", Buffer.alloc(0), /missing input message/],
        ["two messages", Buffer.concat([frame(0, message), frame(0, message)]), /extra input message/],
        ["malformed binary", frame(0, Buffer.from([0xff])), /parse binary/],
      ];
      for (const [name, body, reason] of bodies) {
        const answer = await grpcWebCall("application/grpc-web+proto", body);
        assert.equal(answer.status, 200, `${name}: ${answer.raw}`);
        assertRefusal(answer, invalid(reason));
      }
    });

    test("an error message that would hold a lone surrogate is still answered with a grpc-status", async () => {
      // V8's SyntaxError quotes half of the astral character.
      assertRefusal(
        await grpcWebCall("application/grpc-web+json", frame(0, Buffer.from("😀", "utf8"))),
        invalid(/could not be decoded/),
      );
      // The text interceptor names a Struct key with a lone surrogate, escaped.
      const updateUser = "/travel.user.v2.UserService/UpdateUser";
      const json = JSON.stringify({ userId: "u1", travelPreferences: { "\ud800": 1 } });
      const answer = await grpcWebCall("application/grpc-web+json", frame(0, Buffer.from(json, "utf8")), updateUser);
      assertRefusal(answer, { ...invalid(/travelPreferences\.fields\[\\ud800\]/), byInterceptor: true });
    });

    test("an unsupported gRPC-Web content type is UNSUPPORTED_MEDIA_TYPE in a trailers-only answer", async () => {
      const answer = await grpcWebCall("application/grpc-web-text", "AAAAAAA=");
      assertRefusal(answer, { code: Code.InvalidArgument, errorCode: "UNSUPPORTED_MEDIA_TYPE", status: 200 });
    });

    test("connect-node's gRPC-Web client reads the refusal of an oversized message", async () => {
      const transport = createGrpcWebTransport({ baseUrl, httpVersion: "1.1" });
      const error = await transport
        .unary(
          rotateMethod,
          undefined,
          15_000,
          auth(),
          fromJson(rotateMethod.input, { clientId: "x".repeat(200_000) }),
          undefined,
        )
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      assert.ok(error, "the call failed");
      assert.equal(error.code, Code.InvalidArgument, error.message);
      assert.equal(error.findDetails(ErrorResponseSchema)[0]?.errorMessages[0]?.errorCode, "PAYLOAD_TOO_LARGE");
    });
  });

  describe("gRPC (h2c)", () => {
    test("an unknown grpc-encoding is UNIMPLEMENTED naming the accepted ones in grpc-accept-encoding (gRPC's compression.md)", async () => {
      const answer = await grpcCall({ "grpc-encoding": "zstd" }, frame(1, Buffer.from([0x0a, 0x01, 0x78])));
      assert.equal(answer.status, 200, answer.raw);
      assertRefusal(answer, {
        code: Code.Unimplemented,
        errorCode: "NOT_IMPLEMENTED",
        message: /unknown compression "zstd": supported encodings are gzip/,
      });
      assert.equal(answer.headers["grpc-accept-encoding"], "gzip", answer.raw);
    });

    test("malformed protobuf, a compressed flag without grpc-encoding and a body that does not decompress are INVALID_ARGUMENT", async () => {
      const message = Buffer.from([0x0a, 0x01, 0x78]);
      const cases: Array<[Record<string, string>, Buffer, RegExp]> = [
        [{}, frame(0, Buffer.from([0xff])), /parse binary/],
        [{}, frame(1, message), /compressed envelope/],
        [{ "grpc-encoding": "gzip" }, frame(1, zlib.gzipSync(message).subarray(0, 10)), /decompression failed/],
        [{}, frame(0, message, 9), /incomplete envelope/],
      ];
      for (const [headers, body, reason] of cases) {
        const answer = await grpcCall(headers, body);
        assert.equal(answer.status, 200, answer.raw);
        assertRefusal(answer, invalid(reason));
      }
    });

    test("an unsupported gRPC content type is UNSUPPORTED_MEDIA_TYPE in the trailers", async () => {
      const answer = await grpcCall({ "content-type": "application/grpc+thrift" }, frame(0, Buffer.alloc(0)));
      assertRefusal(answer, { code: Code.InvalidArgument, errorCode: "UNSUPPORTED_MEDIA_TYPE", status: 200 });
    });

    test("a message over the body limit is PAYLOAD_TOO_LARGE", async () => {
      assertRefusal(await grpcCall({}, frame(0, bigMessage(BODY_LIMIT_BYTES + 1))), {
        code: Code.InvalidArgument,
        errorCode: "PAYLOAD_TOO_LARGE",
      });
    });

    test("through @grpc/grpc-js: one byte 0xff, and an oversized message", async () => {
      assertRefusal(await grpcJsCall(Buffer.from([0xff])), invalid(/parse binary/));
      assertRefusal(await grpcJsCall(bigMessage(BODY_LIMIT_BYTES + 1)), {
        code: Code.InvalidArgument,
        errorCode: "PAYLOAD_TOO_LARGE",
      });
    });
  });

  describe("streams, health and reflection (gRPC and gRPC-Web), before authentication", () => {
    // A server stream (the credential-change stream, health Watch), a unary one not in the contract
    // (health Check), a bidi stream (reflection v1 and v1alpha): malformed input is the caller's
    // fault here too, INVALID_ARGUMENT (UNIMPLEMENTED for an unknown encoding), never INTERNAL.
    const PATHS = [
      "/travel.auth.v2.AuthService/WatchCredentialChanges",
      "/grpc.health.v1.Health/Check",
      "/grpc.health.v1.Health/Watch",
      "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    ];
    const message = Buffer.from([0x0a, 0x01, 0x78]);
    const CASES: Array<[string, Record<string, string>, Buffer, Code, RegExp]> = [
      ["malformed binary", {}, frame(0, Buffer.from([0xff])), Code.InvalidArgument, /parse binary/],
      ["compressed flag without an encoding", {}, frame(1, message), Code.InvalidArgument, /compressed envelope/],
      [
        "gzip that does not decompress",
        { "grpc-encoding": "gzip" },
        frame(1, zlib.gzipSync(message).subarray(0, 10)),
        Code.InvalidArgument,
        /decompression failed/,
      ],
      ["incomplete envelope", {}, frame(0, message, 9), Code.InvalidArgument, /incomplete envelope/],
      ["unknown encoding", { "grpc-encoding": "zstd" }, frame(1, message), Code.Unimplemented, /unknown compression/],
    ];

    /**
     * Every path × every case, without credentials; what was answered otherwise than expected.
     * `bidi` is what a bidirectional stream is answered where it cannot be served (gRPC-Web over HTTP/1.1).
     */
    async function mismatches(
      call: (headers: Record<string, string>, body: Buffer, path: string) => Promise<Answer>,
      bidi?: RegExp,
    ) {
      const wrong: string[] = [];
      for (const path of PATHS) {
        for (const [name, headers, body, code, reason] of CASES) {
          const answer = await call(headers, body, path);
          const refusedFirst = bidi !== undefined && path.includes("Reflection");
          // gRPC's compression.md: an unknown encoding is UNIMPLEMENTED, on every path.
          const expected =
            code === Code.Unimplemented ? { code, errorCode: "NOT_IMPLEMENTED", message: reason } : invalid(reason);
          try {
            assertRefusal(answer, refusedFirst ? invalid(bidi) : expected);
          } catch (error) {
            wrong.push(`${path} ${name}: ${(error as Error).message.split("\n")[0]!.slice(0, 300)}`);
          }
        }
      }
      return wrong;
    }

    test("raw gRPC (h2c): every malformed request is INVALID_ARGUMENT or UNIMPLEMENTED with the ErrorResponse, logged at info", async () => {
      const wrong = await mismatches((headers, body, path) => grpcCall({ authorization: "", ...headers }, body, path));
      assert.deepEqual(wrong, [], `${wrong.length} of ${PATHS.length * CASES.length}`);
    });

    test("gRPC-Web: every malformed request is INVALID_ARGUMENT or UNIMPLEMENTED with the ErrorResponse, logged at info", async () => {
      const wrong = await mismatches(
        (headers, body, path) =>
          grpcWebCall("application/grpc-web+proto", body, path, { authorization: "", ...headers }),
        /streams in both directions and needs HTTP\/2/,
      );
      assert.deepEqual(wrong, [], `${wrong.length} of ${PATHS.length * CASES.length}`);
    });

    test("nothing of it is logged at error level", async () => {
      const errors = running
        .logs()
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as { level: number; msg: string })
        .filter((l) => l.level >= 50);
      assert.deepEqual(errors, []);
    });
  });

  test("after an oversized message, the next call of a client that reuses HTTP/1.1 connections is answered", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const transport = createConnectTransport({ baseUrl, httpVersion: "1.1", nodeOptions: { agent } });
      const call = (clientId: string) =>
        transport
          .unary(rotateMethod, undefined, 15_000, auth(), fromJson(rotateMethod.input, { clientId }), undefined)
          .then(
            () => "ok",
            (e: unknown) => {
              const error = ConnectError.from(e);
              return `${Code[error.code]} ${error.findDetails(ErrorResponseSchema)[0]?.errorMessages[0]?.errorCode ?? error.rawMessage}`;
            },
          );
      assert.equal(await call("x".repeat(200_000)), "InvalidArgument PAYLOAD_TOO_LARGE");
      assert.equal(await call("nobody"), "NotFound NOT_FOUND");
      assert.equal(await call("x".repeat(BODY_LIMIT_BYTES + 1)), "InvalidArgument PAYLOAD_TOO_LARGE");
      assert.equal(await call("nobody"), "NotFound NOT_FOUND");
    } finally {
      agent.destroy();
    }
  });
});
