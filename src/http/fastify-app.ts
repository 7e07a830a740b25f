import crypto from "node:crypto";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { createContextValues } from "@connectrpc/connect";
import formBody from "@fastify/formbody";
import Fastify, { type FastifyInstance } from "fastify";
import type { FastifyBaseLogger } from "fastify";
import { DomainError, invalidArgument } from "../errors/domain-error.js";
import { sendError } from "../gateway/error-reply.js";
import { restRoutesOf } from "../gateway/http-rules.js";
import { buildOpenApiDocument } from "../gateway/openapi.js";
import { registerRestRoutes } from "../gateway/rest-gateway.js";
import type { Metrics } from "../observability/metrics.js";
import { requestInfoKey } from "../rpc/request-context.js";
import { contractServices, type RpcCore } from "../rpc/routes.js";
import { createDualProtocolServer } from "./dual-protocol-server.js";
import { registerOperationalRoutes, type OperationalDeps } from "./operational-routes.js";

export interface HttpSettings {
  readonly bodyLimitBytes: number;
  readonly trustedProxies: readonly string[];
  readonly keepAliveTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly headersTimeoutMs: number;
  readonly h2IdleTimeoutMs: number;
  readonly shutdownTimeoutMs: number;
}

/**
 * The HTTP face on one port: every RPC in every protocol (connect-fastify), the REST gateway
 * derived from the contract, and the operational routes. Every failure, Fastify's own included,
 * is an ErrorResponse.
 */
export async function createHttpApp(
  settings: HttpSettings,
  rpc: RpcCore,
  operational: Omit<OperationalDeps, "openApi" | "metrics">,
  observers: { logger: FastifyBaseLogger; metrics: Metrics },
): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: observers.logger,
    genReqId: () => crypto.randomUUID(),
    requestIdHeader: false,
    bodyLimit: settings.bodyLimitBytes,
    // X-Forwarded-For is believed only from the configured proxies.
    trustProxy: settings.trustedProxies.length > 0 ? [...settings.trustedProxies] : false,
    return503OnClosing: true,
    serverFactory: (handler) => createDualProtocolServer(handler, settings) as never,
  });

  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });
  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    observers.metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    observers.metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });

  // Set before any plugin registers: encapsulated children inherit the handlers in force then.
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new DomainError("ROUTE_NOT_FOUND", `No route for ${request.method} ${request.url.split("?")[0]}`)),
  );
  app.setErrorHandler((error, request, reply) => {
    const status = (error as { statusCode?: number }).statusCode ?? 500;
    if (status === 413) return sendError(reply, new DomainError("PAYLOAD_TOO_LARGE", "The request body is too large"));
    if (status === 415) return sendError(reply, new DomainError("UNSUPPORTED_MEDIA_TYPE", "Unsupported Content-Type"));
    if (status >= 400 && status < 500) return sendError(reply, invalidArgument(`Malformed request: ${(error as Error).message}`));
    request.log.error({ err: error }, "request failed");
    return sendError(reply, error);
  });

  await app.register(fastifyConnectPlugin, {
    routes: rpc.routes,
    interceptors: rpc.interceptors,
    readMaxBytes: settings.bodyLimitBytes,
    shutdownTimeoutMs: settings.shutdownTimeoutMs,
    contextValues: (request) => createContextValues().set(requestInfoKey, { requestId: request.id, remoteAddress: request.ip }),
  });

  const restRoutes = restRoutesOf(contractServices);
  await app.register(async (gateway) => {
    await gateway.register(formBody);
    registerRestRoutes(gateway, restRoutes, rpc.transport);
  });
  registerOperationalRoutes(app, { ...operational, metrics: observers.metrics, openApi: buildOpenApiDocument(restRoutes) });
  await app.ready();
  return app;
}
