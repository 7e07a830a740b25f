import crypto from "node:crypto";
import http2 from "node:http2";
import type { IncomingMessage } from "node:http";
import zlib from "node:zlib";
import proxyAddr from "@fastify/proxy-addr";
import { fromBinary, toBinary, type DescMethodUnary } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type Transport } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { FastifyBaseLogger } from "fastify";
import { ErrorResponseSchema } from "../../gen/travel/common/v1/error_pb.js";
import type { Refusal } from "../gateway/error-reply.js";
import { DomainError } from "../errors/domain-error.js";
import type { Metrics } from "../observability/metrics.js";
import { contractServices } from "../rpc/areas.js";
import { errorDialectOf } from "../rpc/contract.js";
import { toConnectError, translateError } from "../rpc/errors/error-response.js";
import { printable } from "../rpc/errors/printable.js";
import { protocolRefusal } from "../rpc/errors/protocol-errors.js";
import { requestInfoKey, rpcRequestHeaders } from "../rpc/request-context.js";
import { respecGrpcMessage } from "./grpc-message.js";
import { recordRequest, refusalFields } from "./request-log.js";

/**
 * Unary gRPC calls of the contract, served straight from HTTP/2 streams (issue 21). Through
 * Connect's router on the http2 compatibility API a gRPC call cost about 2.5 times the CPU of the
 * same RPC over REST: Connect's envelope pipeline of async iterables and linked abort signals,
 * connect-node's request/response adapter and Fastify's compatibility objects, none of which a
 * unary call needs. Here a call's one envelope is read from the stream, decoded with its input
 * schema, and handed to the same in-process transport and interceptor chain the REST gateway
 * uses (authentication, rate limits, validation, metrics, the trace span, the ErrorResponse), so
 * both faces behave alike. Streaming RPCs, reflection, health, gRPC with JSON, Connect and
 * gRPC-Web keep going through Connect (connect-handlers.ts).
 */
export interface GrpcUnaryOptions {
  /** The in-process transport over the RPC core's interceptors (RpcCore.transport). */
  readonly transport: Transport;
  /** The largest request message, after decompression (BODY_LIMIT_BYTES). */
  readonly readMaxBytes: number;
  /** Proxies whose X-Forwarded-For is believed (TRUSTED_PROXIES), as Fastify's trustProxy. */
  readonly trustedProxies: readonly string[];
  readonly logger: FastifyBaseLogger;
  readonly metrics: Metrics;
}

export interface GrpcUnary {
  /** Takes the routes Connect serves: the unary methods of the contract among them are served here. */
  readonly route: (handlers: readonly UniversalHandler[]) => void;
  /** Serves the stream and returns true when it is a call for this path; false leaves it to the compatibility API. */
  readonly serve: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => boolean;
}

/** The content types served here (binary protobuf); gRPC with JSON stays with Connect. */
const BINARY_CONTENT_TYPES = new Set(["application/grpc", "application/grpc+proto"]);
/** Any gRPC content type but gRPC-Web's: enough to answer an unknown method in gRPC's terms. */
const GRPC_CONTENT_TYPE = /^application\/grpc(?:\+[^;]*)?(?:;|$)/i;
/** The request encodings accepted (gzip: grpc-js's and connect-go's only compression). */
const ACCEPTED_ENCODINGS = "gzip";
/** grpc-timeout: up to 8 digits and a unit (gRPC over HTTP/2, "Timeout"). */
const TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 0.001, n: 0.000_001 };

export function createGrpcUnary(options: GrpcUnaryOptions): GrpcUnary {
  let methods: Map<string, DescMethodUnary> | undefined;
  let connectPaths: Set<string> | undefined;
  const served: Served = {
    ...options,
    lines: options.logger.child({}, { redact: [] }),
    trust: options.trustedProxies.length > 0 ? proxyAddr.compile([...options.trustedProxies]) : undefined,
  };
  return {
    route(handlers) {
      const contract = new Set(contractServices);
      methods = new Map();
      for (const { method, service, requestPath } of handlers) {
        if (method.methodKind === "unary" && contract.has(service)) methods.set(requestPath, method as DescMethodUnary);
      }
      connectPaths = new Set(handlers.map((handler) => handler.requestPath));
    },
    serve(stream, headers) {
      if (!methods || !connectPaths || headers[":method"] !== "POST") return false;
      const contentType = headers["content-type"]?.toLowerCase();
      const path = headers[":path"] ?? "";
      if (contentType === undefined || !GRPC_CONTENT_TYPE.test(contentType) || path.includes("?")) return false;
      const method = methods.get(path);
      if (method && BINARY_CONTENT_TYPES.has(contentType)) {
        new UnaryCall(served, stream, headers, method, contentType).start();
        return true;
      }
      if (connectPaths.has(path)) return false;
      new UnaryCall(served, stream, headers, undefined, "application/grpc+proto").start();
      return true;
    },
  };
}

