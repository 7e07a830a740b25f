// gRPC by hand over one HTTP/2 stream: for what a gRPC library will not send (a message that
// never ends, a grpc-timeout chosen freely, a compressed frame built here) and for reading the
// answer exactly as it came (HTTP status, headers, trailers, frames).
import http2 from "node:http2";
import zlib from "node:zlib";
import type { ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";
import { decodeRpcStatus, errorResponseIn } from "./grpc-status.js";

/** A gRPC length-prefixed message: flags (1 = compressed), length, data. */
export function grpcFrame(data: Uint8Array, flags = 0, declaredLength = data.byteLength): Buffer {
  const header = Buffer.alloc(5);
  header[0] = flags;
  header.writeUInt32BE(declaredLength, 1);
  return Buffer.concat([header, data]);
}

/** The messages of a gRPC body, decompressed as `encoding` says when their flag is set. */
export function grpcMessages(body: Buffer, encoding: string | undefined): Buffer[] {
  const messages: Buffer[] = [];
  for (let at = 0; at + 5 <= body.length;) {
    const length = body.readUInt32BE(at + 1);
    const data = body.subarray(at + 5, at + 5 + length);
    messages.push(body[at]! & 1 ? (encoding === "gzip" ? zlib.gunzipSync(data) : data) : data);
    at += 5 + length;
  }
  return messages;
}

export interface H2GrpcAnswer {
  /** The HTTP status; undefined when the stream ended without an answer (reset, or timed out here). */
  readonly status?: number;
  readonly headers: Record<string, string>;
  readonly trailers: Record<string, string>;
  readonly body: Buffer;
  /** grpc-status from the trailers, or from the headers of a trailers-only answer. */
  readonly grpcStatus?: number;
  readonly grpcMessage?: string;
  readonly errorResponse?: ErrorResponse;
  /** The RST_STREAM code the stream closed with (0: none). */
  readonly rstCode: number;
  /** Whether this side gave up waiting (opts.timeoutMs) and cancelled the stream. */
  readonly gaveUp: boolean;
  /** Milliseconds from the request to the end of the stream. */
  readonly elapsedMs: number;
}

export interface H2GrpcOptions {
  /** Half-close after the body (default); false leaves the request open, as a slow or stalled client would. */
  readonly end?: boolean;
  /** Cancel the stream (RST_STREAM CANCEL) after this long without the end of the answer. */
  readonly timeoutMs?: number;
}

/** One gRPC request on `session`; resolves when the stream closes, never rejects. */
export function h2GrpcCall(
  session: http2.ClientHttp2Session,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
  options: H2GrpcOptions = {},
): Promise<H2GrpcAnswer> {
  const started = performance.now();
  return new Promise((resolve) => {
    const stream = session.request({
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
      ...headers,
    });
    const flat = (h: http2.IncomingHttpHeaders) =>
      Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Array.isArray(v) ? v.join(",") : String(v)]));
    let status: number | undefined;
    let responseHeaders: Record<string, string> = {};
    let trailers: Record<string, string> = {};
    let gaveUp = false;
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      responseHeaders = flat(h);
    });
    stream.on("trailers", (h) => (trailers = flat(h)));
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", () => undefined);
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            gaveUp = true;
            stream.close(http2.constants.NGHTTP2_CANCEL);
          }, options.timeoutMs);
    stream.on("close", () => {
      clearTimeout(timer);
      const t = trailers["grpc-status"] !== undefined ? trailers : responseHeaders;
      const details = t["grpc-status-details-bin"];
      let errorResponse: ErrorResponse | undefined;
      try {
        errorResponse = details ? errorResponseIn(decodeRpcStatus(Buffer.from(details, "base64")).details) : undefined;
      } catch {
        errorResponse = undefined;
      }
      resolve({
        status,
        headers: responseHeaders,
        trailers,
        body: Buffer.concat(chunks),
        grpcStatus: t["grpc-status"] === undefined ? undefined : Number(t["grpc-status"]),
        grpcMessage: t["grpc-message"],
        errorResponse,
        rstCode: stream.rstCode ?? 0,
        gaveUp,
        elapsedMs: performance.now() - started,
      });
    });
    if (options.end === false) stream.write(body);
    else stream.end(body);
  });
}
