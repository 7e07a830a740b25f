import crypto from "node:crypto";
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { Code } from "@connectrpc/connect";
import formBody from "@fastify/formbody";
import type { Tracer } from "@opentelemetry/api";
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from "fastify";
import { DomainError, invalidArgument } from "../errors/domain-error.js";
import { registerDialectNotFound } from "../gateway/dialect-not-found.js";
import { errorContentTypeOf, refusalOf, renderError, sendError } from "../gateway/error-reply.js";
import { STATUS_BY_CODE } from "../gateway/http-status.js";
import { traceIdOf } from "../gateway/request-trace.js";
import { AccessLog, CANCELLED, recordRequest, type Outcome } from "./protocol/access-log.js";
import { proxyTrustOf } from "./protocol/client-address.js";
import { restRoutesOf } from "../gateway/http-rules.js";
import { buildOpenApiDocument } from "../gateway/openapi.js";
import { dialectPathSpaces, pathSpaceOf } from "../gateway/path-dialects.js";
import { registerRestRoutes, routeDialectOf } from "../gateway/rest-gateway.js";
import type { Metrics } from "../observability/metrics.js";
import { ErrorDialect } from "../rpc/contract.js";
import { contractServices } from "../rpc/areas.js";
import type { RpcCore } from "../rpc/routes.js";
import { connectRoutes } from "./protocol/connect-handlers.js";
import { createDualProtocolServer, type ParserError } from "./protocol/dual-protocol-server.js";
import { createGrpcUnary } from "./protocol/grpc-unary.js";
import { registerOperationalRoutes, type OperationalDeps } from "./operational-routes.js";
import type { HttpConfig } from "./settings.js";

/**
 * The public HTTP face: the public RPCs in every protocol, the REST gateway derived from the
 * contract, and the operational routes.
 */
export async function createHttpApp(
  settings: HttpConfig,
  rpc: RpcCore,
  operational: Omit<OperationalDeps, "openApi" | "metrics"> & { readonly publicUrl: string },
  observers: { logger: FastifyBaseLogger; metrics: Metrics; tracer?: Tracer | undefined },
): Promise<FastifyInstance> {
  const restRoutes = restRoutesOf(contractServices);
  const pathSpaces = dialectPathSpaces(restRoutes);
  const app = await createRpcApp(settings, rpc, observers, (url) => pathSpaceOf(pathSpaces, url)?.dialect);
  await app.register(async (gateway) => {
    await gateway.register(formBody);
    registerRestRoutes(gateway, restRoutes, rpc.transport, observers.tracer);
    registerDialectNotFound(gateway, pathSpaces);
  });
  registerOperationalRoutes(app, {
    ...operational,
    metrics: observers.metrics,
    openApi: buildOpenApiDocument(restRoutes, { serverUrl: operational.publicUrl }),
  });
  await app.ready();
  return app;
}

/**
 * One port's Fastify: the given routes in every protocol (connect-handlers.ts) on the dual-protocol
 * server. Every failure, Fastify's own included, is an ErrorResponse; in the dialect the path's
 * space speaks (`dialectOfPath`: SCIM under /v2/scim/) when it happens before or outside a route.
 * The public face above and the admin face (admin-app.ts) are both built on it.
 */
