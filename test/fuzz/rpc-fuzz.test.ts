// Property-based fuzzing of the RPC faces (hardening issue, item "Fuzzing"): every unary method of
// every service in contractServices (the operator's too, with the operator token), through
//   - connect-json / connect-binary: createConnectTransport over HTTP/1.1 (JSON, binary), random
//     messages built from the input descriptor (hostile strings, int32 extremes, unknown enum
//     numbers, nested messages); the binary one also appends random unknown fields, whose bytes
//     need not be well-formed (`$unknown`: a valid tag followed by arbitrary bytes);
//   - grpc-web: createGrpcWebTransport over HTTP/1.1, the same messages;
//   - grpc-js: @grpc/grpc-js over h2c, a generic client (makeGenericClientConstructor) whose
//     serializer passes arbitrary Buffers: random bytes, genuine encodings, genuine encodings
//     truncated / bit-flipped / extended, messages over the size limit;
//   - raw: app.inject (in process) with the Connect protocol and gRPC-Web by hand: random bytes or
//     JSON text of any type, random content types, frames with lying lengths and flags, random
//     Connect headers (timeout, protocol version, content encoding).
// Credentials: the method's own kind (operator token, TMC admin token, the admin's client secret in
// the message), none, a wrong one, or the other kind. Migrate, Seed and RotateSigningKey never get
// a valid operator token (each success would migrate, seed a tenant or add a signing key).
// Properties:
//   P1 no INTERNAL (13), UNKNOWN (2), UNAVAILABLE (14) or DATA_LOSS (15); UNIMPLEMENTED only from
//      the services whose issue is not done; DEADLINE_EXCEEDED only when the caller asked for a
//      deadline that short;
//   P2 every error carries the travel.common.v1.ErrorResponse detail (debugIdentifier and
//      errorMessages[0].errorCode); REST-shaped refusals before the RPC (404/413/415 from Fastify)
//      carry the ErrorResponse body;
//   P3 nothing is written on refusal (the storage fingerprint of fuzz-kit.ts is unchanged).
// src/ problems found and not fixed yet go to KNOWN_SRC_PROBLEMS: the properties tolerate exactly
// those signatures (FUZZ_STRICT=1 does not). The ones found so far (connect's protocol layer refusing
// requests before the interceptor chain: no ErrorResponse, INTERNAL for undecodable or truncated
// compressed bodies, an empty 200 when an error message held a lone surrogate, a hang after an
// oversized message on a reused HTTP/1.1 connection) are fixed (src/http/protocol/connect-handlers.ts); the
// tests at the end reproduce each of them.
import assert from "node:assert/strict";
import http from "node:http";
import zlib from "node:zlib";
import { after, before, describe, test } from "node:test";
import {
  fromJson,
  toBinary,
  type DescMessage,
  type DescMethodUnary,
  type DescService,
  type Message,
} from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import fc from "fast-check";
import type { InjectOptions } from "fastify";
import { ErrorResponseSchema, type ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";
import { internalsOf } from "../../src/app/test-access.js";
import { contractServices } from "../../src/rpc/areas.js";
import { accessToken } from "../helpers/api.js";
import { backend, TEST_OPERATOR_TOKEN } from "../helpers/backend.js";
import { rawGrpcClient, type GenericGrpcClient } from "../helpers/grpc-js.js";
import { decodeRpcStatus, errorResponseIn } from "../helpers/grpc-status.js";
import { dropStorage, operatorCall, seedDemo, startService, type RunningService } from "../helpers/service.js";
import { ROOMY_RATE_LIMITS } from "../helpers/token-kit.js";
import {
  FUZZ_RUNS,
  FUZZ_SEED,
  FUZZ_STRICT,
  FUZZ_VERBOSE,
  fuzzParams,
  fuzzString,
  JsonGen,
  nearValid,
  Ref,
  resolveRefs,
  show,
  storageFingerprint,
  Tally,
  validRequests,
  type GenObject,
  type StringPool,
} from "./fuzz-kit.js";

type UnaryMethod = DescMethodUnary<DescMessage, DescMessage>;
type TypedFace = "connect-json" | "connect-binary" | "grpc-web";

const BODY_LIMIT_BYTES = 65_536;
const CALL_TIMEOUT_MS = 15_000;
/** grpc-js's channel options for the raw client: it sends and reads messages of any size (the server's limit is the subject). */
const UNLIMITED_MESSAGES = { "grpc.max_send_message_length": -1, "grpc.max_receive_message_length": -1 };
const methods: UnaryMethod[] = contractServices.flatMap((s) =>
  s.methods.filter((m): m is UnaryMethod => m.methodKind === "unary"),
);
/** Services whose issue is not done: registered without handlers (src/rpc/routes.ts), UNIMPLEMENTED by design. */
const UNIMPLEMENTED_SERVICES = new Set<string>();
/** Operator RPCs whose every success writes something big (a migration run, a demo tenant, a signing key): no valid credential. */
const NO_VALID_CREDENTIAL = new Set(["Migrate", "Seed", "RotateSigningKey"]);
const FORBIDDEN_CODES = new Set([Code.Internal, Code.Unknown, Code.Unavailable, Code.DataLoss]);

/**
 * Known src/ problems: the properties tolerate exactly these signatures (FUZZ_STRICT=1 does not);
 * each is reported at the end of a run that reached it. None is open: connect's protocol refusals
 * (decode, decompression, content type, verb, envelope, timeout header, size limit) carry the
 * ErrorResponse since src/http/protocol/connect-handlers.ts rewrites them; the tests at the end of the file
 * reproduce each former entry. A new one gets a name in this union, a signature in knownProblemOf and a
 * `todo` test.
 */
type KnownProblem = never;

/** The known problem an error without ErrorResponse (or with a forbidden code) matches, if any. */
function knownProblemOf(_code: Code, _rawMessage: string, _hasErrorResponse: boolean): KnownProblem | undefined {
  return undefined;
}

// ---- the world ----------------------------------------------------------------------------------

interface World {
  running: RunningService;
  baseUrl: string;
  admin: { clientId: string; clientSecret: string; token: string };
  /** A resource server, with a token of the admin's for its audience (batch introspection's seeds). */
  resourceServer: { clientId: string; clientSecret: string; token: string };
  seed: { tmcId: string; orgId: string; userIds: string[] };
  created: string[];
  revoked: string[];
}

type Credential = "valid" | "none" | "garbage" | "otherKind";

function authorizationOf(method: UnaryMethod, credential: Credential, world: World): string | undefined {
  const service = method.parent.typeName;
  const isOperator = service === "travel.operator.v1.OperatorService";
  const isAuth = service === "travel.auth.v2.AuthService";
  switch (credential) {
    case "none":
      return undefined;
    case "garbage":
      return `Bearer ${TEST_OPERATOR_TOKEN.slice(0, -1)}x`;
    case "otherKind":
      return isOperator ? `Bearer ${world.admin.token}` : `Bearer ${TEST_OPERATOR_TOKEN}`;
    case "valid":
      if (isOperator) return NO_VALID_CREDENTIAL.has(method.name) ? undefined : `Bearer ${TEST_OPERATOR_TOKEN}`;
      // The token endpoint's client authentication: HTTP Basic (the message may carry the fields too).
      if (isAuth)
        return `Basic ${Buffer.from(`${world.admin.clientId}:${world.admin.clientSecret}`).toString("base64")}`;
      return `Bearer ${world.admin.token}`;
  }
}

// ---- generated cases ------------------------------------------------------------------------------

interface UnknownField {
  no: number;
  wireType: number;
  data: Uint8Array;
}

type RawBytes =
  | { kind: "random"; bytes: Uint8Array }
  | {
      kind: "genuine";
      message: GenObject;
      mutation:
        | { op: "none" }
        | { op: "truncate"; at: number }
        | { op: "flip"; at: number; bit: number }
        | { op: "append"; bytes: Uint8Array };
    }
  | { kind: "oversized"; size: number };

type RpcCase =
  | {
      face: "connect-json" | "connect-binary" | "grpc-web";
      credential: Credential;
      message: GenObject;
      unknown: UnknownField[];
    }
  | { face: "grpc-js"; credential: Credential; payload: RawBytes }
  | {
      face: "raw-connect";
      credential: Credential;
      contentType: string;
      body: { kind: "bytes"; payload: RawBytes } | { kind: "json"; value: unknown } | { kind: "text"; text: string };
      headers: Record<string, string>;
      /** Compress the body as the content-encoding says, possibly cut short. */
      compress: { encoding: "gzip" | "br"; cut: number | null } | null;
      verb: string;
    }
  | {
      face: "raw-grpc-web";
      credential: Credential;
      contentType: string;
      frames: Array<{ flags: number; lengthDelta: number; payload: RawBytes | { kind: "json"; value: unknown } }>;
      extra: Uint8Array;
    };

function caseArbitrary(method: UnaryMethod, pool: StringPool, valid: readonly GenObject[]): fc.Arbitrary<RpcCase> {
  const strings = fuzzString(pool);
  const rightGen = new JsonGen(strings, { wrongTypes: false, unknownFields: false });
  const anyGen = new JsonGen(strings);
  // Random messages, and valid ones with one change (so cases get past validation to the handler).
  const right = fc.oneof(rightGen.message(method.input), nearValid(method.input, valid, rightGen));
  const anyJson = fc.oneof(anyGen.message(method.input), nearValid(method.input, valid, anyGen));
  const credential = fc.oneof(
    { weight: 6, arbitrary: fc.constant<Credential>("valid") },
    { weight: 2, arbitrary: fc.constant<Credential>("none") },
    { weight: 1, arbitrary: fc.constant<Credential>("garbage") },
    { weight: 1, arbitrary: fc.constant<Credential>("otherKind") },
  );
  const unknownField: fc.Arbitrary<UnknownField> = fc.record({
    no: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.constantFrom(1000, 19_000, 536_870_911)),
    wireType: fc.constantFrom(0, 1, 2, 3, 4, 5, 6, 7),
    data: fc.uint8Array({ maxLength: 12 }),
  });
  const rawBytes: fc.Arbitrary<RawBytes> = fc.oneof(
    { weight: 3, arbitrary: fc.uint8Array({ maxLength: 96 }).map((bytes): RawBytes => ({ kind: "random", bytes })) },
    {
      weight: 6,
      arbitrary: fc
        .record({
          message: right,
          mutation: fc.oneof(
            { weight: 3, arbitrary: fc.constant({ op: "none" as const }) },
            { weight: 1, arbitrary: fc.nat().map((at) => ({ op: "truncate" as const, at })) },
            { weight: 2, arbitrary: fc.record({ op: fc.constant("flip" as const), at: fc.nat(), bit: fc.nat(7) }) },
            {
              weight: 1,
              arbitrary: fc
                .uint8Array({ minLength: 1, maxLength: 16 })
                .map((bytes) => ({ op: "append" as const, bytes })),
            },
          ),
        })
        .map((g): RawBytes => ({ kind: "genuine", ...g })),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(BODY_LIMIT_BYTES - 64, BODY_LIMIT_BYTES + 1, 200_000)
        .map((size): RawBytes => ({ kind: "oversized", size })),
    },
  );
  const typed = (face: "connect-json" | "connect-binary" | "grpc-web") =>
    fc.record({
      face: fc.constant(face),
      credential,
      message: right,
      unknown:
        face === "connect-json"
          ? fc.constant<UnknownField[]>([])
          : fc.oneof(
              { weight: 3, arbitrary: fc.constant<UnknownField[]>([]) },
              { weight: 1, arbitrary: fc.array(unknownField, { minLength: 1, maxLength: 3 }) },
            ),
    });
  const rawConnect = fc.record({
    face: fc.constant("raw-connect" as const),
    credential,
    contentType: fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom("application/proto", "application/json") },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          "application/json; charset=utf-8",
          "application/proto; charset=x",
          "application/x-protobuf",
          "application/connect+proto",
          "text/plain",
          "application/x-www-form-urlencoded",
          "application/grpc",
          "",
        ),
      },
    ),
    body: fc.oneof(
      { weight: 3, arbitrary: rawBytes.map((payload) => ({ kind: "bytes" as const, payload })) },
      { weight: 3, arbitrary: anyJson.map((value) => ({ kind: "json" as const, value })) },
      { weight: 1, arbitrary: fc.string({ maxLength: 40 }).map((text) => ({ kind: "text" as const, text })) },
    ),
    headers: fc.record(
      {
        "connect-protocol-version": fc.constantFrom("1", "2", ""),
        "connect-timeout-ms": fc.constantFrom("0", "1", "abc", "-1", "99999999999", "10000"),
        "content-encoding": fc.constantFrom("gzip", "br", "identity", "deflate", "zstd", "x"),
        "connect-accept-encoding": fc.constantFrom("gzip", "br", "x"),
      },
      { requiredKeys: [] },
    ),
    compress: fc.oneof(
      { weight: 4, arbitrary: fc.constant(null) },
      {
        weight: 1,
        arbitrary: fc.record({
          encoding: fc.constantFrom("gzip" as const, "br" as const),
          cut: fc.option(fc.nat(), { freq: 2, nil: null }),
        }),
      },
    ),
    verb: fc.oneof(
      { weight: 15, arbitrary: fc.constant("POST") },
      { weight: 1, arbitrary: fc.constantFrom("GET", "PUT", "DELETE") },
    ),
  });
  const rawGrpcWeb = fc.record({
    face: fc.constant("raw-grpc-web" as const),
    credential,
    contentType: fc.constantFrom(
      "application/grpc-web+proto",
      "application/grpc-web",
      "application/grpc-web+json",
      "application/grpc-web-text",
      "application/grpc-web+thrift",
    ),
    frames: fc.array(
      fc.record({
        flags: fc.oneof(
          { weight: 5, arbitrary: fc.constant(0) },
          { weight: 1, arbitrary: fc.constantFrom(1, 0x80, 0xff) },
        ),
        lengthDelta: fc.oneof(
          { weight: 5, arbitrary: fc.constant(0) },
          { weight: 1, arbitrary: fc.integer({ min: -3, max: 3 }) },
        ),
        payload: fc.oneof<fc.Arbitrary<RawBytes | { kind: "json"; value: unknown }>[]>(
          rawBytes,
          anyJson.map((value) => ({ kind: "json" as const, value })),
        ),
      }),
      { minLength: 0, maxLength: 2 },
    ),
    extra: fc.oneof(
      { weight: 5, arbitrary: fc.constant(new Uint8Array()) },
      { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 4 }) },
    ),
  });
  const faces: Array<{ face: RpcCase["face"]; weight: number; arbitrary: fc.Arbitrary<RpcCase> }> = [
    { face: "connect-json", weight: 3, arbitrary: typed("connect-json") },
    { face: "connect-binary", weight: 3, arbitrary: typed("connect-binary") },
    { face: "grpc-web", weight: 1, arbitrary: typed("grpc-web") },
    {
      face: "grpc-js",
      weight: 4,
      arbitrary: fc.record({ face: fc.constant("grpc-js" as const), credential, payload: rawBytes }),
    },
    { face: "raw-connect", weight: 3, arbitrary: rawConnect },
    { face: "raw-grpc-web", weight: 1, arbitrary: rawGrpcWeb },
  ];
  // FUZZ_FACES=grpc-js,raw-connect narrows a run to some faces (to chase one problem).
  const only = (process.env.FUZZ_FACES ?? "").split(",").filter((f) => f !== "");
  const chosen = faces.filter((f) => only.length === 0 || only.includes(f.face));
  assert.ok(chosen.length > 0, `FUZZ_FACES names none of ${faces.map((f) => f.face).join(", ")}`);
  return fc.oneof(...chosen.map(({ weight, arbitrary }) => ({ weight, arbitrary })));
}

