import type { Tracer } from "@opentelemetry/api";
import type { Config } from "../config/config.js";
import type { Logger } from "../domain/shared/observability.js";
import type { UnitOfWork } from "../domain/shared/unit-of-work.js";
import type { ChangeFeed } from "../domain/tokens/ports.js";
import type { Metrics } from "../observability/metrics.js";
import { openChangeFeed } from "../store/postgres/change-feed.js";
import { openDatabase, type Database } from "../store/postgres/database.js";
import { traceQueries } from "../store/postgres/query-spans.js";
import { PostgresReplayCache, PostgresReplayCacheBirths } from "../store/postgres/replay-cache.js";
import { postgresRepositories, type Repositories } from "../store/postgres/repositories/index.js";
import { KnexUnitOfWork } from "../store/postgres/unit-of-work.js";
import { openSharedState, type SharedState } from "../store/shared-state.js";
import type { Lifecycle } from "./lifecycle.js";
import { awaitCurrentSchema } from "./schema-wait.js";
import { retryWhileDatabaseUnavailable, startupRetryOf, type StartupRetry } from "./startup-retry.js";

/** The storage an instance runs on, opened (and migrated) from the storage settings. */
export interface Storage {
  readonly database: Database;
  readonly shared: SharedState;
  readonly uow: UnitOfWork;
  /** The background jobs' own connections (a small pool of their own on Postgres). */
  readonly jobsUow: UnitOfWork;
  readonly repositories: Repositories;
  readonly changeFeed: ChangeFeed;
}

/**
 * Opens the database and the shared state, each registered with `lifecycle` to be closed. The
 * database is migrated (MIGRATE_ON_START) or waited for until a migration job has made its schema
 * current (awaitCurrentSchema); `migrateOnly` (the CLI's offline `migrate`) does neither.
 */
export async function openStorage(
  config: Config,
  lifecycle: Lifecycle,
  observers: { logger: Logger; metrics: Metrics; tracer: Tracer | undefined },
  migrateOnly: boolean | undefined,
): Promise<Storage> {
  const { storage } = config;
  const { logger, metrics, tracer } = observers;
  const database = openDatabase(storage);
  lifecycle.started("database", () => database.close());
  if (tracer) {
    for (const db of new Set([database.db, database.jobsDb])) traceQueries(db, tracer, database.schema);
  }
  if (!migrateOnly) {
    const retry = startupRetryOf(storage, logger);
    await migrateOrAwait(database, storage, retry);
    // Before the instance says ready: its first requests must not each wait for a new connection.
    await retryWhileDatabaseUnavailable("opening the pool's connections", () => database.warmUp(), retry);
  }
  // The replay cache's statements each commit on their own, on the pool.
  const replayTx = new KnexUnitOfWork(database.db).direct;
  const shared = openSharedState(
    storage,
    {
      credentialCacheSeconds: config.tokens.credentialCacheSeconds,
      onRateLimitFallback: () => metrics.rateLimiterFallbacks.inc(),
      onBreakerChange: (open) => metrics.redisBreakerOpen.set(open ? 1 : 0),
      replay: {
        database: new PostgresReplayCache(replayTx),
        births: new PostgresReplayCacheBirths(replayTx),
      },
    },
    logger,
  );
  lifecycle.started("redis", () => shared.close());
  const uow = new KnexUnitOfWork(database.db, storage.databaseLockWaitMs);
  return {
    database,
    shared,
    uow,
    jobsUow: database.jobsDb === database.db ? uow : new KnexUnitOfWork(database.jobsDb),
    repositories: postgresRepositories(storage.databaseSchema),
    changeFeed: openChangeFeed(storage, logger),
  };
}

async function migrateOrAwait(database: Database, storage: Config["storage"], retry: StartupRetry): Promise<void> {
  const { logger } = retry;
  if (storage.migrateOnStart) {
    await retryWhileDatabaseUnavailable("migrations", () => database.migrate(logger), retry);
    return;
  }
  await retryWhileDatabaseUnavailable(
    "waiting for the schema",
    () => awaitCurrentSchema(database, { timeoutMs: storage.migrationWaitTimeoutMs, logger }),
    retry,
  );
}
