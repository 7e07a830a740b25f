import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import {
  enforceHttp2Limits,
  http2ServerOptions,
  droppedAsReset,
  type Http2Limits,
  type SessionRefusal,
} from "./http2-stream-budget.js";

/** The connection preface every HTTP/2 client sends first (RFC 9113 3.4). */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
/** An empty SETTINGS frame, then GOAWAY (last stream 0, ENHANCE_YOUR_CALM), for a connection refused before its session. */
const GOAWAY_ENHANCE_YOUR_CALM = Buffer.from([
  ...[0, 0, 0, 0x4, 0, 0, 0, 0, 0],
  ...[0, 0, 8, 0x7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, http2.constants.NGHTTP2_ENHANCE_YOUR_CALM],
]);

export interface DualProtocolOptions extends Http2Limits {
  readonly keepAliveTimeoutMs: number;
  /** Longest time an HTTP/1.1 request may take to arrive in full. */
  readonly requestTimeoutMs: number;
  readonly headersTimeoutMs: number;
  /** Idle HTTP/2 sessions are closed after this long. */
  readonly h2IdleTimeoutMs: number;
  /**
   * How long SIGTERM waits for in-flight requests: close() lets HTTP/2 sessions finish their
   * streams this long before destroying them.
   */
  readonly shutdownTimeoutMs: number;
}

/**
 * A parser error (431, 400, 408) of an HTTP/1.1 request, with the path of the request it belongs
 * to when that can be known, so the refusal can speak the path's error dialect (SCIM): the path at
 * the start of the bytes the parser failed on, or else of the connection's first bytes while the
 * connection has served no request. A request whose headers arrived in several reads on a reused
 * connection has none.
 */
export interface ParserError extends NodeJS.ErrnoException {
  requestPath?: string;
}

/** Fastify's request handler; it serves both protocols' compatibility APIs. */
type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/**
 * Serves an HTTP/2 stream before the compatibility API sees it (unary gRPC, grpc-unary.ts), after
 * the same gates (rapid reset, the request timeout); false leaves the stream to Fastify.
 */
export type StreamServer = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => boolean;

/**
 * One port for REST (HTTP/1.1) and gRPC (HTTP/2 cleartext, prior knowledge). Fastify with
 * http2 alone serves only h2c, and Node's allowHTTP1 needs TLS, so each new connection is
 * sniffed: the HTTP/2 preface goes to an http2 server, anything else to an http server, both
 * running Fastify's handler. Fastify does not apply its timeouts with a serverFactory, so
 * they are set on both inner servers here.
 */
export function createDualProtocolServer(
  handler: Handler,
  options: DualProtocolOptions,
  onSessionRefused: (reason: SessionRefusal, address: string) => void = () => undefined,
  serveStream: StreamServer = () => false,
): net.Server {
  const http1 = createHttp1Server(handler, options);
  const h2 = createHttp2Server(handler, options, onSessionRefused, serveStream);
  // Each HTTP/1.1 connection's first request path, until a request has arrived on it.
  const firstRequestPaths = new WeakMap<net.Socket, string>();
  // Each HTTP/1.1 connection's latest request, whose body may still be arriving when its answer is sent.
  const latestRequests = new WeakMap<net.Socket, http.IncomingMessage>();
  http1.on("request", (request: http.IncomingMessage) => {
    firstRequestPaths.delete(request.socket);
    latestRequests.set(request.socket, request);
  });
  const closeConnectionsAfterAnswers = connectionCloseOnceClosing(http1);
  const server = net.createServer((socket) =>
    handOver(socket, options.headersTimeoutMs, (received, looksLikeH2) => {
      const refusal = looksLikeH2 ? h2.refusalOf(socket.remoteAddress ?? "unknown") : undefined;
      if (refusal) {
        onSessionRefused(refusal, socket.remoteAddress ?? "unknown");
        refuseSession(socket);
      } else if (looksLikeH2) {
        // The HTTP/2 session reads the buffered preface itself and then consumes the socket's
        // handle directly; resuming the JS stream here would race it for the same bytes.
        h2.server.emit("connection", socket);
      } else {
        const path = requestPathOf(received);
        if (path !== undefined) firstRequestPaths.set(socket, path);
        closeOnceRequestHasArrived(socket, () => latestRequests.get(socket), options.requestTimeoutMs);
        http1.emit("connection", socket);
        socket.resume();
      }
    }),
  );
  // The inner HTTP/1.1 server never listens itself; forwarding "listening" turns on its
  // idle-connection tracking, which close() relies on. Its parser errors (431, 408, malformed
  // requests) go to the outer server, where Fastify's clientErrorHandler listens.
  server.on("listening", () => http1.emit("listening"));
  http1.on("clientError", (error: ParserError, socket: net.Socket) => {
    // Node's parser errors carry the bytes they failed on as rawPacket.
    const rawPacket = (error as { rawPacket?: unknown }).rawPacket;
    error.requestPath =
      requestPathOf(Buffer.isBuffer(rawPacket) ? rawPacket : undefined) ?? firstRequestPaths.get(socket);
    server.emit("clientError", error, socket);
  });
  const closeOuter = server.close.bind(server);
  server.close = (callback?: (err?: Error) => void) => {
    closeConnectionsAfterAnswers();
    closeOuter(callback);
    http1.close();
    http1.closeIdleConnections();
    h2.closeSessions();
    return server;
  };
  return server;
}

