import { Code } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { ServiceError } from "../domain/errors.js";
import type { Metrics } from "../observability/metrics.js";
import type { Database } from "../store/database.js";
import type { SharedState } from "../store/shared-state.js";
import { sendError } from "./error-reply.js";

export interface OperationalDeps {
  readonly database: Database;
  readonly sharedState: SharedState;
  readonly metrics: Metrics;
  readonly openApi: object;
}

/** Probes, metrics and the API description: served beside the documented API, not part of it. */
export function registerOperationalRoutes(app: FastifyInstance, deps: OperationalDeps): void {
  // Liveness: the process answers. Says nothing about dependencies, so a load balancer does not
  // restart every instance when Postgres blips.
  app.get("/healthz", async () => ({ status: "ok" }));

  // Readiness: this instance can serve (database and Redis reachable).
  app.get("/readyz", async (_request, reply) => {
    const [database, redis] = await Promise.all([deps.database.ping(), deps.sharedState.ping()]);
    const checks = { database: database ? "up" : "down", redis: redis ? "up" : "down" };
    if (database && redis) return { status: "ready", checks, storage: { database: deps.database.kind, redis: deps.sharedState.kind } };
    return sendError(
      reply,
      new ServiceError(
        Code.Unavailable,
        "SERVICE_NOT_READY",
        "A dependency of the service is unreachable",
        Object.entries(checks).map(([name, value]) => ({ name, value })),
      ),
    );
  });

  app.get("/metrics", async (_request, reply) => {
    reply.type(deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });

  app.get("/openapi.json", async () => deps.openApi);
}
