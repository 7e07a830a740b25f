import { Code } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { ServiceError } from "../domain/errors.js";
import type { Metrics } from "../observability/metrics.js";
import type { Database } from "../store/database.js";
import type { SharedState } from "../store/shared-state.js";
import type { SigningKeyRing } from "../domain/tokens/signing-key-ring.js";
import { ALL_SCOPES } from "../domain/tokens/scopes.js";
import { GRANT_CLIENT_CREDENTIALS, GRANT_REFRESH_TOKEN, GRANT_TOKEN_EXCHANGE } from "../domain/tokens/token-service.js";
import { sendError } from "./error-reply.js";

export interface OperationalDeps {
  readonly database: Database;
  readonly signingKeys: SigningKeyRing;
  readonly issuer: string;
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

  // The public halves of every key whose tokens may still be valid (retired keys included).
  app.get("/.well-known/jwks.json", async (_request, reply) => {
    reply.header("cache-control", "public, max-age=300");
    return deps.signingKeys.jwks;
  });

  // RFC 8414 authorization server metadata.
  app.get("/.well-known/oauth-authorization-server", async () => ({
    issuer: deps.issuer,
    token_endpoint: `${deps.issuer}/v2/auth/oauth2-token`,
    introspection_endpoint: `${deps.issuer}/v2/auth/introspect`,
    jwks_uri: `${deps.issuer}/.well-known/jwks.json`,
    grant_types_supported: [GRANT_CLIENT_CREDENTIALS, GRANT_TOKEN_EXCHANGE, GRANT_REFRESH_TOKEN],
    token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
    introspection_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
    scopes_supported: ALL_SCOPES,
    response_types_supported: [],
    token_endpoint_auth_signing_alg_values_supported: ["EdDSA"],
  }));
}
