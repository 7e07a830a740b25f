import type { FastifyInstance } from "fastify";
import { DomainError } from "../errors/domain-error.js";
import { sendError } from "../gateway/error-reply.js";
import type { DependencyStatus, Metrics } from "../observability/metrics.js";

/** What the probes, the metrics and the discovery documents read; the composition root provides it. */
export interface OperationalDeps {
  /** Each dependency's status, by name ("database", "redis"), as the latest readiness check saw it. */
  readonly checks: () => Promise<Record<string, DependencyStatus>>;
  /** True while a shutdown drains: the instance serves on but asks its load balancer to take it out. */
  readonly draining: () => boolean;
  /** What each dependency runs on, for the readiness body ("postgres" or "pglite", "redis" or "memory"). */
  readonly storage: Readonly<Record<string, string>>;
  readonly metrics: Metrics;
  /** False when the admin listener serves /metrics instead (ADMIN_PORT): the public port then has none. */
  readonly servesMetrics: boolean;
  readonly openApi: object;
  /** The public halves of every key whose tokens may still be valid. */
  readonly jwks: () => object;
  /** The JWKS's Cache-Control max-age: short enough that a cache obeying it sees a new key well before it signs. */
  readonly jwksMaxAgeSeconds: number;
  /** RFC 8414 authorization server metadata. */
  readonly authorizationServerMetadata: object;
  readonly openIdProviderMetadata: object;
  /** OpenID Shared Signals Framework transmitter metadata. */
  readonly ssfConfiguration: object;
}

/** Probes, metrics and the API description: served beside the documented API, not part of it. */
export function registerOperationalRoutes(app: FastifyInstance, deps: OperationalDeps): void {
  registerLiveness(app);

  // Readiness: this instance can serve. "degraded" (Redis away, fallbacks serving) is still ready:
  // one Redis blip must not empty a load balancer.
  app.get("/readyz", async (_request, reply) => {
    if (deps.draining())
      return sendError(
        reply,
        new DomainError("SERVICE_NOT_READY", "The instance is shutting down", {
          params: [{ name: "shutdown", value: "draining" }],
        }),
      );
    const checks = await deps.checks();
    const statuses = Object.values(checks);
    if (!statuses.includes("down"))
      return { status: statuses.includes("degraded") ? "degraded" : "ready", checks, storage: deps.storage };
    return sendError(
      reply,
      new DomainError("SERVICE_NOT_READY", "A dependency of the service is unreachable", {
        params: Object.entries(checks).map(([name, value]) => ({ name, value })),
      }),
    );
  });

  if (deps.servesMetrics) registerMetrics(app, deps.metrics);

  app.get("/openapi.json", async () => deps.openApi);

  app.get("/.well-known/jwks.json", async (_request, reply) => {
    reply.header("cache-control", `public, max-age=${deps.jwksMaxAgeSeconds}`);
    return deps.jwks();
  });

  app.get("/.well-known/oauth-authorization-server", async () => deps.authorizationServerMetadata);
  // OpenID Connect discovery's address (RFC 8414 section 5): standard clients (openid-client's
  // default discovery) look here first; the same metadata in the OpenID Provider profile.
  app.get("/.well-known/openid-configuration", async () => deps.openIdProviderMetadata);
  app.get("/.well-known/ssf-configuration", async () => deps.ssfConfiguration);
}

/** What the admin listener serves besides OperatorService: liveness (for its own probe) and the metrics. */
export function registerAdminRoutes(app: FastifyInstance, deps: { readonly metrics: Metrics }): void {
  registerLiveness(app);
  registerMetrics(app, deps.metrics);
}

/**
 * Liveness: the process answers. Says nothing about dependencies, so a load balancer does not
 * restart every instance when Postgres blips.
 */
function registerLiveness(app: FastifyInstance): void {
  app.get("/healthz", async () => ({ status: "ok" }));
}

function registerMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.get("/metrics", async (_request, reply) => {
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
}