/** The request message of generated JSON; undefined when protobuf JSON itself refuses it (client side). */
function messageOf(method: UnaryMethod, json: GenObject): Message | undefined {
  try {
    return fromJson(method.input, json as never, { ignoreUnknownFields: true });
  } catch {
    return undefined;
  }
}

function bytesOf(method: UnaryMethod, raw: RawBytes): Uint8Array {
  switch (raw.kind) {
    case "random":
      return raw.bytes;
    case "oversized": {
      // Field 1 (a string or message in every request that has fields), length-delimited, filled with "x".
      const body = Buffer.alloc(raw.size, "x");
      return Buffer.concat([Buffer.from([0x0a]), varint(body.length), body]);
    }
    case "genuine": {
      const message = messageOf(method, raw.message);
      const bytes = message ? Buffer.from(toBinary(method.input, message)) : Buffer.alloc(0);
      const m = raw.mutation;
      switch (m.op) {
        case "none":
          return bytes;
        case "truncate":
          return bytes.subarray(0, bytes.length === 0 ? 0 : m.at % bytes.length);
        case "flip": {
          if (bytes.length === 0) return bytes;
          const copy = Buffer.from(bytes);
          copy[m.at % copy.length] ^= 1 << m.bit;
          return copy;
        }
        case "append":
          return Buffer.concat([bytes, m.bytes]);
      }
    }
  }
}

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}