export async function createRpcApp(
  settings: HttpConfig,
  rpc: Pick<RpcCore, "routes" | "interceptors" | "transport">,
  observers: { logger: FastifyBaseLogger; metrics: Metrics },
  dialectOfPath: (url: string) => ErrorDialect | undefined = () => undefined,
): Promise<FastifyInstance> {
  const dialectOf = (url: string | undefined) => (url === undefined ? undefined : dialectOfPath(url));
  const requestLines = new OneLinePerRequest(new AccessLog(observers.logger));
  const proxyTrust = proxyTrustOf(settings.trustedProxies);
  const grpcUnary = createGrpcUnary({
    ...observers,
    transport: rpc.transport,
    readMaxBytes: settings.bodyLimitBytes,
    proxyTrust,
    accessLog: requestLines.accessLog,
  });
  const app = Fastify({
    loggerInstance: observers.logger,
    genReqId: () => crypto.randomUUID(),
    requestIdHeader: false,
    logController: requestLines,
    bodyLimit: settings.bodyLimitBytes,
    // X-Forwarded-For is believed only from the configured proxies (the one rule, client-address.ts).
    trustProxy: proxyTrust,
    // Arriving while closing (after a drain took the instance out of its balancer), a request is
    // served with `Connection: close` (Fastify adds it on HTTP/1.1), not refused with 503.
    return503OnClosing: false,
    // Path variables are validated by the contract like every other field, not cut by the router.
    routerOptions: { maxParamLength: settings.maxUrlBytes },
    serverFactory: (handler) =>
      createDualProtocolServer(
        handler,
        settings,
        (reason, address) =>
          observers.logger.warn(
            { remoteAddress: address, reason },
            "HTTP/2 session ended with GOAWAY ENHANCE_YOUR_CALM",
          ),
        grpcUnary.serve,
      ) as never,
    // Fastify's own refusals (a URL that is not validly percent-encoded) answer in our shape too.
    // Fastify answers these before routing, so no hook runs: the request's line is written here.
    frameworkErrors: (error, request, reply) => {
      // The reply is sent by Fastify; a FastifyReply is thenable, but there is nothing for this hook to await.
      void sendError(reply, invalidArgument(`The URL is not valid: ${error.message}`), dialectOf(request.url));
      requestLines.completed(request, reply);
    },
    // The HTTP parser's refusals happen before any request exists: answer on the raw socket.
    clientErrorHandler: (error, socket) => answerParserError(error, socket, observers.logger, dialectOf),
  });

  addRequestHooks(app, settings, observers.metrics, dialectOf, requestLines);
  setErrorAnswers(app, dialectOf);

  // Every RPC path answers with an ErrorResponse, connect's own protocol refusals included (connect-handlers.ts).
  await app.register(connectRoutes, {
    routes: rpc.routes,
    interceptors: rpc.interceptors,
    readMaxBytes: settings.bodyLimitBytes,
    shutdownTimeoutMs: settings.shutdownTimeoutMs,
    served: grpcUnary.route,
  });

  return app;
}

/**
 * An HTTP/1.1 parser error (431, 400, 408), answered on the raw socket as an ErrorResponse in the
 * dialect of the request's path when it is known; any other is a dropped connection.
 */
