import crypto from "node:crypto";
import http2 from "node:http2";
import { toBinary, type DescMethodUnary } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type Transport } from "@connectrpc/connect";
import { compressionGzip } from "@connectrpc/connect-node";
import type { FastifyBaseLogger } from "fastify";
import { ErrorResponseSchema } from "../../../gen/travel/common/v1/error_pb.js";
import type { Refusal } from "../../gateway/error-reply.js";
import { DomainError } from "../../errors/domain-error.js";
import type { Metrics } from "../../observability/metrics.js";
import { contractServices } from "../../rpc/areas.js";
import { printable } from "../../rpc/errors/printable.js";
import { protocolRefusal } from "../../rpc/errors/protocol-errors.js";
import { requestInfoKey, rpcRequestHeaders } from "../../rpc/request-context.js";
import { AccessLog, CANCELLED, recordRequest } from "./access-log.js";
import { addressedUrlOf, clientAddressOf, type ProxyTrust } from "./client-address.js";
import {
  CONNECT_REASONS,
  compressionNegotiate,
  createMethodSerializationLookup,
  envelopeDecompress,
  parseTimeout,
  setTrailerStatus,
  validateReadWriteMaxBytes,
  type UniversalHandler,
} from "./connect-internals.js";
import { respecGrpcMessage } from "./grpc-message.js";
import { refusedByProtocol } from "./refusal.js";

/**
 * Unary gRPC calls of the contract, served straight from HTTP/2 streams. Through
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
  /** The one client-address rule (client-address.ts), the one Fastify is given as its trustProxy. */
  readonly proxyTrust: ProxyTrust;
  readonly logger: FastifyBaseLogger;
  /** The one access-log writer, shared with Fastify's requests. */
  readonly accessLog: AccessLog;
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
/** The request encoding accepted (gzip: grpc-js's and connect-go's only compression). */
const GZIP = compressionGzip;
/** grpc-timeout: up to 8 digits and a unit (gRPC over HTTP/2, "Timeout"). */
const TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 0.001, n: 0.000_001 };
/** No upper bound on grpc-timeout beyond its own 8 digits (as Connect's router, whose maxTimeoutMs is unset). */
const NO_MAX_TIMEOUT_MS = Number.MAX_SAFE_INTEGER;
/** The answer's status line of every call (gRPC's status travels in its trailers), as its access-log line shows it. */
const ANSWERED = { statusCode: 200 } as const;

/** A unary method served here, with Connect's own binary parser of its input ("parse binary: …" when it does not decode). */
interface ServedMethod {
  readonly method: DescMethodUnary;
  readonly parse: (bytes: Uint8Array) => unknown;
}