type Served = GrpcUnaryOptions & {
  /** The access-log lines' logger (fixed fields only, as fastify-app.ts's OneLinePerRequest writes them). */
  readonly lines: FastifyBaseLogger;
  readonly trust: ((address: string, hop: number) => boolean) | undefined;
};

/** One call: its body read, its answer written once, its access-log line written when its stream closes. */
class UnaryCall {
  private readonly requestId = crypto.randomUUID();
  private readonly started = performance.now();
  private readonly path: string;
  private readonly address: string;
  private readonly abort = new AbortController();
  private readonly chunks: Buffer[] = [];
  private received = 0;
  /** The message's length, once its envelope's 5-byte prefix has arrived. */
  private declared: number | undefined;
  private compressed = false;
  private answered = false;
  private deadline: NodeJS.Timeout | undefined;
  /** When the call's grpc-timeout ends (performance.now()); its timer may not have run yet when an answer is ready. */
  private deadlineAt = Number.POSITIVE_INFINITY;
  /** Why the call was refused, for its access-log line: the RPC's own refusal first (it names the RPC and the client). */
  private refusal: Refusal | undefined;
  /** The call's trace id, when tracing is on (for the log line). */
  private traceId: string | undefined;

  constructor(
    private readonly served: Served,
    private readonly stream: http2.ServerHttp2Stream,
    private readonly headers: http2.IncomingHttpHeaders,
    private readonly method: DescMethodUnary | undefined,
    private readonly contentType: string,
  ) {
    this.path = headers[":path"] ?? "";
    this.address = clientAddress(stream.session?.socket?.remoteAddress, headers, served.trust);
  }

  start(): void {
    this.stream.on("error", ignore);
    this.stream.once("close", () => this.closed());
    const method = this.method;
    if (!method) return this.refuse(new DomainError("NOT_IMPLEMENTED", `No RPC ${printable(this.path, 200)} here`));
    const refusal = this.timeoutRefusal();
    if (refusal) return this.refuse(refusal);
    const encodingRefusal = this.encodingRefusal();
    if (encodingRefusal) return this.refuse(encodingRefusal, { "grpc-accept-encoding": ACCEPTED_ENCODINGS });
    this.stream.on("data", this.onData);
    this.stream.once("end", () => this.onEnd(method));
  }

  /** A bad grpc-timeout is refused as Connect refuses it; a good one ends the call at its deadline. */
  private timeoutRefusal(): DomainError | undefined {
    const value = single(this.headers["grpc-timeout"]);
    if (value === undefined) return undefined;
    const parts = TIMEOUT.exec(value);
    if (!parts)
      return protocolRefusal(
        new ConnectError(`protocol error: invalid grpc timeout value: ${value}`, Code.InvalidArgument),
      );
    const timeoutMs = Number(parts[1]) * TIMEOUT_UNIT_MS[parts[2]!]!;
    this.deadlineAt = this.started + timeoutMs;
    this.deadline = setTimeout(() => this.expire(timeoutMs), Math.ceil(timeoutMs));
    this.deadline.unref();
    return undefined;
  }

  /** gzip or none; any other grpc-encoding is UNIMPLEMENTED naming what is accepted (gRPC's compression.md). */
  private encodingRefusal(): DomainError | undefined {
    const encoding = single(this.headers["grpc-encoding"]);
    if (encoding === undefined || encoding === "identity" || encoding === ACCEPTED_ENCODINGS) return undefined;
    return new DomainError(
      "NOT_IMPLEMENTED",
      `unknown compression "${printable(encoding, 40)}": supported encodings are ${ACCEPTED_ENCODINGS}`,
    );
  }

  /** Buffers the body; a message over the limit is refused on its envelope's prefix, a second one on its first byte. */
  private readonly onData = (chunk: Buffer): void => {
    if (this.answered) return;
    this.chunks.push(chunk);
    this.received += chunk.length;
    if (this.declared === undefined && this.received >= 5) {
      const prefix = this.chunks.length === 1 ? chunk : Buffer.concat(this.chunks);
      this.compressed = (prefix[0]! & 0b1) === 1;
      this.declared = prefix.readUInt32BE(1);
      if (this.declared > this.served.readMaxBytes) return this.refuse(payloadTooLarge());
    }
    if (this.declared !== undefined && this.received > 5 + this.declared)
      this.refuse(undecodable("protocol error: received extra input message for unary method", Code.Unimplemented));
  };