/**
 * Returns what to call when the server starts closing: from then on every HTTP/1.1 answer not yet
 * begun, in flight or still to come on a kept-alive connection, says `Connection: close`, and its
 * connection closes after it. The client (a balancer reusing connections) is told so in the answer
 * instead of finding the connection gone when it sends its next request.
 */
function connectionCloseOnceClosing(http1: http.Server): () => void {
  const unanswered = new Set<http.ServerResponse>();
  let closing = false;
  http1.on("request", (_request: http.IncomingMessage, response: http.ServerResponse) => {
    if (closing) response.setHeader("connection", "close");
    unanswered.add(response);
    response.once("finish", () => unanswered.delete(response));
    response.once("close", () => unanswered.delete(response));
  });
  return () => {
    closing = true;
    for (const response of unanswered) if (!response.headersSent) response.setHeader("connection", "close");
  };
}

function createHttp1Server(handler: Handler, options: DualProtocolOptions): http.Server {
  const http1 = http.createServer(handler as http.RequestListener);
  http1.keepAliveTimeout = options.keepAliveTimeoutMs;
  http1.requestTimeout = options.requestTimeoutMs;
  http1.headersTimeout = options.headersTimeoutMs;
  return http1;
}

/**
 * A request answered before its body has arrived (one over BODY_LIMIT_BYTES is refused on its
 * Content-Length) gets `connection: close`, and Node then ends and destroys the socket at once,
 * while the client is still sending: the kernel resets the connection, and the client's writes
 * fail with EPIPE, often before it has read the answer (connect-node's clients reported
 * `Internal write EPIPE` instead of the refusal). RFC 9112 §9.6 asks for a staged disconnect; like
 * nginx, which discards the rest of a refused body before closing, the socket closes once the
 * request has arrived in full (read here and discarded), or when the time any request has to
 * arrive in full (HTTP_REQUEST_TIMEOUT_MS) is over, so a refusal holds a connection no longer than
 * a slow request could.
 */
function closeOnceRequestHasArrived(
  socket: net.Socket,
  latestRequest: () => http.IncomingMessage | undefined,
  requestTimeoutMs: number,
): void {
  const closeNow = socket.destroySoon.bind(socket);
  socket.destroySoon = () => {
    const request = latestRequest();
    if (!request || request.complete || request.destroyed || socket.destroyed) return closeNow();
    request.resume();
    const timer = setTimeout(() => socket.destroy(), requestTimeoutMs).unref();
    socket.once("close", () => clearTimeout(timer));
    request.once("end", () => {
      clearTimeout(timer);
      closeNow();
    });
  };
}

