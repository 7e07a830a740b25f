/**
 * The storage settings (DATABASE_*, DATA_DIR, REDIS_*: src/config/config.ts reads them), taken
 * whole by the database, the shared state and the change feed.
 */
export interface StorageConfig {
  /** Postgres connection string; absent selects the embedded PGlite database under dataDir. */
  readonly databaseUrl: string | undefined;
  /**
   * Where migrations and the LISTEN connection go: a direct server session, when databaseUrl
   * is a transaction-mode pooler that cannot carry LISTEN or long DDL. DATABASE_URL by default.
   */
  readonly databaseDirectUrl: string | undefined;
  /**
   * What databaseUrl leads to: a server session per connection ("session": Postgres itself, or a
   * session-mode pooler), or a transaction-mode pooler such as PgBouncer's `pool_mode =
   * transaction` (no startup parameters; the timeouts are set per transaction).
   */
  readonly databasePoolMode: DatabasePoolMode;
  /** Apply pending migrations at start; false: a separate job migrates, and a start waits for it. */
  readonly migrateOnStart: boolean;
  /** How long a start without migrations waits for the schema to catch up with the code, then exits. */
  readonly migrationWaitTimeoutMs: number;
  /** DATABASE_STARTUP_WAIT_MS: how long start-up retries its first database work while the database does not answer. */
  readonly databaseStartupWaitMs: number;
  /** How long a migration waits for another instance's migration (the lock), then fails. */
  readonly migrationLockTimeoutMs: number;
  /** Postgres schema holding the service's tables (lets test runs and deployments of one server stay apart). */
  readonly databaseSchema: string;
  readonly dataDir: string;
  readonly databasePoolMax: number;
  /** Connections the request pool opens at start (before the instance says ready) and keeps. */
  readonly databasePoolMin: number;
  readonly databaseAcquireTimeoutMs: number;
  /**
   * Redis connection string; absent selects the in-process stand-in (single instance only). In
   * cluster and sentinel mode a comma-separated list: the cluster's seed nodes, or the sentinels.
   */
  readonly redisUrl: string | undefined;
  /** One server, a Sentinel-managed primary, or a Redis Cluster. */
  readonly redisMode: RedisMode;
  /** The primary's name the sentinels know (sentinel mode only). */
  readonly redisSentinelName: string | undefined;
  /** Prefix of every Redis key this deployment writes. */
  readonly redisKeyPrefix: string;
  readonly redisConnectTimeoutMs: number;
  /** Longest wait between two reconnection attempts. */
  readonly redisReconnectMaxDelayMs: number;
  /** A Redis command unanswered for this long fails and its fallback answers. */
  readonly redisCommandTimeoutMs: number;
  /** Redis failures in a row that open the circuit breaker, and how long it stays open. */
  readonly redisBreakerFailures: number;
  readonly redisBreakerOpenMs: number;
  /** Client-side limit on one Postgres query (a stalled server cannot enforce its own). */
  readonly databaseQueryTimeoutMs: number;
  /**
   * Longest wait of one statement for a lock it takes implicitly (Postgres lock_timeout: a foreign
   * key check, an UPDATE); explicit row locks are taken NOWAIT. 0: no limit but the query timeout.
   */
  readonly databaseLockTimeoutMs: number;
  /** How long a transaction that met a busy row is retried (holding no connection between attempts) before 409 RESOURCE_BUSY. */
  readonly databaseLockWaitMs: number;
  /** Connections of the background jobs' own pool (Postgres only). */
  readonly databaseJobsPoolMax: number;
}

/** What the Redis client needs of the storage settings, with the URL that selects Redis. */
export type RedisSettings = Pick<
  StorageConfig,
  | "redisConnectTimeoutMs"
  | "redisReconnectMaxDelayMs"
  | "redisCommandTimeoutMs"
  | "redisBreakerFailures"
  | "redisBreakerOpenMs"
  | "redisMode"
  | "redisSentinelName"
> & { readonly redisUrl: string };

/** REDIS_MODE: one server, a Redis Cluster, or a primary Sentinel names. */
export type RedisMode = "standalone" | "cluster" | "sentinel";

/** DATABASE_POOL_MODE: see StorageConfig.databasePoolMode. */
export type DatabasePoolMode = "session" | "transaction";
