import type { Transport } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { isLoopbackHost, type Config } from "../config/config.js";
import { loadSecrets } from "../config/secret-files.js";
import type { Clock } from "../domain/shared/clock.js";
import { deriveKeyMaterial } from "../domain/shared/key-material.js";
import { ADVERTISED_SCOPES } from "../domain/tokens/scopes.js";
import { SUPPORTED_GRANTS } from "../domain/tokens/model.js";
import { createAdminApp } from "../http/admin-app.js";
import { createHttpApp } from "../http/fastify-app.js";
import { createLogger } from "../observability/logger.js";
import { createMetrics } from "../observability/metrics.js";
import { startTracing, type SpanExporter } from "../observability/tracing.js";
import { createHealthService } from "../rpc/health.js";
import type { Face } from "../rpc/area.js";
import { serviceNamesOn } from "../rpc/areas.js";
import { createRpcCore } from "../rpc/routes.js";
import { ownDataDir } from "../store/data-dir-lock.js";
import { openDatabase } from "../store/postgres/database.js";
import { postgresRepositories } from "../store/postgres/repositories/index.js";
import { credentialChangeChannel } from "../store/postgres/repositories/credential-change-log.js";
import { signingKeyChangeChannel } from "../store/postgres/repositories/signing-key-repository.js";
import { PostgresChangeFeed } from "../store/postgres/change-feed.js";
import { LocalChangeFeed } from "../store/memory/change-feed.js";
import { KnexUnitOfWork } from "../store/postgres/unit-of-work.js";
import { traceQueries } from "../store/postgres/query-spans.js";
import { traceRedisCommands } from "../store/redis/redis-spans.js";
import { openSharedState } from "../store/shared-state.js";
import { startBackgroundJobs } from "./background-jobs.js";
import { retryWhileDatabaseUnavailable } from "./startup-retry.js";
import { createDomainServices } from "./domain-services.js";
import { Lifecycle } from "./lifecycle.js";
import { readinessOf } from "./readiness.js";
import { DomainError } from "../errors/domain-error.js";
import { databaseFailureOf } from "../store/postgres/unavailable.js";
import { registerInternals } from "./test-access.js";

export interface ServiceOptions {
  /** Where JSON logs go (stdout by default); tests capture them. */
  readonly logStream?: NodeJS.WritableStream;
  /** Skip applying migrations at start (the CLI's offline `migrate` applies them itself). */
  readonly skipMigrations?: boolean;
  /** The clock tokens are issued and verified with (tests move it). */
  readonly now?: Clock;
  /**
   * Tests only: turn tracing on and export spans here (e.g. an InMemorySpanExporter) instead of
   * OTLP. Deliberately not an environment variable, so no deployment can set it by mistake.
   */
  readonly spanExporter?: SpanExporter;
}

/** A built, migrated instance: `listen` opens the port(s), `close` drains and releases everything in order. */
export interface Service {
  readonly app: FastifyInstance;
  /** The admin listener's app (OperatorService, /metrics) when ADMIN_PORT is set. */
  readonly adminApp: FastifyInstance | undefined;
  /** In-process transport to every RPC, through the same interceptors as the network face. */
  readonly transport: Transport;
  /** What the instance runs on and where its generated secrets are kept, for the start log (never the secrets). */
  readonly about: {
    readonly database: string;
    readonly redis: string;
    readonly masterKey: string;
    readonly operatorToken: string;
  };
  /** Opens the admin port (when configured), then the public one; resolves with the public address. */
  listen(): Promise<string>;
  /** Where the admin listener listens (e.g. http://127.0.0.1:9090) once `listen` resolved; undefined without one. */
  readonly adminAddress: string | undefined;
  close(): Promise<void>;
}

/**
 * The composition root: config → storage → domain → RPC core → HTTP face. It only wires;
 * everything an instance must share with its peers lives in Postgres or Redis.
 */
