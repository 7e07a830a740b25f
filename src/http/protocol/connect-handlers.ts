import zlib from "node:zlib";
import {
  Code,
  ConnectError,
  createConnectRouter,
  createContextValues,
  type ConnectRouter,
  type Interceptor,
} from "@connectrpc/connect";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import {
  createAsyncIterable,
  createEndStreamSerialization,
  encodeEnvelope,
  endStreamFlag,
  errorFromJsonBytes,
  errorToJsonBytes,
  findTrailerError,
  setTrailerStatus,
  trailerFlag,
  trailerParse,
  trailerSerialize,
  type UniversalHandler,
  type UniversalServerRequest,
  type UniversalServerResponse,
} from "./connect-internals.js";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { DomainError } from "../../errors/domain-error.js";
import { httpStatusOf } from "../../gateway/http-status.js";
import { printable } from "../../rpc/errors/printable.js";
import { protocolRefusal, unwritableRefusal } from "../../rpc/errors/protocol-errors.js";
import { noteTrace } from "../../gateway/request-trace.js";
import { requestInfoKey } from "../../rpc/request-context.js";
import { noteRefusal } from "../../gateway/error-reply.js";
import { respecGrpcMessage } from "./grpc-message.js";
import { refusedByProtocol } from "./refusal.js";

export interface ConnectRoutesOptions {
  /** Registers the services on the router (RpcCore.routes). */
  readonly routes: (router: ConnectRouter) => void;
  readonly interceptors: Interceptor[];
  /** The largest request message, after decompression. */
  readonly readMaxBytes: number;
  /** After Fastify starts closing, in-flight RPCs get this long before their signal aborts. */
  readonly shutdownTimeoutMs: number;
  /** Told the handlers registered (the lean unary gRPC path takes its method table from them, grpc-unary.ts). */
  readonly served?: (handlers: readonly UniversalHandler[]) => void;
}

/** The type name by which an error detail is recognised on every protocol. */
const ERROR_RESPONSE_TYPE = "travel.common.v1.ErrorResponse";
/** How a Connect unary error body that carries it starts its detail (errorToJson writes `type` first; a message cannot hold unescaped quotes). */
const CONNECT_DETAIL_MARK = Buffer.from(`{"type":"${ERROR_RESPONSE_TYPE}"`);
const endStreamSerialization = createEndStreamSerialization({});

type Protocol = "connect" | "connect-stream" | "grpc" | "grpc-web";

/** The protocol the caller speaks, by its content type; anything unknown is answered as Connect unary. */
function protocolOf(contentType: string | undefined): Protocol {
  if (contentType === undefined) return "connect";
  if (/^application\/grpc-web/i.test(contentType)) return "grpc-web";
  if (/^application\/grpc/i.test(contentType)) return "grpc";
  if (/^application\/connect\+/i.test(contentType)) return "connect-stream";
  return "connect";
}

/**
 * Every RPC on every protocol (Connect, gRPC, gRPC-Web), registered as Fastify routes in a
 * context of their own (its content-type parsers leave every body to Connect).
 *
 * Connect's protocol layer refuses some requests before the interceptor chain runs, so before
 * errorInterceptor can attach the ErrorResponse: a message that does not decode, a body that does
 * not decompress, an unknown content encoding, a bad timeout header, a message over readMaxBytes,
 * an unsupported content type (a bare 415) or HTTP method (a bare 405). Such an answer — an error
 * without the ErrorResponse detail — is rewritten here in the caller's protocol, with the
 * catalogue error of protocolRefusal and the request id as debugIdentifier, and logged at info
 * with that id. Answers that carry the detail (every error of the interceptor chain) and
 * successes pass untouched; the checks on them are a status, a trailer or a flag byte.
 */
const ACCEPTED_COMPRESSION = [compressionGzip, compressionBrotli];