/** The HTTP/2 side: its server, who is refused a new session, and the close of its open sessions. */
interface Http2Side {
  readonly server: http2.Http2Server;
  readonly refusalOf: (address: string) => SessionRefusal | undefined;
  /** Closes every open session, destroying it after shutdownTimeoutMs. */
  readonly closeSessions: () => void;
}

function createHttp2Server(
  handler: Handler,
  options: DualProtocolOptions,
  onSessionRefused: (reason: SessionRefusal, address: string) => void,
  serveStream: StreamServer,
): Http2Side {
  const h2 = http2.createServer(
    http2ServerOptions(options),
    handler as unknown as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
  );
  const closedByServer = new WeakSet<http2.ServerHttp2Stream | http2.ServerHttp2Session>();
  const refusalOf = enforceHttp2Limits(h2, options, closedByServer, onSessionRefused);
  h2.setTimeout(options.h2IdleTimeoutMs);
  dispatchOpenStreamsOnly(h2, refusalOf, closedByServer, options.requestTimeoutMs, serveStream);
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  const closeSessions = () => {
    for (const session of sessions) {
      closedByServer.add(session);
      session.close();
      // A stream a client can never finish (an early answer to an oversized message) must not hold shutdown for ever.
      setTimeout(() => session.destroy(), options.shutdownTimeoutMs).unref();
    }
  };
  return { server: h2, refusalOf, closeSessions };
}

/**
 * An answer sent before its request has arrived in full (a message over BODY_LIMIT_BYTES, a call
 * refused before its body is read) leaves the rest of the body unread. Unread, it fills the
 * stream's flow-control window, so the client can never send its END_STREAM, and the stream stays
 * half-closed until the request timer cancels it; one whose END_STREAM did arrive is not destroyed
 * either, since Node waits for its paused readable side to end. Either way it still counts against
 * the session's SETTINGS_MAX_CONCURRENT_STREAMS, and once that many have gathered Node refuses
 * every new stream of the session with ENHANCE_YOUR_CALM (grpc-js: RESOURCE_EXHAUSTED "Bandwidth
 * exhausted or memory limit exceeded"), which is fatal for a long-lived gRPC channel. So once the
 * answer is out, the rest of the body is read and dropped, as HTTP/1.1's staged disconnect does,
 * and the request timer still bounds a client that never finishes.
 */
function discardUnreadBody(stream: http2.ServerHttp2Stream): void {
  if (stream.readableEnded || stream.destroyed) return;
  const drop = () => {
    while (stream.read() !== null);
  };
  stream.on("readable", drop);
  drop();
}

/**
 * Node's compatibility layer listens for "stream" and builds a request and a response for every
 * stream, even one its client has reset already. Under rapid reset those objects (and their
 * garbage) were most of the server's time, so the layer is called only for streams still open
 * (http2-stream-budget.ts). `serveStream` is offered each stream first.
 */
function dispatchOpenStreamsOnly(
  h2: http2.Http2Server,
  refusalOf: (address: string) => SessionRefusal | undefined,
  closedByServer: WeakSet<http2.ServerHttp2Stream | http2.ServerHttp2Session>,
  requestTimeoutMs: number,
  serveStream: StreamServer,
): void {
  const [serveCompat, ...others] = h2.listeners("stream") as Array<
    (stream: http2.ServerHttp2Stream, ...rest: unknown[]) => void
  >;
  if (!serveCompat || others.length > 0)
    throw new Error(
      "node:http2 no longer dispatches through one 'stream' listener: the rapid-reset gate needs revisiting",
    );
  h2.removeAllListeners("stream");
  h2.on("stream", (stream: http2.ServerHttp2Stream, ...rest: unknown[]) => {
    // Dispatched on the next turn of the event loop, not inside the read that opened the stream:
    // an attacker's HEADERS and RST_STREAM arrive in the same read, and a route that answers
    // without waiting (the shared /readyz) would otherwise run to its end before the reset is
    // even parsed (measured on Node 24: every reset stream did its work). By then the reset has
    // been read, so the stream is dropped and spends the client's budget; and once that budget
    // is spent, the address's streams still waiting are refused instead of served.
    stream.on("error", ignoreEarlyError);
    setImmediate(() => {
      stream.off("error", ignoreEarlyError);
      if (droppedAsReset(stream)) return;
      if (refusalOf(stream.session?.socket?.remoteAddress ?? "unknown") === "reset budget spent") {
        stream.on("error", ignoreEarlyError);
        closedByServer.add(stream);
        stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
        return;
      }
      dispatchHearingEarlyEnd(stream, () => {
        // Like HTTP/1.1's requestTimeout: a stream whose request has not arrived in full by then is
        // cancelled, so streams trickling a byte at a time cannot stay open indefinitely.
        const timer = setTimeout(() => {
          closedByServer.add(stream);
          stream.close(http2.constants.NGHTTP2_CANCEL);
        }, requestTimeoutMs);
        timer.unref();
        const done = () => clearTimeout(timer);
        stream.once("end", done);
        stream.once("close", done);
        stream.once("finish", () => discardUnreadBody(stream));
        if (serveStream(stream, rest[0] as http2.IncomingHttpHeaders)) return;
        serveCompat.call(h2, stream, ...rest);
      });
    });
  });
}

