import type { Tracer } from "@opentelemetry/api";
import type { FastifyInstance } from "fastify";
import { warnDeprecatedAllowedAudiences, warnWithoutTrustedProxies, type Config } from "../config/config.js";
import {
  authorizationServerMetadata,
  jwksMaxAgeSeconds,
  openIdProviderMetadata,
  ssfConfiguration,
} from "../domain/tokens/discovery.js";
import { createAdminApp } from "../http/admin-app.js";
import { createHttpApp } from "../http/fastify-app.js";
import type { Logger } from "pino";
import type { Metrics } from "../observability/metrics.js";
import { createHealthService, type HealthService } from "../rpc/health.js";
import { serviceNamesOn } from "../rpc/areas.js";
import type { Face } from "../rpc/area.js";
import { createRpcCore, type RpcCore } from "../rpc/routes.js";
import { classifyDatabaseError } from "../store/postgres/unavailable.js";
import type { DomainServices } from "./domain-services.js";
import type { Lifecycle } from "./lifecycle.js";
import { cachedReadiness, readinessOf, type Readiness } from "./readiness.js";
import type { Storage } from "./storage.js";

export interface Faces {
  readonly app: FastifyInstance;
  readonly adminApp: FastifyInstance | undefined;
  readonly rpc: RpcCore;
  /** Opens the admin port (when configured), then the public one; resolves with the public address. */
  listen(): Promise<string>;
  /** Where the admin listener listens once `listen` resolved; undefined without one. */
  adminAddress(): string | undefined;
  /** Starts a shutdown's drain: /readyz 503 and gRPC health NOT_SERVING while everything still serves. */
  drain(): void;
}

/**
 * The RPC core over the domain, and the HTTP faces that serve it: the public one and, with
 * ADMIN_PORT, the admin one. Registered with `lifecycle` to be closed first.
 */
export async function createFaces(
  config: Config,
  domain: DomainServices,
  storage: Storage,
  observers: { logger: Logger; metrics: Metrics; tracer: Tracer | undefined },
  lifecycle: Lifecycle,
): Promise<Faces> {
  const { http } = config;
  const { logger, metrics } = observers;
  const { database, shared } = storage;
  const readiness = cachedReadiness(readinessOf(database, shared, http.readinessTimeoutMs), http.readinessIntervalMs);
  metrics.observeReadiness(() => readiness.checks());
  lifecycle.started("readiness checks", () => readiness.stop());
  const { health, adminHealth } = healthServices(config, async () => (await readiness.checks()).database === "up");
  const rpc = createRpcCore(
    { ...domain, operator: { ...domain.operator, migrate: () => database.migrate(logger) } },
    {
      logger,
      metrics,
      classifyError: classifyDatabaseError,
      deadlineMs: http.requestDeadlineMs,
      tracer: observers.tracer,
      principalBudget: { ...config.principalBudget, admission: domain.admission },
    },
    { health, admin: adminHealth && { health: adminHealth } },
  );
  const app = await createHttpApp(http, rpc, operationalOf(config, domain, storage, readiness), {
    logger,
    metrics,
    tracer: observers.tracer,
  });
  const apps: FastifyInstance[] = [app];
  // Stopped first: in-flight requests still need the pools, the jobs and the audit log. Both
  // listeners drain at once (each within SHUTDOWN_TIMEOUT_MS); one failing leaves neither open.
  lifecycle.started("http", async () => {
    health.shutdown();
    adminHealth?.shutdown();
    const failed = (await Promise.allSettled(apps.map((a) => a.close()))).find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
  });
  const adminApp = http.admin ? await createAdminApp(http, rpc, { logger, metrics }) : undefined;
  if (adminApp) apps.push(adminApp);
  let adminAddress: string | undefined;
  return {
    app,
    adminApp,
    rpc,
    async listen() {
      // Checked just before the port opens (Redis connects meanwhile), then kept fresh.
      await readiness.start();
      // The admin port first: a deployment whose admin port cannot open never serves the public one.
      if (adminApp && http.admin)
        adminAddress = await adminApp.listen({ host: http.admin.host, port: http.admin.port });
      const address = await app.listen({ host: http.host, port: http.port });
      warnWithoutTrustedProxies(app.log, http);
      warnDeprecatedAllowedAudiences(app.log, config.tokens);
      return address;
    },
    adminAddress: () => adminAddress,
    drain() {
      readiness.drain();
      health.shutdown();
      adminHealth?.shutdown();
    },
  };
}

/** What the public face's operational routes (readiness, JWKS, discovery) serve. */
function operationalOf(
  { http, tokens }: Config,
  domain: DomainServices,
  { database, shared }: Storage,
  readiness: Readiness,
) {
  return {
    checks: readiness.checks,
    draining: readiness.draining,
    storage: { database: database.kind, redis: shared.kind },
    servesMetrics: !http.admin,
    jwks: () => domain.signingKeys.jwks,
    jwksMaxAgeSeconds: jwksMaxAgeSeconds(tokens),
    authorizationServerMetadata: authorizationServerMetadata(tokens.issuer),
    openIdProviderMetadata: openIdProviderMetadata(tokens.issuer),
    ssfConfiguration: ssfConfiguration(tokens.issuer),
    // The issuer is the service's public base URL (the discovery documents' endpoints hang off it).
    publicUrl: tokens.issuer,
  };
}

/** gRPC health of the public face, and of the admin face when there is one: each reports the areas it serves. */
function healthServices(
  config: Config,
  databaseUp: () => Promise<boolean>,
): { health: HealthService; adminHealth: HealthService | undefined } {
  const adminFace = config.http.admin !== undefined;
  const healthOf = (face: Face) =>
    createHealthService(databaseUp, {
      services: serviceNamesOn(face, adminFace),
      pollIntervalMs: config.jobs.healthWatchIntervalMs,
    });
  return { health: healthOf("public"), adminHealth: adminFace ? healthOf("admin") : undefined };
}