export const connectRoutes: FastifyPluginAsync<ConnectRoutesOptions> = async (scope, options) => {
  const shutdown = new AbortController();
  scope.addHook("preClose", (done) => {
    setTimeout(() => shutdown.abort(), options.shutdownTimeoutMs).unref();
    done();
  });
  const router = createConnectRouter({
    interceptors: options.interceptors,
    readMaxBytes: options.readMaxBytes,
    shutdownSignal: shutdown.signal,
    acceptCompression: ACCEPTED_COMPRESSION,
    // Connect's default ignores unknown JSON fields and enum values, so {"role":"NOPE"} would
    // silently become the zero value (TMC_ADMIN). Decoded as strictly as the REST face: refused.
    jsonOptions: { ignoreUnknownFields: false },
  });
  options.routes(router);
  options.served?.(router.handlers);

  // Connect reads every body itself, whatever its content type (a wrong one is its 415 to answer).
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser("*", (_request, _payload, done) => done(null, undefined));
  for (const handler of router.handlers) {
    scope.all(handler.requestPath, (request, reply) => serve(handler, request, reply));
  }
};

async function serve(handler: UniversalHandler, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const protocol = protocolOf(request.headers["content-type"]);
  let response: UniversalServerResponse;
  let uRequest: UniversalServerRequest | undefined;
  try {
    if (request.raw.httpVersionMajor === 1) keepBodyReadableAfterEarlyAnswer(request.raw);
    uRequest = universalRequestFromNodeRequest(
      request.raw,
      reply.raw,
      undefined,
      createContextValues().set(requestInfoKey, {
        requestId: request.id,
        remoteAddress: request.ip,
        protocol: protocol === "connect-stream" ? "connect" : protocol,
        // Fastify's protocol and host apply TRUSTED_PROXIES to X-Forwarded-Proto and -Host (client-address.ts).
        target: { method: request.method, url: `${request.protocol}://${request.host}${request.url}` },
        refused: (refusal) => noteRefusal(request, refusal),
        traced: (traceId) => noteTrace(request, traceId),
      }),
    );
    response = await handler(uRequest);
    response = await withErrorResponse(response, protocol, handler, request);
  } catch (thrown) {
    // The caller went away: nobody to answer.
    if (uRequest?.signal.aborted || ConnectError.from(thrown).code === Code.Aborted) return;
    // A URIError: connect's gRPC trailer writer met an error message that is not well-formed
    // Unicode. The interceptor chain's messages always are (toConnectError), so it quoted the
    // request's own bytes: a message that does not decode.
    const error =
      thrown instanceof URIError
        ? unwritableRefusal(thrown)
        : protocolRefusal(ConnectError.from(thrown), isGrpc(protocol));
    response = errorAnswer(protocol, error, handler, request, new Headers());
  }
  if (protocol === "grpc" || protocol === "grpc-web") response = withSpecGrpcMessage(response);
  // An early answer over HTTP/1.1 leaves the rest of the body on the wire; a client reusing the
  // connection would have its next request read as that body. Close it instead.
  if (request.raw.httpVersionMajor === 1 && request.raw.complete === false) {
    response = { ...response, header: new Headers(response.header) };
    response.header!.set("connection", "close");
  }
  // Fastify keeps its headers (x-request-id) on the reply until send(), which is not used here.
  for (const [key, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) reply.raw.setHeader(key, value);
  }
  // universalResponseToNodeResponse waits for an "end" event that Node's responses never emit: the answer is out at "finish".
  await new Promise<void>((resolve) => {
    reply.raw.once("finish", resolve);
    reply.raw.once("close", resolve);
    universalResponseToNodeResponse(response, reply.raw).then(resolve, (e: unknown) => {
      if (!uRequest?.signal.aborted && ConnectError.from(e).code !== Code.Aborted)
        request.log.warn({ err: e }, "writing the rpc answer failed");
      resolve();
    });
  });
}