/**
 * Runs `dispatch`, then gives the stream's 'end' to the listeners it added when the stream had
 * ended already. Node emits a stream's 'end' as soon as it reads END_STREAM with no body buffered:
 * an empty body closed by an empty DATA frame (what Node's own `stream.end(Buffer.alloc(0))` sends,
 * and many proxies) ends the stream inside the read that carried it, before the dispatch on the
 * next turn attaches the body's readers (the compatibility layer, the lean gRPC path, the request
 * timer). They would wait for an 'end' gone by, and the call hang until the request timer.
 */
function dispatchHearingEarlyEnd(stream: http2.ServerHttp2Stream, dispatch: () => void): void {
  if (!stream.readableEnded) return dispatch();
  const heard = new Set(stream.rawListeners("end"));
  dispatch();
  for (const listener of stream.rawListeners("end"))
    if (!heard.has(listener)) (listener as (this: http2.ServerHttp2Stream) => void).call(stream);
}

/**
 * Reads a new connection's first bytes until they tell its protocol, then hands it over paused,
 * with those bytes put back: `route` decides where it goes. A connection that never says which
 * protocol it speaks is closed after `silentMs`; after hand-off the inner servers' timeouts apply.
 */
function handOver(socket: net.Socket, silentMs: number, route: (received: Buffer, looksLikeH2: boolean) => void): void {
  let received: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
    const compared = Math.min(received.length, H2_PREFACE.length);
    const looksLikeH2 = received.subarray(0, compared).equals(H2_PREFACE.subarray(0, compared));
    // Wait for the whole preface before deciding: a lone "P" may still be "POST".
    if (looksLikeH2 && received.length < H2_PREFACE.length) return;
    socket.off("data", onData);
    socket.off("error", onEarlyError);
    socket.off("timeout", onSilent);
    socket.setTimeout(0);
    socket.pause();
    socket.unshift(received);
    route(received, looksLikeH2);
  };
  const onEarlyError = () => socket.destroy();
  const onSilent = () => socket.destroy();
  socket.on("data", onData);
  socket.on("error", onEarlyError);
  socket.setTimeout(silentMs, onSilent);
}

/** The server's preface (an empty SETTINGS) and GOAWAY ENHANCE_YOUR_CALM, then close. */
function refuseSession(socket: net.Socket): void {
  socket.on("error", () => socket.destroy());
  socket.end(GOAWAY_ENHANCE_YOUR_CALM);
  setTimeout(() => socket.destroy(), 1_000).unref();
}

/** A stream's reset, emitted as an 'error' before its dispatch, concerns nobody but the budget. */
function ignoreEarlyError(): void {}

/** The path of an HTTP/1.1 request line at the start of `bytes` (only its start is needed: it picks a dialect). */
function requestPathOf(bytes: Buffer | undefined): string | undefined {
  if (!bytes) return undefined;
  return /^[A-Z]{1,20} (\/[^\s?#]*)/.exec(bytes.subarray(0, 512).toString("latin1"))?.[1];
}