function frame(flags: number, data: Uint8Array, lengthDelta = 0): Buffer {
  const header = Buffer.alloc(5);
  header[0] = flags;
  header.writeUInt32BE(Math.max(0, data.length + lengthDelta), 1);
  return Buffer.concat([header, data]);
}

// ---- outcomes -------------------------------------------------------------------------------------

interface Outcome {
  ok: boolean;
  code?: Code;
  message?: string;
  errorResponse?: ErrorResponse;
  /** A REST-shaped ErrorResponse body (Fastify's 404/413/415 before any RPC runs). */
  restBody?: { debugIdentifier?: string; errorMessages?: Array<{ errorCode?: string }> };
  httpStatus?: number;
  /** The caller asked for a deadline this short that DEADLINE_EXCEEDED is a fair answer. */
  shortDeadline?: boolean;
  raw: string;
}

function fromConnectError(e: unknown): Outcome {
  const err = ConnectError.from(e);
  return {
    ok: false,
    code: err.code,
    message: err.rawMessage,
    errorResponse: err.findDetails(ErrorResponseSchema)[0],
    raw: `${Code[err.code]} ${err.rawMessage}`,
  };
}

class Timing {
  private readonly totals = new Map<string, { n: number; ms: number }>();
  add(label: string, ms: number): void {
    const t = this.totals.get(label) ?? { n: 0, ms: 0 };
    t.n++;
    t.ms += ms;
    this.totals.set(label, t);
  }
  lines(): string[] {
    return [...this.totals].map(
      ([label, t]) => `${label}: ${t.n} calls, ${(t.ms / t.n).toFixed(2)} ms each, ${(t.ms / 1000).toFixed(1)} s`,
    );
  }
}

