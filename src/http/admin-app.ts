import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { Metrics } from "../observability/metrics.js";
import type { RpcCore } from "../rpc/routes.js";
import { createRpcApp } from "./fastify-app.js";
import { registerAdminRoutes } from "./operational-routes.js";
import type { HttpConfig } from "./settings.js";

/**
 * The admin face, on a port of its own (ADMIN_PORT): OperatorService in every protocol with its
 * reflection and gRPC health, /metrics and /healthz. The same server, hooks and error handling
 * as the public face, so the operator credential, its attempt limit, TRUSTED_PROXIES and the
 * ErrorResponse shape apply here unchanged; only what is routed differs.
 */
export async function createAdminApp(
  settings: HttpConfig,
  rpc: Pick<RpcCore, "adminRoutes" | "interceptors" | "transport">,
  observers: { logger: FastifyBaseLogger; metrics: Metrics },
): Promise<FastifyInstance> {
  if (!rpc.adminRoutes) throw new Error("the RPC core has no admin face: build it with an admin face to serve one");
  // Its request log lines say which listener answered.
  const logger = observers.logger.child({ listener: "admin" });
  const app = await createRpcApp(
    settings,
    { routes: rpc.adminRoutes, interceptors: rpc.interceptors, transport: rpc.transport },
    { logger, metrics: observers.metrics },
  );
  registerAdminRoutes(app, { metrics: observers.metrics });
  await app.ready();
  return app;
}
