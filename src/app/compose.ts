import type { Tracer } from "@opentelemetry/api";
import type { Config } from "../config/config.js";
import { loadSecrets } from "../config/secret-files.js";
import { deriveKeyMaterial } from "../domain/shared/key-material.js";
import { createLogger } from "../observability/logger.js";
import { createMetrics } from "../observability/metrics.js";
import { startTracing } from "../observability/tracing.js";
import { ownDataDir } from "../store/data-dir-lock.js";
import { inSchema } from "../store/postgres/unit-of-work.js";
import { traceRedisCommands } from "../store/redis/redis-spans.js";
import { auditPartitionJob, domainJobs, startBackgroundJobs } from "./background-jobs.js";
import { createDomainServices } from "./domain-services.js";
import { createFaces } from "./faces.js";
import { Lifecycle } from "./lifecycle.js";
import type { Service, ServiceOptions } from "./service.js";
import { openStorage } from "./storage.js";
import { retryWhileDatabaseUnavailable, startupRetryOf } from "./startup-retry.js";
import { registerInternals } from "./test-access.js";

export type { Service, ServiceOptions };

/**
 * The tracer of the service's spans, or undefined: off (nothing created) unless
 * OTEL_EXPORTER_OTLP_ENDPOINT is set. Started first and stopped last, so it flushes the spans of
 * the whole shutdown.
 */
function startServiceTracing(config: Config, options: ServiceOptions, lifecycle: Lifecycle): Tracer | undefined {
  const tracing = startTracing({ ...config.tracing, spanExporter: options.spanExporter });
  if (!tracing) return undefined;
  traceRedisCommands(tracing.tracer);
  lifecycle.started("tracing", async () => {
    traceRedisCommands(undefined);
    await tracing.shutdown();
  });
  return tracing.tracer;
}

/** Every instance's background jobs: the domain's, and the audit trail's partitions. */
function startJobs(
  config: Config,
  domain: ReturnType<typeof createDomainServices>,
  storage: Awaited<ReturnType<typeof openStorage>>,
  observers: {
    readonly logger: ReturnType<typeof createLogger>;
    readonly metrics: ReturnType<typeof createMetrics>;
    readonly tracer: ReturnType<typeof startServiceTracing>;
  },
  clock: () => Date,
  lifecycle: Lifecycle,
): void {
  const { logger, metrics } = observers;
  const jobs = startBackgroundJobs(
    [...domainJobs(config.jobs, domain), auditPartitionJob(config, storage.database.jobsDb, clock, logger, metrics)],
    logger,
    observers.tracer,
  );
  lifecycle.started("background jobs", () => jobs.stop());
}

/**
 * The composition root: config → storage → domain → RPC core → HTTP face. It only wires: each
 * part takes its config group whole, and everything an instance must share with its peers lives
 * in Postgres or Redis. A failure half-way stops what had started.
 */
export async function createService(config: Config, options: ServiceOptions = {}): Promise<Service> {
  const lifecycle = new Lifecycle();
  try {
    // The embedded database's directory is this instance's alone, before any secret is generated in it.
    if (!config.storage.databaseUrl)
      lifecycle.started("data directory", options.dataDirClaim ?? ownDataDir(config.storage.dataDir));
    const secrets = loadSecrets(config);
    const keys = deriveKeyMaterial(secrets.masterKey);
    const logger = createLogger(config.logLevel, options.logStream);
    const metrics = createMetrics();
    const clock = options.now ?? (() => new Date());
    const observers = { logger, metrics, tracer: startServiceTracing(config, options, lifecycle) };
    const storage = await openStorage(config, lifecycle, observers, options.migrateOnly);
    const domain = createDomainServices({
      ...storage,
      config,
      keys,
      operatorToken: secrets.operatorToken,
      logger,
      metrics,
      clock,
    });
    // The CLI's offline `migrate` (a migration job) serves Migrate alone: nothing that reads the
    // schema before it is migrated (signing keys, the change feed, the background jobs).
    if (!options.migrateOnly) {
      const retry = startupRetryOf(config.storage, logger);
      await retryWhileDatabaseUnavailable("loading signing keys", () => domain.signingKeys.start(), retry);
      await retryWhileDatabaseUnavailable("reading credential changes", () => domain.generations.start(), retry);
      lifecycle.started("credential change feed", () => domain.generations.stop());
    }
    lifecycle.started("audit log", () => domain.auditLog.close());
    if (!options.migrateOnly) startJobs(config, domain, storage, observers, clock, lifecycle);

    const faces = await createFaces(config, domain, storage, observers, lifecycle);
    lifecycle.started("change streams and SET polls", () => domain.credentialChanges.stop()); // before HTTP closes
    const { database, shared } = storage;
    const service: Service = {
      app: faces.app,
      adminApp: faces.adminApp,
      transport: faces.rpc.transport,
      about: { database: database.kind, redis: shared.kind, ...secrets.sources },
      listen: () => faces.listen(),
      get adminAddress() {
        return faces.adminAddress();
      },
      drain: () => faces.drain(),
      close: () => lifecycle.stop(),
    };
    registerInternals(service, { db: inSchema(database.db), keys, migrate: () => database.migrate(), domain });
    return service;
  } catch (error) {
    await lifecycle.stop().catch(() => {});
    throw error;
  }
}