function grpcStatusOutcome(code: number, message: string, detailsBin: Uint8Array | undefined): Outcome {
  let errorResponse: ErrorResponse | undefined;
  try {
    errorResponse = detailsBin ? errorResponseIn(decodeRpcStatus(detailsBin).details) : undefined;
  } catch {
    errorResponse = undefined;
  }
  return { ok: code === 0, code: code as Code, message, errorResponse, raw: `grpc-status ${code} ${message}` };
}

/** A Connect unary answer (or Fastify's own ErrorResponse) over HTTP/1.1. */
function connectOutcome(status: number, headers: Record<string, unknown>, received: Buffer): Outcome {
  // A compressed request gets a compressed answer (connect negotiates it), error bodies included.
  const encoding = String(headers["content-encoding"] ?? "");
  let body = received;
  try {
    if (encoding === "gzip") body = zlib.gunzipSync(received);
    if (encoding === "br") body = zlib.brotliDecompressSync(received);
  } catch {
    body = received;
  }
  const raw = `${status} ${String(headers["content-type"] ?? "")} ${show(body.toString("utf8"), 300)}`;
  if (status === 200) return { ok: true, httpStatus: status, raw };
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(body.toString("utf8")) as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  if (json && "debugIdentifier" in json)
    return { ok: false, httpStatus: status, restBody: json as Outcome["restBody"], raw };
  if (json && typeof json.code === "string") {
    const code = Code[connectCodeName(json.code) as keyof typeof Code] as Code;
    const details = Array.isArray(json.details) ? (json.details as Array<{ type?: string; value?: string }>) : [];
    const detail = details.find((d) => d.type === "travel.common.v1.ErrorResponse");
    let errorResponse: ErrorResponse | undefined;
    if (detail?.value)
      errorResponse = errorResponseIn([
        { typeUrl: `type.googleapis.com/${detail.type}`, value: Buffer.from(detail.value, "base64") },
      ]);
    return { ok: false, httpStatus: status, code, message: String(json.message ?? ""), errorResponse, raw };
  }
  // No body we understand: connect's bare protocol refusals (415, 405).
  return {
    ok: false,
    httpStatus: status,
    code: status === 415 || status === 405 ? Code.InvalidArgument : Code.Unknown,
    message: `protocol error: HTTP ${status} with no error body`,
    raw,
  };
}

function connectCodeName(code: string): string {
  return code
    .split("_")
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join("");
}

/** gRPC-Web: grpc-status in the headers (trailers-only) or in the trailer frame of the body. */
function grpcWebOutcome(status: number, headers: Record<string, unknown>, body: Buffer): Outcome {
  if (status !== 200) return connectOutcome(status, headers, body);
  let trailers: Record<string, string> = {};
  if (headers["grpc-status"] !== undefined) {
    trailers = {
      "grpc-status": String(headers["grpc-status"]),
      "grpc-message": String(headers["grpc-message"] ?? ""),
      "grpc-status-details-bin": String(headers["grpc-status-details-bin"] ?? ""),
    };
  } else {
    let at = 0;
    while (at + 5 <= body.length) {
      const flags = body[at]!;
      const length = body.readUInt32BE(at + 1);
      const data = body.subarray(at + 5, at + 5 + length);
      if (flags & 0x80) {
        for (const line of data.toString("utf8").split("\r\n")) {
          const i = line.indexOf(":");
          if (i > 0) trailers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
        }
      }
      at += 5 + length;
    }
  }
  if (trailers["grpc-status"] === undefined) {
    // HTTP 200 with neither a grpc-status header nor a trailer frame: the handler died mid-answer.
    return {
      ok: false,
      httpStatus: status,
      code: Code.Unknown,
      message: "no grpc-status in the response",
      raw: `grpc-web HTTP ${status} without grpc-status: ${show(body.toString("latin1"), 200)}`,
    };
  }
  const code = Number(trailers["grpc-status"]);
  const details = trailers["grpc-status-details-bin"]
    ? Buffer.from(trailers["grpc-status-details-bin"], "base64")
    : undefined;
  let message = trailers["grpc-message"] ?? "";
  try {
    message = decodeURIComponent(message);
  } catch {
    // left as sent
  }
  const outcome = grpcStatusOutcome(code, message, details);
  return { ...outcome, httpStatus: status, raw: `grpc-web ${outcome.raw}` };
}