function answerParserError(
  error: Error,
  socket: Socket,
  logger: FastifyBaseLogger,
  dialectOf: (url: string | undefined) => ErrorDialect | undefined,
): void {
  const refusal = parserRefusal(error as NodeJS.ErrnoException);
  if (!refusal || !socket.writable) {
    socket.destroy();
    return;
  }
  const requestId = crypto.randomUUID();
  logger.info({ reqId: requestId, code: (error as NodeJS.ErrnoException).code }, "request refused by the HTTP parser");
  const dialect = dialectOf((error as unknown as ParserError).requestPath) ?? ErrorDialect.ERROR_DIALECT_UNSPECIFIED;
  const { status, json } = renderError(refusal, requestId, dialect);
  const body = JSON.stringify(json);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}\r\ncontent-type: ${errorContentTypeOf(dialect)}\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n${body}`,
  );
}

/** Every answer names its request id; an over-long URL is refused before routing; every request is measured. */
function addRequestHooks(
  app: FastifyInstance,
  settings: HttpConfig,
  metrics: Metrics,
  dialectOf: (url: string | undefined) => ErrorDialect | undefined,
  requestLines: OneLinePerRequest,
): void {
  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
    requestLines.watchForHangUp(request, reply, metrics);
    if (Buffer.byteLength(request.url) > settings.maxUrlBytes) {
      return sendError(
        reply,
        new DomainError("URI_TOO_LONG", `The request URL is longer than ${settings.maxUrlBytes} bytes`),
        dialectOf(request.url),
      );
    }
  });
  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    recordRequest(metrics, { method: request.method, route, status: reply.statusCode }, reply.elapsedTime);
  });
}

/**
 * An unknown route and every failure, Fastify's own included (413, 415, malformed requests), as
 * an ErrorResponse. Set before any plugin registers: encapsulated children inherit the handlers in
 * force then.
 */
function setErrorAnswers(app: FastifyInstance, dialectOf: (url: string | undefined) => ErrorDialect | undefined): void {
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new DomainError("ROUTE_NOT_FOUND", `No route for ${request.method} ${request.url.split("?")[0]}`)),
  );
  app.setErrorHandler((error, request, reply) => {
    const status = (error as { statusCode?: number }).statusCode ?? 500;
    const dialect = routeDialectOf(request) ?? dialectOf(request.url);
    if (status === 413)
      return sendError(reply, new DomainError("PAYLOAD_TOO_LARGE", "The request body is too large"), dialect);
    if (status === 415)
      return sendError(reply, new DomainError("UNSUPPORTED_MEDIA_TYPE", "Unsupported Content-Type"), dialect);
    if (status >= 400 && status < 500)
      return sendError(reply, invalidArgument(`Malformed request: ${(error as Error).message}`), dialect);
    request.log.error({ err: error }, "request failed");
    return sendError(reply, error, dialect);
  });
}

/**
 * Fastify's request lines, written by the one access-log writer (access-log.ts); arrivals are
 * logged at debug only.
 */
class OneLinePerRequest extends LogController {
  constructor(readonly accessLog: AccessLog) {
    super();
  }

  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, "incoming request");
  }

  /** Requests whose line Fastify had written (requestCompleted), so a hang-up after it writes none. */
  readonly #written = new WeakSet<FastifyRequest>();

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    this.#written.add(request);
    if (error)
      AccessLog.errored(
        reply.log,
        error,
        request,
        reply,
        reply.elapsedTime,
        traceIdOf(request),
        outcomeOf(request, reply),
      );
    else this.completed(request, reply);
  }

  /**
   * A request whose client leaves before its answer is written gets no `finish`, so Fastify writes
   * no line and the onResponse hook counts nothing. Its line is written here, marked cancelled, as
   * the lean gRPC path writes a cancelled call's. The status is 499 (nginx's "client closed
   * request") when no status line was sent, else the one sent.
   */
  watchForHangUp(request: FastifyRequest, reply: FastifyReply, metrics: Metrics): void {
    reply.raw.once("close", () => {
      if (reply.raw.writableEnded || this.#written.has(request)) return;
      const status = reply.raw.headersSent ? reply.statusCode : CLIENT_CLOSED_REQUEST;
      const route = request.routeOptions.url ?? "unmatched";
      recordRequest(metrics, { method: request.method, route, status }, reply.elapsedTime);
      this.accessLog.completed(
        request.id,
        request,
        { statusCode: status },
        reply.elapsedTime,
        traceIdOf(request),
        CANCELLED,
      );
    });
  }

  completed(request: FastifyRequest, reply: FastifyReply): void {
    this.accessLog.completed(
      request.id,
      request,
      reply,
      reply.elapsedTime,
      traceIdOf(request),
      outcomeOf(request, reply),
    );
  }
}

/** A cancelled call's REST status (499, nginx's "client closed request"): the one table's. */
const CLIENT_CLOSED_REQUEST = STATUS_BY_CODE[Code.Canceled];

/** Why the request was refused (an answer of 400 or more). */
function outcomeOf(request: FastifyRequest, reply: FastifyReply): Outcome {
  return reply.statusCode >= 400 ? refusalOf(request) : undefined;
}

/** What a connection-level parser error means for the caller; undefined when there is no one to answer. */
function parserRefusal(error: NodeJS.ErrnoException): DomainError | undefined {
  switch (error.code) {
    case "ECONNRESET":
    case "EPIPE":
      return undefined;
    case "HPE_HEADER_OVERFLOW":
      return new DomainError("REQUEST_HEADERS_TOO_LARGE", "The request line and headers are too large");
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return new DomainError("REQUEST_TIMEOUT", "The request did not arrive in time");
    default:
      return invalidArgument("The request is not valid HTTP");
  }
}