export function createGrpcUnary(options: GrpcUnaryOptions): GrpcUnary {
  let methods: Map<string, ServedMethod> | undefined;
  let connectPaths: Set<string> | undefined;
  const served = options;
  const limits = validateReadWriteMaxBytes(options.readMaxBytes, undefined, undefined);
  return {
    route(handlers) {
      const contract = new Set(contractServices);
      methods = new Map();
      for (const { method, service, requestPath } of handlers) {
        if (method.methodKind !== "unary" || !contract.has(service)) continue;
        const { parse } = createMethodSerializationLookup(method, undefined, undefined, limits).getI(true);
        methods.set(requestPath, { method: method as DescMethodUnary, parse });
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

type Served = GrpcUnaryOptions;

/** One call: its body read, its answer written once, its access-log line written when its stream closes. */
class UnaryCall {
  private readonly requestId = crypto.randomUUID();
  private readonly started = performance.now();
  private readonly path: string;
  private readonly address: string;
  private readonly method: DescMethodUnary | undefined;
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
    private readonly target: ServedMethod | undefined,
    private readonly contentType: string,
  ) {
    this.path = headers[":path"] ?? "";
    this.method = target?.method;
    this.address = clientAddressOf(
      stream.session?.socket?.remoteAddress,
      headers["x-forwarded-for"],
      served.proxyTrust,
    );
  }

  start(): void {
    this.stream.on("error", ignore);
    this.stream.once("close", () => this.closed());
    const target = this.target;
    if (!target) return this.refuse(new DomainError("NOT_IMPLEMENTED", `No RPC ${printable(this.path, 200)} here`));
    const refusal = this.timeoutRefusal();
    if (refusal) return this.refuse(refusal);
    const encodingRefusal = this.encodingRefusal();
    if (encodingRefusal) return this.refuse(encodingRefusal, { "grpc-accept-encoding": GZIP.name });
    this.stream.on("data", this.onData);
    this.stream.once("end", () => this.onEnd(target));
  }

  /** A bad grpc-timeout is refused as Connect refuses it (its parser); a good one ends the call at its deadline. */
  private timeoutRefusal(): DomainError | undefined {
    const value = single(this.headers["grpc-timeout"]);
    if (value === undefined) return undefined;
    const parts = TIMEOUT.exec(value);
    // Refused in Connect's words, by its parser (which allocates a units table per call: not on the way of a good value).
    if (!parts) return protocolRefusal(parseTimeout(value, NO_MAX_TIMEOUT_MS).error ?? new ConnectError(value));
    const timeoutMs = Number(parts[1]) * TIMEOUT_UNIT_MS[parts[2]!]!;
    this.deadlineAt = this.started + timeoutMs;
    this.deadline = setTimeout(() => this.expire(timeoutMs), Math.ceil(timeoutMs));
    this.deadline.unref();
    return undefined;
  }

  /** gzip or none; any other grpc-encoding is UNIMPLEMENTED naming what is accepted (gRPC's compression.md), in Connect's words. */
  private encodingRefusal(): DomainError | undefined {
    const encoding = single(this.headers["grpc-encoding"]);
    if (encoding === undefined || encoding === "identity" || encoding === GZIP.name) return undefined;
    const { error } = compressionNegotiate([GZIP], encoding, null, "grpc-accept-encoding");
    return error && protocolRefusal(error, true);
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
      this.refuse(connectRefusal(CONNECT_REASONS.extraUnaryMessage, Code.Unimplemented));
  };

  private onEnd(target: ServedMethod): void {
    if (this.answered) return;
    if (this.received === 0)
      return this.refuse(connectRefusal(CONNECT_REASONS.missingUnaryMessage, Code.Unimplemented));
    if (this.declared === undefined || this.received < 5 + this.declared)
      return this.refuse(connectRefusal(CONNECT_REASONS.incompleteEnvelope, Code.InvalidArgument));
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    const data = body.subarray(5);
    if (!this.compressed) return this.decode(target, data);
    // Connect's decompression (never past the limit), and its refusals: no encoding named, bytes that are not gzip.
    const encoding = this.headers["grpc-encoding"] === GZIP.name ? GZIP : null;
    envelopeDecompress({ flags: 1, data }, encoding, this.served.readMaxBytes).then(
      (plain) => this.decode(target, plain.data),
      (e: unknown) => this.refuse(protocolRefusal(ConnectError.from(e))),
    );
  }

  /** The message decoded by Connect's parser (a refusal in its words when it does not decode), then the call. */
  private decode(target: ServedMethod, data: Uint8Array): void {
    if (this.answered) return;
    let input;
    try {
      input = target.parse(data);
    } catch (e) {
      return this.refuse(protocolRefusal(ConnectError.from(e)));
    }
    this.call(target.method, input).catch((e: unknown) => this.fail(e));
  }
  private async call(method: DescMethodUnary, input: unknown): Promise<void> {
    const context = createContextValues().set(requestInfoKey, {
      requestId: this.requestId,
      remoteAddress: this.address,
      protocol: "grpc",
      target: {
        method: "POST",
        url: addressedUrlOf(
          this.headers,
          this.path,
          {
            encrypted: (this.stream.session?.socket as { encrypted?: boolean } | undefined)?.encrypted === true,
            remoteAddress: this.stream.session?.socket?.remoteAddress,
          },
          this.served.proxyTrust,
        ),
      },
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
    const method = this.method;
    const rpc = method ? `${method.parent.typeName}/${method.name}` : printable(this.path, 200);
    const answer = refusedByProtocol(error, this.requestId, method, rpc, {
      protocol: "grpc",
      log: this.served.logger.child({ reqId: this.requestId }),
      note: (refusal) => (this.refusal ??= refusal),
    });
    this.answerError(answer, extra);
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
    this.served.accessLog.completed(
      this.requestId,
      { method: "POST", url: this.path, ip: this.address },
      ANSWERED,
      responseTime,
      this.traceId,
      cancelled ? CANCELLED : this.refusal,
    );
  }
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

/** The same refusal Connect's protocol layer gives for these bytes, from its own reason (protocol-errors.ts words it). */
function connectRefusal(reason: string, code: Code): DomainError {
  return protocolRefusal(new ConnectError(reason, code));
}

function ignore(): void {}