export async function createService(config: Config, options: ServiceOptions = {}): Promise<Service> {
  const lifecycle = new Lifecycle();
  try {
    const { storage, http, tokens } = config;
    if (!storage.databaseUrl) lifecycle.started("data directory", ownDataDir(storage.dataDir));
    const secrets = loadSecrets(config);
    const keys = deriveKeyMaterial(secrets.masterKey);
    const logger = createLogger(config.logLevel, options.logStream);
    const metrics = createMetrics();
    const clock = options.now ?? (() => new Date());
    // Off (nothing created) unless OTEL_EXPORTER_OTLP_ENDPOINT is set; stopped last, so it flushes the spans of the whole shutdown.
    const tracing = startTracing({ otlpEndpoint: config.tracing.otlpEndpoint, spanExporter: options.spanExporter });
    if (tracing) {
      traceRedisCommands(tracing.tracer);
      lifecycle.started("tracing", async () => {
        traceRedisCommands(undefined);
        await tracing.shutdown();
      });
    }

    const database = openDatabase({
      databaseUrl: storage.databaseUrl,
      dataDir: storage.dataDir,
      schema: storage.databaseSchema,
      poolMax: storage.databasePoolMax,
      acquireTimeoutMs: storage.databaseAcquireTimeoutMs,
      queryTimeoutMs: storage.databaseQueryTimeoutMs,
      lockTimeoutMs: storage.databaseLockTimeoutMs,
      jobsPoolMax: storage.databaseJobsPoolMax,
    });
    lifecycle.started("database", () => database.close());
    if (tracing) {
      for (const db of new Set([database.db, database.jobsDb]))
        traceQueries(db, tracing.tracer, database.kind === "postgres" ? "postgresql" : "pglite");
    }
    if (!options.skipMigrations) await retryWhileDatabaseUnavailable("migrations", () => database.migrate(), logger);
    const shared = openSharedState(
      {
        redis: storage.redisUrl
          ? {
              url: storage.redisUrl,
              connectTimeoutMs: storage.redisConnectTimeoutMs,
              reconnectMaxDelayMs: storage.redisReconnectMaxDelayMs,
              commandTimeoutMs: storage.redisCommandTimeoutMs,
              breakerFailures: storage.redisBreakerFailures,
              breakerOpenMs: storage.redisBreakerOpenMs,
            }
          : undefined,
        keyPrefix: storage.redisKeyPrefix,
        credentialCacheSeconds: tokens.credentialCacheSeconds,
        onRateLimitFallback: () => metrics.rateLimiterFallbacks.inc(),
        onBreakerChange: (open) => metrics.redisBreakerOpen.set(open ? 1 : 0),
      },
      logger,
    );
    lifecycle.started("redis", () => shared.close());

    const uow = new KnexUnitOfWork(database.db, storage.databaseLockWaitMs);
    const jobsUow = database.jobsDb === database.db ? uow : new KnexUnitOfWork(database.jobsDb);
    const repositories = postgresRepositories(storage.databaseSchema);
    // Every instance over one Postgres hears of every credential change; the embedded database has one instance.
    const changeFeed = storage.databaseUrl
      ? new PostgresChangeFeed(
          {
            connectionString: storage.databaseUrl,
            channel: credentialChangeChannel(storage.databaseSchema),
            signingKeyChannel: signingKeyChangeChannel(storage.databaseSchema),
            reconnectMaxDelayMs: storage.redisReconnectMaxDelayMs,
          },
          logger,
        )
      : new LocalChangeFeed();
    const domain = createDomainServices({
      config,
      uow,
      jobsUow,
      repositories,
      shared,
      changeFeed,
      keys,
      operatorToken: secrets.operatorToken,
      logger,
      metrics,
      clock,
    });
    // The CLI's offline `migrate` starts without migrations and neither issues nor checks tokens.
    if (!options.skipMigrations) {
      await retryWhileDatabaseUnavailable("loading signing keys", () => domain.signingKeys.start(), logger);
      await retryWhileDatabaseUnavailable("reading credential changes", () => domain.generations.start(), logger);
      lifecycle.started("credential change feed", () => domain.generations.stop());
    }
    lifecycle.started("audit log", () => domain.auditLog.close());
    const jobs = startBackgroundJobs(
      [
        {
          name: "signing key reload",
          intervalMs: config.jobs.signingKeyReloadIntervalMs,
          run: () => domain.signingKeys.reload(),
        },
        {
          name: "credential reconcile",
          intervalMs: config.jobs.credentialReconcileIntervalMs,
          run: () => domain.generations.reconcile(),
        },
        {
          name: "credential log prune",
          intervalMs: config.jobs.credentialLogPruneIntervalMs,
          run: () => domain.generations.pruneLog(),
        },
        { name: "audit flush", intervalMs: config.jobs.auditFlushIntervalMs, run: () => domain.auditLog.flush() },
      ],
      logger,
    );
    lifecycle.started("background jobs", () => jobs.stop());

    const readiness = readinessOf(database, shared, http.readinessTimeoutMs);
    // Each face reports on the services it serves: with an admin port, the admin areas there only.
    const healthOf = (face: Face) =>
      createHealthService(async () => (await readiness()).database === "up", {
        services: serviceNamesOn(face, http.admin !== undefined),
        pollIntervalMs: config.jobs.healthWatchIntervalMs,
      });
    const health = healthOf("public");
    const adminHealth = http.admin ? healthOf("admin") : undefined;
    const classifyError = (error: unknown) => {
      switch (databaseFailureOf(error)) {
        case "unavailable":
          return new DomainError("DEPENDENCY_UNAVAILABLE", "The database did not answer in time; retry with backoff", {
            cause: error,
            retryAfterSeconds: 1,
          });
        case "contended":
          return new DomainError("RESOURCE_BUSY", "Another request is changing the same resource; retry shortly", {
            cause: error,
            retryAfterSeconds: 1,
          });
        default:
          return undefined;
      }
    };
    const rpc = createRpcCore(
      { ...domain, operator: { ...domain.operator, migrate: () => database.migrate() } },
      {
        logger,
        metrics,
        classifyError,
        deadlineMs: http.requestDeadlineMs,
        tracer: tracing?.tracer,
        principalBudget: config.principalBudget,
      },
      { health, admin: adminHealth && { health: adminHealth } },
    );
    const app = await createHttpApp(
      http,
      rpc,
      {
        checks: readiness,
        storage: { database: database.kind, redis: shared.kind },
        servesMetrics: !http.admin,
        jwks: () => domain.signingKeys.jwks,
        // 5 minutes, or a third of the pre-publication period when that is shorter: a cache that
        // follows it refetches at least twice between a key's publication and its first token.
        jwksMaxAgeSeconds: Math.min(300, Math.floor(tokens.signingKeyPrepublishSeconds / 3)),
        authorizationServerMetadata: authorizationServerMetadata(tokens.issuer),
        // The issuer is the service's public base URL (the discovery documents' endpoints hang off it).
        publicUrl: tokens.issuer,
      },
      { logger, metrics },
    );
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
    const service: Service = {
      app,
      adminApp,
      transport: rpc.transport,
      about: { database: database.kind, redis: shared.kind, ...secrets.sources },
      async listen() {
        // The admin port first: a deployment whose admin port cannot open never serves the public one.
        if (adminApp && http.admin)
          adminAddress = await adminApp.listen({ host: http.admin.host, port: http.admin.port });
        const address = await app.listen({ host: http.host, port: http.port });
        warnWithoutTrustedProxies(app.log, http);
        return address;
      },
      get adminAddress() {
        return adminAddress;
      },
      close: () => lifecycle.stop(),
    };
    registerInternals(service, { db: database.db, keys, migrate: () => database.migrate() });
    return service;
  } catch (error) {
    await lifecycle.stop().catch(() => {});
    throw error;
  }
}