/**
 * Connect stops reading a message over readMaxBytes by leaving its `for await` loop over the
 * request, which destroys a Node stream by default; over HTTP/1.1 the rest of the body then stays
 * on the wire unread, and the connection can only be reset. Left undestroyed, it is read and
 * discarded before the connection closes (dual-protocol-server.ts, closeOnceRequestHasArrived).
 * Over HTTP/2 the destroy is right and stays: it resets that one stream, and a stream left open
 * would keep its unread data in the session's memory until Node refused every new stream
 * (ENHANCE_YOUR_CALM, seen under load in the RPC fuzzer).
 */
function keepBodyReadableAfterEarlyAnswer(raw: FastifyRequest["raw"]): void {
  (raw as { [Symbol.asyncIterator]: () => AsyncIterator<unknown> })[Symbol.asyncIterator] = () =>
    raw.iterator({ destroyOnReturn: false });
}

/** The answer as it is when it is a success or carries the ErrorResponse detail; else the same error in our shape. */
async function withErrorResponse(
  response: UniversalServerResponse,
  protocol: Protocol,
  handler: UniversalHandler,
  request: FastifyRequest,
): Promise<UniversalServerResponse> {
  const header = response.header ?? new Headers();
  if (response.status !== 200) {
    // A status of its own is Connect unary's error answer, or a refusal before any protocol was chosen (415, 405, 505): no body.
    if (
      protocol === "connect" &&
      response.body !== undefined &&
      header.get("content-type")?.startsWith("application/json")
    ) {
      const bytes = await readAll(response.body);
      const plain = decompressed(bytes, header.get("content-encoding"));
      if (plain?.includes(CONNECT_DETAIL_MARK)) return { ...response, body: createAsyncIterable([bytes]) };
      const original = plain
        ? errorFromJsonBytes(plain, undefined, new ConnectError(`HTTP ${response.status}`, Code.Unknown))
        : new ConnectError(`HTTP ${response.status}`, Code.Unknown);
      // Connect 2.2 no longer copies its negotiation header onto this refusal; the client needs it to choose again.
      if (/unknown compression/.test(original.rawMessage) && !header.has("accept-encoding")) {
        header.set("accept-encoding", ACCEPTED_COMPRESSION.map((c) => c.name).join(","));
      }
      return errorAnswer(protocol, protocolRefusal(original, isGrpc(protocol)), handler, request, header);
    }
    return errorAnswer(protocol, refusalByStatus(response.status, request), handler, request, header);
  }
  switch (protocol) {
    case "grpc": {
      const trailer = response.trailer;
      // A unary error is in the trailer by now; a success leaves its "0" there.
      if (trailer && trailer.get("grpc-status") !== "0" && !carriesDetail(trailer)) {
        const original = findTrailerError(trailer);
        if (original)
          return errorAnswer(protocol, protocolRefusal(original, isGrpc(protocol)), handler, request, header, trailer);
      }
      return response;
    }
    case "grpc-web":
    case "connect-stream": {
      // Their status is in the body's last envelope; an error before any message makes it the first.
      if (response.body === undefined) return response;
      const it = response.body[Symbol.asyncIterator]();
      const first = await it.next();
      if (first.done) return { ...response, body: createAsyncIterable([]) };
      const original =
        protocol === "grpc-web" ? grpcWebTrailerError(first.value, header) : connectEndStreamError(first.value, header);
      if (original) {
        void it.return?.().catch(() => undefined);
        return errorAnswer(protocol, protocolRefusal(original, isGrpc(protocol)), handler, request, header);
      }
      return {
        ...response,
        body: prepended(protocol === "grpc-web" ? withSpecGrpcWebTrailer(first.value) : first.value, it),
      };
    }
    default:
      return response;
  }
}

/** gRPC and gRPC-Web, whose error codes follow gRPC's spec (an unknown encoding is UNIMPLEMENTED). */
function isGrpc(protocol: Protocol): boolean {
  return protocol === "grpc" || protocol === "grpc-web";
}