  private onEnd(method: DescMethodUnary): void {
    if (this.answered) return;
    if (this.received === 0)
      return this.refuse(undecodable("protocol error: missing input message for unary method", Code.Unimplemented));
    if (this.declared === undefined || this.received < 5 + this.declared)
      return this.refuse(undecodable("protocol error: incomplete envelope", Code.InvalidArgument));
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    const data = this.messageBytes(body.subarray(5));
    if (data instanceof DomainError) return this.refuse(data);
    let input;
    try {
      input = fromBinary(method.input, data);
    } catch (e) {
      return this.refuse(undecodable(`parse binary: ${e instanceof Error ? e.message : String(e)}`, Code.Internal));
    }
    this.call(method, input).catch((e: unknown) => this.fail(e));
  }

  /** The message, decompressed when its flag says so (never past the limit); a refusal when it cannot be. */
  private messageBytes(data: Buffer): Buffer | DomainError {
    if (!this.compressed) return data;
    if (this.headers["grpc-encoding"] !== ACCEPTED_ENCODINGS)
      return undecodable("received compressed envelope, but do not know how to decompress", Code.Internal);
    try {
      return zlib.gunzipSync(data, { maxOutputLength: this.served.readMaxBytes });
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE"
        ? payloadTooLarge()
        : undecodable("decompression failed", Code.InvalidArgument);
    }
  }

  private async call(method: DescMethodUnary, input: unknown): Promise<void> {
    const context = createContextValues().set(requestInfoKey, {
      requestId: this.requestId,
      remoteAddress: this.address,
      protocol: "grpc",
      refused: (refusal) => (this.refusal ??= refusal),
      traced: (traceId) => (this.traceId = traceId),
    });
    const response = await this.served.transport.unary(
      method,
      this.abort.signal,
      undefined,
      rpcRequestHeaders(this.headers),
      input as never,
      context,
    );
    if (this.answered || this.stream.closed || this.stream.destroyed) return;
    // A call that ran past its deadline without yielding to the timers (the embedded database answers in-process) is not OK.
    if (performance.now() > this.deadlineAt) return this.expire(this.deadlineAt - this.started);
    this.answered = true;
    clearTimeout(this.deadline);
    const envelope = envelopeOf(toBinary(method.output, response.message));
    const head: http2.OutgoingHttpHeaders = { ":status": 200, "content-type": this.contentType };
    response.header.forEach((value, name) => (head[name] = value));
    head["x-request-id"] = this.requestId;
    const trailers: http2.OutgoingHttpHeaders = { "grpc-status": "0" };
    response.trailer.forEach((value, name) => (trailers[name] = value));
    this.stream.once("wantTrailers", () => this.stream.sendTrailers(trailers));
    this.write(() => {
      this.stream.respond(head, { waitForTrailers: true });
      this.stream.end(envelope);
    });
  }

  /** An error of the interceptor chain carries its ErrorResponse already; anything else is translated here. */
  private fail(thrown: unknown): void {
    if (thrown instanceof ConnectError && thrown.findDetails(ErrorResponseSchema).length > 0)
      return this.answerError(thrown);
    this.refuse(thrown instanceof DomainError ? thrown : protocolRefusal(ConnectError.from(thrown)));
  }

  /** The call outlived its grpc-timeout: DEADLINE_EXCEEDED now, and its work is told to stop. */
  private expire(timeoutMs: number): void {
    this.refuse(
      new DomainError("DEADLINE_EXCEEDED", `The call did not complete within its grpc-timeout (${timeoutMs} ms)`),
    );
    this.abort.abort();
  }