// ---- the tests ------------------------------------------------------------------------------------

describe(`RPC fuzzing (${backend}, FUZZ_RUNS=${FUZZ_RUNS}, FUZZ_SEED=${FUZZ_SEED}${FUZZ_STRICT ? ", strict" : ""})`, () => {
  let world: World;
  let transports: Record<TypedFace, Transport>;
  const agents: http.Agent[] = [];
  const grpcClients = new Map<string, GenericGrpcClient>();
  const tally = new Tally();
  const knownSeen = new Map<KnownProblem, string>();
  const timing = new Timing();
  let lastFingerprint: string | undefined;

  before(async () => {
    const t0 = performance.now();
    const running = await startService({
      env: {
        ...ROOMY_RATE_LIMITS,
        BODY_LIMIT_BYTES: String(BODY_LIMIT_BYTES),
        // The reset budget is not this file's subject (test/fuzz/http2-abuse and http2-limits test
        // it); the fuzzer's grpc-js cases reset streams on purpose, all from one address.
        HTTP2_RESET_BURST: "100000",
        HTTP2_RESETS_PER_SECOND: "100000",
        HTTP2_INSTANCE_RESET_BURST: "100000",
        HTTP2_INSTANCE_RESETS_PER_SECOND: "100000",
      },
    });
    const seed = await seedDemo(running.baseUrl);
    const token = await accessToken(running.baseUrl, seed.clientId, seed.clientSecret);
    await operatorCall(running.baseUrl, "SetTmcApiUserLimit", { tmcId: seed.tmcId, maxApiUsers: 12 });
    const rs = await operatorCall<{ clientId: string; clientSecret: string }>(running.baseUrl, "CreateResourceServer", {
      name: "Fuzzed gateway",
      audiences: ["https://fuzzed-gateway.example/api"],
    });
    const rsToken = await accessToken(running.baseUrl, seed.clientId, seed.clientSecret, {
      resource: "https://fuzzed-gateway.example/api",
    });
    world = {
      running,
      baseUrl: running.baseUrl,
      admin: { clientId: seed.clientId, clientSecret: seed.clientSecret, token },
      resourceServer: { ...rs, token: rsToken },
      seed,
      created: [],
      revoked: [],
    };
    transports = {
      "connect-json": newTransport("connect-json"),
      "connect-binary": newTransport("connect-binary"),
      "grpc-web": newTransport("grpc-web"),
    };
    if (FUZZ_VERBOSE) console.log(`# started in ${(performance.now() - t0).toFixed(0)} ms`);
  });
  after(async () => {
    if (FUZZ_VERBOSE)
      for (const line of [...tally.lines(), ...timing.lines().map((l) => `time ${l}`)]) console.log(`# ${line}`);
    for (const [problem, example] of knownSeen)
      console.log(`# known src problem "${problem}" reached, e.g. ${example}`);
    const t0 = performance.now();
    for (const client of grpcClients.values()) client.close();
    for (const agent of agents) agent.destroy();
    if (world) {
      await world.running.stop();
      const t1 = performance.now();
      await dropStorage(world.running.storage);
      if (FUZZ_VERBOSE)
        console.log(`# stop ${(t1 - t0).toFixed(0)} ms, drop ${(performance.now() - t1).toFixed(0)} ms`);
    }
  });

  function poolOf(method: UnaryMethod): StringPool {
    const ids = [world.seed.tmcId, world.seed.orgId, ...world.seed.userIds];
    const isAuth = method.parent.typeName === "travel.auth.v2.AuthService";
    const common = [
      "TMC_ADMIN",
      "COMPANY_ADMIN",
      "127.0.0.1",
      "::1",
      "https://issuer.example",
      '{"keys":[]}',
      "a@b.example",
      world.admin.token,
    ];
    const oauth = [
      "client_credentials",
      "urn:ietf:params:oauth:grant-type:token-exchange",
      "refresh_token",
      "urn:ietf:params:oauth:token-type:access_token",
      "api-users",
      "openid",
      "http://auth.test/v2",
    ];
    // The admin's own clientId goes only to the token endpoint: rotating or revoking it would end the run's token.
    return {
      constants: isAuth
        ? [...ids, ...common, ...oauth, world.admin.clientId, world.admin.clientSecret]
        : [...ids, ...common],
      dynamic: ["created", "revoked"],
    };
  }

  const resolve = (ref: Ref): string => {
    const list = ref.pool === "created" ? world.created : ref.pool === "revoked" ? world.revoked : [];
    return list.length === 0 ? "" : list[ref.index % list.length]!;
  };

  async function syncApiUsers(): Promise<void> {
    const { db } = internalsOf(world.running.service);
    const rows = (await db("api_users")
      .where({ tmc_id: world.seed.tmcId })
      .whereNot({ client_id: world.admin.clientId })
      .select("client_id", "revoked_at")) as Array<{ client_id: string; revoked_at: Date | null }>;
    world.created = rows.filter((r) => r.revoked_at === null).map((r) => r.client_id);
    world.revoked = rows.filter((r) => r.revoked_at !== null).map((r) => r.client_id);
  }

  function newTransport(face: TypedFace): Transport {
    // Each transport gets a keep-alive agent of its own, so a fresh transport means fresh connections.
    const agent = new http.Agent({ keepAlive: true });
    agents.push(agent);
    const options = { baseUrl: world?.baseUrl ?? "", httpVersion: "1.1" as const, nodeOptions: { agent } };
    if (face === "grpc-web") return createGrpcWebTransport(options);
    return createConnectTransport({ ...options, useBinaryFormat: face === "connect-binary" });
  }

  function grpcClientOf(service: DescService): GenericGrpcClient {
    let client = grpcClients.get(service.typeName);
    if (!client)
      grpcClients.set(
        service.typeName,
        (client = rawGrpcClient(service, new URL(world.baseUrl).host, UNLIMITED_MESSAGES)),
      );
    return client;
  }

  async function call(method: UnaryMethod, c: RpcCase): Promise<Outcome | "skipped"> {
    const authorization = authorizationOf(method, c.credential, world);
    const path = `/${method.parent.typeName}/${method.name}`;
    switch (c.face) {
      case "connect-json":
      case "connect-binary":
      case "grpc-web": {
        const message = messageOf(method, c.message);
        if (!message) return "skipped";
        if (c.unknown.length > 0) (message as Message & { $unknown?: UnknownField[] }).$unknown = c.unknown;
        try {
          // The transport keeps its HTTP/1.1 connections, also after an oversized message's early answer (connection: close).
          await transports[c.face].unary(
            method,
            undefined,
            CALL_TIMEOUT_MS,
            authorization ? { authorization } : {},
            message as never,
            undefined,
          );
          return { ok: true, raw: "ok" };
        } catch (e) {
          return fromConnectError(e);
        }
      }
      case "grpc-js": {
        const payload = Buffer.from(bytesOf(method, c.payload));
        const metadata = new grpc.Metadata();
        if (authorization) metadata.set("authorization", authorization);
        const client = grpcClientOf(method.parent);
        return new Promise<Outcome>((done) => {
          client[method.name]!(
            payload,
            metadata,
            { deadline: Date.now() + CALL_TIMEOUT_MS },
            (err: grpc.ServiceError | null) => {
              if (!err) return done({ ok: true, raw: "ok" });
              const [details] = err.metadata?.get("grpc-status-details-bin") ?? [];
              done(
                grpcStatusOutcome(
                  err.code,
                  err.details,
                  Buffer.isBuffer(details) ? new Uint8Array(details) : undefined,
                ),
              );
            },
          );
        });
      }
      case "raw-connect": {
        let payload: Buffer;
        if (c.body.kind === "bytes") payload = Buffer.from(bytesOf(method, c.body.payload));
        else if (c.body.kind === "json") payload = Buffer.from(JSON.stringify(c.body.value) ?? "", "utf8");
        else payload = Buffer.from(c.body.text, "utf8");
        const headers: Record<string, string> = { ...c.headers };
        if (c.compress) {
          const compressed = c.compress.encoding === "gzip" ? zlib.gzipSync(payload) : zlib.brotliCompressSync(payload);
          payload =
            c.compress.cut === null ? compressed : compressed.subarray(0, c.compress.cut % (compressed.length + 1));
          headers["content-encoding"] = c.compress.encoding;
        }
        if (c.contentType) headers["content-type"] = c.contentType;
        if (authorization) headers.authorization = authorization;
        const response = await world.running.service.app.inject({
          method: c.verb as InjectOptions["method"],
          url: path,
          headers,
          payload,
        });
        const outcome = connectOutcome(response.statusCode, response.headers, response.rawPayload);
        const timeout = Number(c.headers["connect-timeout-ms"]);
        return { ...outcome, shortDeadline: Number.isFinite(timeout) && timeout >= 0 && timeout < 1000 };
      }
      case "raw-grpc-web": {
        const body = Buffer.concat([
          ...c.frames.map((f) =>
            frame(
              f.flags,
              f.payload.kind === "json"
                ? Buffer.from(JSON.stringify(f.payload.value) ?? "", "utf8")
                : bytesOf(method, f.payload),
              f.lengthDelta,
            ),
          ),
          c.extra,
        ]);
        const headers: Record<string, string> = { "content-type": c.contentType, "x-grpc-web": "1" };
        if (authorization) headers.authorization = authorization;
        const response = await world.running.service.app.inject({
          method: "POST",
          url: path,
          headers,
          payload: c.contentType === "application/grpc-web-text" ? body.toString("base64") : body,
        });
        return grpcWebOutcome(response.statusCode, response.headers, response.rawPayload);
      }
    }
  }

  async function runCase(method: UnaryMethod, generated: RpcCase): Promise<void> {
    // Rotate and revoke need targets: keep two API users the fuzzer made (a setup step, not a case).
    if ((method.name === "DeleteApiUser" || method.name === "RotateClientSecret") && world.created.length < 2) {
      await fetch(`${world.baseUrl}/v2/api-users`, {
        method: "POST",
        headers: { authorization: `Bearer ${world.admin.token}`, "content-type": "application/json" },
        body: "{}",
      });
      await syncApiUsers();
      lastFingerprint = undefined;
    }
    const c = resolveRefs(generated, resolve);
    const { db } = internalsOf(world.running.service);
    const t0 = performance.now();
    // The fingerprint after the previous refused call is this call's "before" (nothing else writes those tables).
    const before = lastFingerprint ?? (await storageFingerprint(db));
    lastFingerprint = undefined;
    const t1 = performance.now();
    const outcome = await call(method, c);
    timing.add(`fingerprint`, t1 - t0);
    timing.add(c.face, performance.now() - t1);
    const label = `${method.parent.name}.${method.name}`;
    if (outcome === "skipped") {
      tally.add(label, `${c.face} skipped (protobuf JSON refuses the generated value client-side)`);
      return;
    }
    const context = () =>
      `\n  case: ${show(c, 1500)}\n  outcome: ${outcome.raw}${outcome.errorResponse ? ` ${show(outcome.errorResponse)}` : ""}`;
    if (outcome.ok) {
      tally.add(label, `${c.face} OK`);
      if (
        method.parent.typeName === "travel.apiuser.v2.ApiUserService" ||
        method.parent.typeName === "travel.operator.v1.OperatorService"
      )
        await syncApiUsers();
      // Two RPCs end the run's admin token by design: RevokeToken (RFC 7009) given the admin's own
      // token with the admin's credentials (both are in the pool), and an emergency RotateSigningKey
      // (`now`), which withdraws the key that signed it. After either, the admin gets a new token.
      // After any other accepted case, a refused admin token fails here, naming the case.
      if (await endedByDesign(method.name))
        world.admin.token = await accessToken(world.baseUrl, world.admin.clientId, world.admin.clientSecret);
      await assertAdminTokenWorks(`after ${label} ${context()}`);
      return;
    }
    if (outcome.restBody) {
      // Refused by Fastify before any RPC (unknown method path, body limit, no content type): the REST ErrorResponse.
      tally.add(label, `${c.face} HTTP ${outcome.httpStatus} ${outcome.restBody.errorMessages?.[0]?.errorCode}`);
      assert.ok(outcome.httpStatus! < 500, `P1: HTTP ${outcome.httpStatus} ${context()}`);
      assert.ok(
        typeof outcome.restBody.debugIdentifier === "string" && outcome.restBody.debugIdentifier.length > 0,
        `P2: debugIdentifier ${context()}`,
      );
      assert.ok(typeof outcome.restBody.errorMessages?.[0]?.errorCode === "string", `P2: errorCode ${context()}`);
    } else {
      const code = outcome.code!;
      const er = outcome.errorResponse;
      const hasErrorResponse = !!er && er.debugIdentifier.length > 0 && (er.errorMessages[0]?.errorCode ?? "") !== "";
      const known = knownProblemOf(code, outcome.message ?? "", hasErrorResponse);
      tally.add(
        label,
        `${c.face} ${Code[code]}${er ? ` ${er.errorMessages[0]?.errorCode}` : known ? ` (known: ${known})` : " (no ErrorResponse)"}`,
      );
      if (known && !FUZZ_STRICT) {
        if (!knownSeen.has(known)) knownSeen.set(known, `${label} via ${c.face}: ${outcome.raw}`);
      } else {
        assert.ok(!FORBIDDEN_CODES.has(code), `P1: code ${Code[code]} ${context()}`);
        if (code === Code.Unimplemented)
          assert.ok(
            UNIMPLEMENTED_SERVICES.has(method.parent.typeName),
            `P1: UNIMPLEMENTED from an implemented service ${context()}`,
          );
        if (code === Code.DeadlineExceeded)
          assert.ok(outcome.shortDeadline, `P1: DEADLINE_EXCEEDED without a short client deadline ${context()}`);
        assert.ok(hasErrorResponse, `P2: ${Code[code]} without an ErrorResponse detail ${context()}`);
      }
    }
    const after = await storageFingerprint(db);
    assert.equal(after, before, `P3: a refused call wrote something ${context()}`);
    lastFingerprint = after;
  }

  for (const method of methods) {
    test(`${method.parent.typeName}/${method.name}: no INTERNAL/UNKNOWN, ErrorResponse on every error, nothing written on refusal`, async () => {
      await fc.assert(
        fc.asyncProperty(
          caseArbitrary(
            method,
            poolOf(method),
            validRequests(method, {
              adminClientId: world.admin.clientId,
              adminClientSecret: world.admin.clientSecret,
              adminToken: world.admin.token,
              resourceServer: world.resourceServer,
              ...world.seed,
            }),
          ),
          (c) => runCase(method, c),
        ),
        fuzzParams(),
      );
    });
  }

  /** Whether the admin's token is refused now as the accepted call of `method` may do by design. */
  async function endedByDesign(method: string): Promise<boolean> {
    if (method !== "RevokeToken" && method !== "RotateSigningKey") return false;
    const response = await world.running.service.app.inject({
      method: "GET",
      url: "/v2/api-users",
      headers: { authorization: `Bearer ${world.admin.token}` },
    });
    if (response.statusCode !== 401) return false;
    return method === "RevokeToken" ? response.body.includes("has been revoked") : !(await adminTokenKeyPublished());
  }

  /** Whether the key that signed the admin's token is still in the JWKS. */
  async function adminTokenKeyPublished(): Promise<boolean> {
    const { kid } = JSON.parse(Buffer.from(world.admin.token.split(".")[0]!, "base64url").toString()) as {
      kid: string;
    };
    const response = await world.running.service.app.inject({ method: "GET", url: "/.well-known/jwks.json" });
    return (JSON.parse(response.body) as { keys: Array<{ kid: string }> }).keys.some((key) => key.kid === kid);
  }

  async function assertAdminTokenWorks(when: string): Promise<void> {
    const response = await world.running.service.app.inject({
      method: "GET",
      url: "/v2/api-users",
      headers: { authorization: `Bearer ${world.admin.token}` },
    });
    assert.equal(response.statusCode, 200, `the run's admin token stopped working ${when}: ${response.body}`);
  }

  test("the run kept its admin: its token still works", () => assertAdminTokenWorks("by the end of the run"));

  // ---- the former known problems, reproduced (they were `todo` until src/http/protocol/connect-handlers.ts) ----

  const rotate = "/travel.apiuser.v2.ApiUserService/RotateClientSecret";
  const adminHeaders = () => ({ authorization: `Bearer ${world.admin.token}` });

  test("fixed: malformed protobuf binary is INVALID_ARGUMENT with an ErrorResponse, not INTERNAL", async () => {
    const response = await world.running.service.app.inject({
      method: "POST",
      url: rotate,
      headers: { ...adminHeaders(), "content-type": "application/proto" },
      payload: Buffer.from([0xff]),
    });
    const outcome = connectOutcome(response.statusCode, response.headers, response.rawPayload);
    assert.equal(outcome.code, Code.InvalidArgument, outcome.raw);
    assert.ok(outcome.errorResponse, `no ErrorResponse detail: ${outcome.raw}`);
  });

  test("fixed: over gRPC too (grpc-js, one byte 0xff)", async () => {
    const outcome = await call(
      methods.find((m) => m.name === "RotateClientSecret")!,
      { face: "grpc-js", credential: "valid", payload: { kind: "random", bytes: new Uint8Array([0xff]) } },
    );
    assert.ok(outcome !== "skipped");
    assert.equal(outcome.code, Code.InvalidArgument, outcome.raw);
    assert.ok(outcome.errorResponse, `no ErrorResponse detail: ${outcome.raw}`);
  });

  test("fixed: wrongly typed Connect JSON carries an ErrorResponse", async () => {
    const response = await world.running.service.app.inject({
      method: "POST",
      url: rotate,
      headers: { ...adminHeaders(), "content-type": "application/json" },
      payload: '{"clientId": 5}',
    });
    const outcome = connectOutcome(response.statusCode, response.headers, response.rawPayload);
    assert.equal(outcome.code, Code.InvalidArgument, outcome.raw);
    assert.ok(outcome.errorResponse, `no ErrorResponse detail: ${outcome.raw}`);
  });

  test("fixed: connect's protocol refusals carry an ErrorResponse", async () => {
    const cases: InjectOptions[] = [
      { method: "POST", url: rotate, headers: { ...adminHeaders(), "content-type": "text/plain" }, payload: "x" },
      { method: "GET", url: rotate, headers: adminHeaders() },
      {
        method: "POST",
        url: rotate,
        headers: { ...adminHeaders(), "content-type": "application/json", "connect-timeout-ms": "abc" },
        payload: "{}",
      },
      {
        method: "POST",
        url: rotate,
        headers: { ...adminHeaders(), "content-type": "application/json", "content-encoding": "gzip" },
        payload: "not gzip",
      },
      {
        method: "POST",
        url: rotate,
        headers: { ...adminHeaders(), "content-type": "application/json", "content-encoding": "zstd" },
        payload: "{}",
      },
    ];
    const failures: string[] = [];
    for (const options of cases) {
      const response = await world.running.service.app.inject(options);
      const outcome = connectOutcome(response.statusCode, response.headers, response.rawPayload);
      if (!outcome.errorResponse && !outcome.restBody)
        failures.push(`${options.method} ${show(options.headers)} → ${outcome.raw}`);
    }
    assert.deepEqual(failures, []);
  });

  test("fixed: a truncated gzip or brotli body is a client error, not INTERNAL", async () => {
    const answers: string[] = [];
    for (const [encoding, payload] of [
      ["gzip", zlib.gzipSync(Buffer.from("{}")).subarray(0, 12)],
      ["br", Buffer.from("xx")],
    ] as const) {
      const response = await world.running.service.app.inject({
        method: "POST",
        url: rotate,
        headers: { ...adminHeaders(), "content-type": "application/json", "content-encoding": encoding },
        payload,
      });
      answers.push(`${encoding}: ${response.statusCode} ${response.body}`);
    }
    assert.ok(
      answers.every((a) => / 4\d\d /.test(a)),
      answers.join("\n"),
    );
  });

  test("fixed: after an oversized message, the next call on the same HTTP/1.1 connection is answered", async () => {
    const method = methods.find((m) => m.name === "RotateClientSecret")!;
    const transport = newTransport("connect-json");
    const call = (clientId: string) =>
      transport
        .unary(
          method,
          undefined,
          2_000,
          { authorization: `Bearer ${world.admin.token}` },
          fromJson(method.input, { clientId }) as never,
          undefined,
        )
        .then(
          () => "ok",
          (e: unknown) => Code[ConnectError.from(e).code],
        );
    assert.equal(await call("x".repeat(200_000)), "InvalidArgument");
    assert.equal(await call("nobody"), "NotFound");
  });

  test("fixed: gRPC-Web answers with a grpc-status when the error message would hold a lone surrogate", async () => {
    const answers: string[] = [];
    for (const [path, json] of [
      [
        "/travel.user.v2.UserService/UpdateUser",
        JSON.stringify({ userId: world.seed.userIds[0], travelPreferences: { "\ud800": 1 } }),
      ],
      ["/travel.apiuser.v2.ApiUserService/GetApiUsers", "😀"],
    ] as const) {
      const response = await world.running.service.app.inject({
        method: "POST",
        url: path,
        headers: { ...adminHeaders(), "content-type": "application/grpc-web+json" },
        payload: frame(0, Buffer.from(json, "utf8")),
      });
      const outcome = grpcWebOutcome(response.statusCode, response.headers, response.rawPayload);
      if (outcome.code !== Code.InvalidArgument || !outcome.errorResponse) answers.push(`${path}: ${outcome.raw}`);
    }
    assert.deepEqual(answers, []);
  });

  test("fixed: an RPC message over the body limit carries an ErrorResponse", async () => {
    const outcome = await call(
      methods.find((m) => m.name === "RotateClientSecret")!,
      { face: "grpc-js", credential: "valid", payload: { kind: "oversized", size: BODY_LIMIT_BYTES + 1 } },
    );
    assert.ok(outcome !== "skipped");
    assert.equal(outcome.code, Code.InvalidArgument, outcome.raw);
    assert.equal(
      outcome.errorResponse?.errorMessages[0]?.errorCode,
      "PAYLOAD_TOO_LARGE",
      `no ErrorResponse detail: ${outcome.raw}`,
    );
  });
});