/**
 * Issue 18 (finding 7): reachable beyond loopback with no TRUSTED_PROXIES, every client behind a
 * balancer arrives with the balancer's address, so one client's failed logins lock out all of
 * them and the per-address HTTP/2 limits count them as one. A warning, not a refusal: directly
 * exposed (no proxy) is a valid deployment and the default HOST is 0.0.0.0, and the field does
 * the same (Fastify, Express and Keycloak trust no forwarding header by default and start).
 */
function warnWithoutTrustedProxies(log: { warn(object: object, message: string): void }, http: Config["http"]): void {
  if (http.trustedProxies.length > 0) return;
  const exposed = [http.host, http.admin?.host].filter(
    (host): host is string => host !== undefined && !isLoopbackHost(host),
  );
  if (exposed.length === 0) return;
  log.warn(
    { hosts: exposed, setting: "TRUSTED_PROXIES" },
    "TRUSTED_PROXIES is not set and the service listens beyond loopback: behind a proxy or load balancer every client shares its address, " +
      "so per-address limits (token failures, lockouts, HTTP/2 sessions and resets) hit them all at once. Set TRUSTED_PROXIES to the proxy's addresses; " +
      "if clients connect directly, this warning can be ignored",
  );
}

/** RFC 8414: what this authorization server offers, consistent with what it issues. */
function authorizationServerMetadata(issuer: string): object {
  return {
    issuer,
    token_endpoint: `${issuer}/v2/auth/oauth2-token`,
    introspection_endpoint: `${issuer}/v2/auth/introspect`,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    grant_types_supported: SUPPORTED_GRANTS,
    token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
    introspection_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
    revocation_endpoint: `${issuer}/v2/auth/revoke`,
    revocation_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
    scopes_supported: ADVERTISED_SCOPES,
    // RFC 8414 makes this REQUIRED (and section 3.2 forbids an empty array), and validators such as
    // authlib refuse a document without it. There is no authorization endpoint (machine clients
    // only), so the one honest value is "none" (OAuth 2.0 Multiple Response Type Encoding
    // Practices, IANA-registered): the authorization endpoint issues nothing, because there is none.
    // "code" or "token" would claim a flow this server does not offer.
    response_types_supported: ["none"],
    // `sub` is the same for every client (an API user's client id or a user's id).
    subject_types_supported: ["public"],
    // Access tokens are RFC 9068 JWTs signed EdDSA (RFC 9068 section 2.1 names this metadata).
    access_token_signing_alg_values_supported: ["EdDSA"],
  };
}