  /** A refusal outside the interceptor chain, as the ErrorResponse in the method's dialect, logged as connect-handlers.ts logs it. */
  private refuse(error: DomainError, extra: http2.OutgoingHttpHeaders = {}): void {
    if (this.answered) return;
    const rpc = this.method ? `${this.method.parent.typeName}/${this.method.name}` : printable(this.path, 200);
    const cause = error.cause instanceof ConnectError ? printable(error.cause.rawMessage, 300) : undefined;
    this.refusal ??= { errorCode: error.code, message: error.message, rpc };
    const log = this.served.logger;
    if (error.code === "INTERNAL_ERROR")
      log.error({ reqId: this.requestId, rpc, protocol: "grpc", err: error.cause }, "rpc failed in the protocol layer");
    else
      log.info(
        { reqId: this.requestId, rpc, protocol: "grpc", errorCode: error.code, cause },
        "rpc refused by the protocol layer",
      );
    const translated = translateError(
      error,
      this.requestId,
      this.method?.input,
      this.method ? errorDialectOf(this.method.parent) : undefined,
    );
    this.answerError(toConnectError(translated, error), extra);
  }

  /** Trailers-only: status, message and details in the one HEADERS frame that ends the stream. */
  private answerError(error: ConnectError, extra: http2.OutgoingHttpHeaders = {}): void {
    if (this.answered) return;
    this.answered = true;
    clearTimeout(this.deadline);
    this.stream.off("data", this.onData);
    if (this.stream.closed || this.stream.destroyed) return;
    const fields = setTrailerStatus(new Headers(), error);
    respecGrpcMessage(fields);
    const head: http2.OutgoingHttpHeaders = { ":status": 200, "content-type": this.contentType, ...extra };
    fields.forEach((value, name) => (head[name] = value));
    head["x-request-id"] = this.requestId;
    this.write(() => {
      this.stream.respond(head, { endStream: true });
      this.stopReading();
    });
  }

  /** Writes the answer; a session that went away meanwhile makes Node throw, and then the stream has nobody to answer. */
  private write(answer: () => void): void {
    try {
      answer();
    } catch (e) {
      this.served.logger.debug({ reqId: this.requestId, err: e }, "the gRPC answer could not be written");
      this.stream.destroy();
    }
  }

  /**
   * An answer sent before the request has ended (a refusal on its envelope's prefix, a deadline
   * passed while the message was still arriving): the client is told to stop sending without an
   * error (RST_STREAM NO_ERROR after the answer, RFC 9113 §8.1), so the stream closes at once
   * instead of waiting for a body nobody reads. grpc-js and connect-go read the answer as final.
   */
  private stopReading(): void {
    if (!this.stream.readableEnded && !this.stream.closed) this.stream.close(http2.constants.NGHTTP2_NO_ERROR);
  }

  /** The stream is gone: a call still running is aborted (the client cancelled), and its one access-log line written. */
  private closed(): void {
    clearTimeout(this.deadline);
    const cancelled = !this.answered;
    if (cancelled) {
      this.answered = true;
      this.abort.abort();
    }
    const responseTime = performance.now() - this.started;
    const route = this.method ? this.path : "unmatched";
    recordRequest(this.served.metrics, { method: "POST", route, status: 200 }, responseTime);
    this.served.lines.info(
      {
        reqId: this.requestId,
        req: { method: "POST", url: this.path, ip: this.address },
        res: { statusCode: 200 },
        responseTime,
        ...(this.traceId === undefined ? {} : { trace_id: this.traceId }),
        ...(cancelled ? { cancelled: true } : refusalFields(this.refusal)),
      },
      "request completed",
    );
  }
}

/** The caller's address as Fastify's request.ip gives it: the socket's, or X-Forwarded-For's nearest untrusted hop. */
function clientAddress(
  socketAddress: string | undefined,
  headers: http2.IncomingHttpHeaders,
  trust: ((address: string, hop: number) => boolean) | undefined,
): string {
  if (!trust || socketAddress === undefined) return socketAddress ?? "unknown";
  const request = {
    socket: { remoteAddress: socketAddress },
    headers: { "x-forwarded-for": headers["x-forwarded-for"] },
  };
  return proxyAddr(request as unknown as IncomingMessage, trust);
}

/** A header's value; a repeated one as Node joins it. */
function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(", ") : value;
}

function envelopeOf(message: Uint8Array): Buffer {
  const envelope = Buffer.allocUnsafe(5 + message.byteLength);
  envelope[0] = 0;
  envelope.writeUInt32BE(message.byteLength, 1);
  envelope.set(message, 5);
  return envelope;
}

function payloadTooLarge(): DomainError {
  return new DomainError("PAYLOAD_TOO_LARGE", "The request body is too large");
}

/** The same refusal Connect's protocol layer gives for these bytes (protocol-errors.ts words it). */
function undecodable(reason: string, code: Code): DomainError {
  return protocolRefusal(new ConnectError(reason, code));
}

function ignore(): void {}