/** Connect's bare refusals before it chose a protocol. */
function refusalByStatus(status: number, request: FastifyRequest): DomainError {
  switch (status) {
    case 415:
      return new DomainError(
        "UNSUPPORTED_MEDIA_TYPE",
        `Unsupported Content-Type for an RPC: ${printable(request.headers["content-type"] ?? "(none)", 100)}`,
      );
    case 405:
      return new DomainError(
        "ROUTE_NOT_FOUND",
        `No route for ${request.method} ${request.url.split("?")[0]}: RPCs take POST`,
      );
    case 505:
      return new DomainError("API_VALIDATION_FAILED", "This RPC streams in both directions and needs HTTP/2");
    default:
      return new DomainError("INTERNAL_ERROR", "An internal error occurred", {
        cause: new Error(`connect answered HTTP ${status} without a body`),
      });
  }
}

/**
 * The catalogue error, with its ErrorResponse, as an answer in the caller's protocol: Connect's
 * JSON error body and status, gRPC's trailers (keeping the other trailers it had), gRPC-Web's
 * trailers-only headers, Connect streaming's end-stream envelope. Logged at info with the request
 * id (at error when it is INTERNAL_ERROR).
 */
function errorAnswer(
  protocol: Protocol,
  error: DomainError,
  handler: UniversalHandler,
  request: FastifyRequest,
  original: Headers,
  trailer?: Headers,
): UniversalServerResponse {
  const connectError = refusedByProtocol(
    error,
    request.id,
    handler.method,
    `${handler.service.typeName}/${handler.method.name}`,
    { protocol, log: request.log, note: (refusal) => noteRefusal(request, refusal) },
  );
  // Headers the protocol layer chose stay (accept-encoding lists, connection: close); the body's framing does not.
  const header = new Headers(original);
  for (const name of FRAMING_HEADERS) header.delete(name);
  const asJson = /\+json/i.test(request.headers["content-type"] ?? "");
  switch (protocol) {
    case "connect": {
      const body = errorToJsonBytes(connectError, {});
      header.set("content-type", "application/json");
      header.set("content-length", String(body.byteLength));
      return {
        status: httpStatusOf(connectError.code, error.code),
        header,
        body: createAsyncIterable([body]),
      };
    }
    case "connect-stream": {
      header.set("content-type", asJson ? "application/connect+json" : "application/connect+proto");
      const end = endStreamSerialization.serialize({ metadata: new Headers(), error: connectError });
      return { status: 200, header, body: createAsyncIterable([encodeEnvelope(endStreamFlag, end)]) };
    }
    case "grpc": {
      const trailers = trailer ?? new Headers();
      for (const name of ["grpc-message", "grpc-status-details-bin"]) trailers.delete(name);
      setTrailerStatus(trailers, connectError);
      header.set("content-type", asJson ? "application/grpc+json" : "application/grpc+proto");
      return { status: 200, header, body: createAsyncIterable([]), trailer: trailers };
    }
    case "grpc-web": {
      // Trailers-only: the status in the headers and no body, which every gRPC-Web client reads (the -text variant too).
      setTrailerStatus(header, connectError);
      header.set("content-type", asJson ? "application/grpc-web+json" : "application/grpc-web+proto");
      return { status: 200, header, body: createAsyncIterable([]) };
    }
  }
}

/** The headers of the answer the error replaces that describe its body or its status. */
const FRAMING_HEADERS = [
  "content-length",
  "content-encoding",
  "grpc-encoding",
  "connect-content-encoding",
  "grpc-status",
  "grpc-message",
  "grpc-status-details-bin",
];

/**
 * The answer with grpc-message in the gRPC spec's percent-encoding (grpc-message.ts): in the
 * headers (trailers-only), and in the trailers once the body has ended (a stream fills them last).
 */
