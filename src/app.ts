import crypto from "node:crypto";
import { Code, createContextValues, createRouterTransport, type Transport } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { createValidateInterceptor } from "@connectrpc/validate";
import formBody from "@fastify/formbody";
import Fastify, { type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { deriveKeyMaterial, loadMasterKey, type KeyMaterial } from "./config/key-material.js";
import type { Config } from "./config/config.js";
import { ApiUserProvisioning } from "./domain/api-users/api-user-provisioning.js";
import { OperatorCredential } from "./domain/operator/operator-credential.js";
import { TenantService } from "./domain/tenants/tenant-service.js";
import { sendError } from "./gateway/error-reply.js";
import { restRoutesOf } from "./gateway/http-rules.js";
import { buildOpenApiDocument } from "./gateway/openapi.js";
import { registerRestRoutes } from "./gateway/rest-gateway.js";
import { registerOperationalRoutes } from "./gateway/operational-routes.js";
import { loggerOptions } from "./observability/logger.js";
import { createMetrics, type Metrics } from "./observability/metrics.js";
import { createHealthService, type HealthService } from "./rpc/health.js";
import { errorInterceptor } from "./rpc/interceptors/error-interceptor.js";
import { metricsInterceptor } from "./rpc/interceptors/metrics-interceptor.js";
import { operatorAuthInterceptor } from "./rpc/interceptors/operator-auth-interceptor.js";
import { requestInfoKey } from "./rpc/request-context.js";
import { createRoutes, publicServices } from "./rpc/routes.js";
import { OperatorServiceHandler } from "./rpc/services/operator-service.js";
import { createDualProtocolServer } from "./server/dual-protocol-server.js";
import { AirCreditService } from "../gen/travel/aircredit/v3/air_credit_pb.js";
import { ApiUserService } from "../gen/travel/apiuser/v2/api_user_pb.js";
import { UserService } from "../gen/travel/user/v2/user_pb.js";
import { TokenRateLimiter } from "./domain/rate-limit/token-rate-limiter.js";
import { AccessTokens } from "./domain/tokens/access-tokens.js";
import { ClientAuthenticator } from "./domain/tokens/client-authenticator.js";
import { CredentialState } from "./domain/tokens/credential-state.js";
import { SigningKeyRing } from "./domain/tokens/signing-key-ring.js";
import { TokenService } from "./domain/tokens/token-service.js";
import { TrustedIssuers } from "./domain/tokens/trusted-issuers.js";
import { accessTokenInterceptor } from "./rpc/interceptors/access-token-interceptor.js";
import { AuthServiceHandler } from "./rpc/services/auth-service.js";
import { AuditLog } from "./domain/audit/audit-log.js";
import { ApiUserServiceHandler } from "./rpc/services/api-user-service.js";
import { ApiUserAdmin } from "./domain/api-users/api-user-admin.js";
import { ownDataDir } from "./store/data-dir-lock.js";
import { openDatabase, type Database } from "./store/database.js";
import { openSharedState, type SharedState } from "./store/shared-state.js";
import { invalidArgument, ServiceError } from "./domain/errors.js";

export interface ServiceOptions {
  /** Where JSON logs go (stdout by default); tests capture them. */
  readonly logStream?: NodeJS.WritableStream;
  /** Skip applying migrations at start (the CLI's offline `migrate` applies them itself). */
  readonly skipMigrations?: boolean;
  /** The clock tokens are issued and verified with (tests move it). */
  readonly now?: () => Date;
}

/** A built, migrated service instance; `listen` opens the port, `close` drains and releases everything. */
export interface Service {
  readonly app: FastifyInstance;
  readonly config: Config;
  readonly database: Database;
  readonly sharedState: SharedState;
  readonly metrics: Metrics;
  readonly keys: KeyMaterial;
  /** In-process transport to every RPC, through the same interceptors as the network face. */
  readonly transport: Transport;
  listen(): Promise<string>;
  close(): Promise<void>;
}

/**
 * The composition root: config → storage → domain → RPC core → REST gateway. Everything an
 * instance must share with its peers lives in Postgres or Redis, never only in this process.
 */
export async function createService(config: Config, options: ServiceOptions = {}): Promise<Service> {
  const releaseDataDir = config.databaseUrl ? () => {} : ownDataDir(config.dataDir);
  // Released in this order on close: drain HTTP first (in-flight requests still need the
  // pools), then Redis, then the database, then the claim on DATA_DIR.
  // Background workers (timers, the audit writer) stop after HTTP has drained, in the order added.
  const release = {
    app: noop,
    background: [] as Array<() => Promise<void> | void>,
    sharedState: noop,
    database: noop,
    dataDir: releaseDataDir as () => Promise<void> | void,
  };
  const releaseAll = async () => {
    for (const step of [release.app, ...release.background, release.sharedState, release.database, release.dataDir]) await step();
  };
  try {
    const keys = deriveKeyMaterial(loadMasterKey(config.masterKey, config.dataDir));
    const { credential: operatorCredential } = OperatorCredential.load(config.operatorToken, config.dataDir);

    const app = Fastify({
      logger: loggerOptions(config.logLevel, options.logStream),
      genReqId: () => crypto.randomUUID(),
      requestIdHeader: false,
      bodyLimit: config.bodyLimitBytes,
      // X-Forwarded-For is believed only from the configured proxies.
      trustProxy: config.trustedProxies.length > 0 ? [...config.trustedProxies] : false,
      return503OnClosing: true,
      serverFactory: (handler) =>
        createDualProtocolServer(handler, {
          keepAliveTimeoutMs: 5_000,
          requestTimeoutMs: 30_000,
          headersTimeoutMs: 10_000,
          h2IdleTimeoutMs: 120_000,
        }) as never,
    });
    const logger = app.log as unknown as Logger;
    release.app = () => app.close();

    const database = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, schema: config.databaseSchema });
    release.database = () => database.close();
    if (!options.skipMigrations) await database.migrate();

    const sharedState = openSharedState(config.redisUrl, logger);
    release.sharedState = () => sharedState.close();

    const metrics = createMetrics();
    const now = options.now ?? (() => new Date());
    const signingKeys = new SigningKeyRing(
      database.db,
      keys.signingKeyEncryptionKey,
      Math.max(config.accessTokenTtlSeconds, config.legacyTokenTtlSeconds),
      now,
    );
    // The CLI's offline `migrate` starts without migrations and issues no tokens: no keys to load yet.
    if (!options.skipMigrations) await signingKeys.start();
    // Keys rotated by another instance are picked up within a minute (and at once on an unknown kid).
    const keyReload = setInterval(() => signingKeys.reload().catch((err: unknown) => logger.warn({ err }, "signing key reload failed")), 60_000);
    keyReload.unref();
    release.background.push(() => clearInterval(keyReload));
    const credentialState = new CredentialState(database.db, sharedState.redis, config.redisKeyPrefix, logger, metrics.redisFallbacks);
    // Publishes credential changes that committed while Redis was unreachable.
    const reconcile = setInterval(
      () => credentialState.reconcile().catch((err: unknown) => logger.warn({ err }, "credential reconcile failed")),
      2_000,
    );
    reconcile.unref();
    await credentialState.reconcile().catch(() => {});
    release.background.push(() => clearInterval(reconcile));
    const accessTokens = new AccessTokens(signingKeys, credentialState, config.issuer, now);
    const trustedIssuers = new TrustedIssuers(database.db, now);
    const tokenService = new TokenService(database.db, new ClientAuthenticator(database.db, keys.secretPepper), accessTokens, trustedIssuers, {
      audience: config.audience,
      allowedAudiences: config.allowedAudiences,
      accessTokenTtlSeconds: config.accessTokenTtlSeconds,
      legacyTokenTtlSeconds: config.legacyTokenTtlSeconds,
      refreshTokenTtlSeconds: config.refreshTokenTtlSeconds,
      pepper: keys.secretPepper,
      now,
      issuer: config.issuer,
    });
    const auditLog = new AuditLog(database.db, logger, {
      written: metrics.auditWritten,
      writeFailures: metrics.auditWriteFailures,
      dropped: metrics.auditDropped,
    });
    // Drained after the HTTP server (no more events) and before the database closes.
    release.background.push(() => auditLog.close());
    const rateLimiter = new TokenRateLimiter({
      redis: sharedState.redis,
      keyPrefix: config.redisKeyPrefix,
      limits: config.rateLimits,
      onFallback: () => metrics.rateLimiterFallbacks.inc(),
    });
    const tenants = new TenantService(database.db);
    const provisioning = new ApiUserProvisioning(database.db, keys);

    const health: HealthService = createHealthService(
      async () => (await database.ping()) && (await sharedState.ping()),
      { services: [...publicServices.map((s) => s.typeName), "travel.operator.v1.OperatorService"] },
    );
    const routes = createRoutes(
      {
        auth: new AuthServiceHandler(tokenService, rateLimiter, auditLog),
        apiUsers: new ApiUserServiceHandler(new ApiUserAdmin(database.db, keys, provisioning, credentialState)),
        users: {},
        airCredits: {},
        operator: new OperatorServiceHandler(database, tenants, provisioning, signingKeys, trustedIssuers),
      },
      health,
    );
    // Outermost first: errors see every failure, metrics see final codes, validation runs after auth.
    const interceptors = [
      errorInterceptor(logger),
      metricsInterceptor(metrics),
      operatorAuthInterceptor(operatorCredential),
      accessTokenInterceptor(accessTokens, config.audience, new Set([ApiUserService.typeName, UserService.typeName, AirCreditService.typeName])),
      createValidateInterceptor(),
    ];

    app.addHook("onRequest", async (request, reply) => {
      reply.header("x-request-id", request.id);
    });
    app.addHook("onResponse", async (request, reply) => {
      const route = request.routeOptions.url ?? "unmatched";
      metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
      metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
    });

    // Set before any plugin registers: encapsulated children inherit the handlers in force then.
    app.setNotFoundHandler((request, reply) =>
      sendError(reply, new ServiceError(Code.NotFound, "ROUTE_NOT_FOUND", `No route for ${request.method} ${request.url.split("?")[0]}`)),
    );
    app.setErrorHandler((error, request, reply) => {
      const status = (error as { statusCode?: number }).statusCode ?? 500;
      if (status === 413) return sendError(reply, new ServiceError(Code.InvalidArgument, "PAYLOAD_TOO_LARGE", "The request body is too large"));
      if (status === 415) return sendError(reply, new ServiceError(Code.InvalidArgument, "UNSUPPORTED_MEDIA_TYPE", "Unsupported Content-Type"));
      if (status >= 400 && status < 500) return sendError(reply, invalidArgument(`Malformed request: ${(error as Error).message}`));
      request.log.error({ err: error }, "request failed");
      return sendError(reply, error);
    });

    await app.register(fastifyConnectPlugin, {
      routes,
      interceptors,
      readMaxBytes: config.bodyLimitBytes,
      shutdownTimeoutMs: config.shutdownTimeoutMs,
      contextValues: (request) =>
        createContextValues().set(requestInfoKey, { requestId: request.id, remoteAddress: request.ip }),
    });

    const restRoutes = restRoutesOf(publicServices);
    const transport = createRouterTransport(routes, { router: { interceptors } });
    const openApi = buildOpenApiDocument(restRoutes);
    await app.register(async (gateway) => {
      await gateway.register(formBody);
      registerRestRoutes(gateway, restRoutes, transport);
    });
    registerOperationalRoutes(app, { database, sharedState, metrics, openApi, signingKeys, issuer: config.issuer });

    await app.ready();
    let closed = false;
    return {
      app,
      config,
      database,
      sharedState,
      metrics,
      keys,
      transport,
      async listen() {
        return app.listen({ host: config.host, port: config.port });
      },
      async close() {
        if (closed) return;
        closed = true;
        health.shutdown();
        await releaseAll();
      },
    };
  } catch (error) {
    await releaseAll().catch(() => {});
    throw error;
  }
}

const noop = async (): Promise<void> => {};