function withSpecGrpcMessage(response: UniversalServerResponse): UniversalServerResponse {
  respecGrpcMessage(response.header);
  const trailer = response.trailer;
  if (!trailer) return response;
  respecGrpcMessage(trailer);
  const body = response.body;
  if (body === undefined || body instanceof Uint8Array) return response;
  async function* thenRespec() {
    try {
      yield* body as AsyncIterable<Uint8Array>;
    } finally {
      respecGrpcMessage(trailer);
    }
  }
  return { ...response, body: thenRespec() };
}

/** A gRPC-Web trailer envelope (uncompressed, as Connect writes it) with grpc-message re-encoded; any other envelope as it is. */
function withSpecGrpcWebTrailer(envelope: Uint8Array): Uint8Array {
  if (envelope.byteLength < 5 || envelope[0] !== trailerFlag) return envelope;
  const trailer = trailerParse(envelope.subarray(5));
  if (!trailer.has("grpc-message")) return envelope;
  respecGrpcMessage(trailer);
  return encodeEnvelope(trailerFlag, trailerSerialize(trailer));
}

function carriesDetail(trailer: Headers): boolean {
  return trailer.has("grpc-status-details-bin");
}

/** The error of a gRPC-Web trailer envelope without a detail; undefined for a message, a success or a detailed error. */
function grpcWebTrailerError(envelope: Uint8Array, header: Headers): ConnectError | undefined {
  if (envelope.byteLength < 5 || (envelope[0]! & trailerFlag) !== trailerFlag) return undefined;
  const data = envelopeData(envelope, header.get("grpc-encoding"));
  if (!data) return undefined;
  const trailer = trailerParse(data);
  return carriesDetail(trailer) ? undefined : findTrailerError(trailer);
}

/** The error of a Connect end-stream envelope without an ErrorResponse detail. */
function connectEndStreamError(envelope: Uint8Array, header: Headers): ConnectError | undefined {
  if (envelope.byteLength < 5 || (envelope[0]! & endStreamFlag) !== endStreamFlag) return undefined;
  const data = envelopeData(envelope, header.get("connect-content-encoding"));
  if (!data) return undefined;
  try {
    const { error } = endStreamSerialization.parse(data);
    return error && !error.details.some((d) => ("desc" in d ? d.desc.typeName : d.type) === ERROR_RESPONSE_TYPE)
      ? error
      : undefined;
  } catch {
    return undefined;
  }
}

/** An envelope's payload, decompressed when its flag says so; undefined when it cannot be read. */
function envelopeData(envelope: Uint8Array, encoding: string | null): Uint8Array | undefined {
  const data = Buffer.from(envelope.buffer, envelope.byteOffset + 5, envelope.byteLength - 5);
  return (envelope[0]! & 0b1) === 0 ? data : decompressed(data, encoding);
}

/** Bytes in a response's content encoding, decoded (error answers only, so synchronously). */
function decompressed(bytes: Uint8Array, encoding: string | null): Buffer | undefined {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  try {
    if (!encoding || encoding === "identity") return buffer;
    if (encoding === "gzip") return zlib.gunzipSync(buffer);
    if (encoding === "br") return zlib.brotliDecompressSync(buffer);
  } catch {
    return undefined;
  }
  return undefined;
}

async function readAll(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/** The body again with its first chunk, handing return() and throw() on to connect's iterator (they end its pipeline). */
function prepended(first: Uint8Array, rest: AsyncIterator<Uint8Array>): AsyncIterable<Uint8Array> {
  let pending: Uint8Array | undefined = first;
  const iterator: AsyncIterator<Uint8Array> = {
    next() {
      if (pending === undefined) return rest.next();
      const value = pending;
      pending = undefined;
      return Promise.resolve({ done: false, value });
    },
    return: (value?: unknown) => rest.return?.(value) ?? Promise.resolve({ done: true, value: undefined }),
    // An iterator's throw() passes on whatever it is given, Error or not.
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
    throw: (e?: unknown) => rest.throw?.(e) ?? Promise.reject(e),
  };
  return { [Symbol.asyncIterator]: () => iterator };
}
