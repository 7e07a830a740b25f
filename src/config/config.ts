import path from "node:path";
import { ConfigError } from "./config-error.js";
import { budgetFrom, rateLimitsFromEnv, type Budget, type RateLimits } from "./rate-limits.js";
import { secretSetting, type SecretSetting } from "./secret-settings.js";

export { ConfigError };

/**
 * Everything the service reads from its environment, parsed once at start and grouped by the
 * part of the service it tunes. Every timeout and interval is here, with its variable named in
 * the README's configuration table.
 */
export interface Config {
  readonly http: HttpConfig;
  readonly storage: StorageConfig;
  readonly secrets: SecretsConfig;
  readonly tokens: TokenConfig;
  readonly rateLimits: RateLimits;
  /** What one authenticated principal may ask of one instance at once and per window. */
  readonly principalBudget: PrincipalBudgetConfig;
  readonly jobs: JobsConfig;
  readonly audit: AuditConfig;
  readonly tracing: TracingConfig;
  readonly logLevel: string;
  /** Where the CLI finds a running server. */
  readonly serverUrl: string;
  /** Where the CLI sends its operator RPCs: the admin listener when one is configured, else serverUrl. */
  readonly adminUrl: string;
  /** How long one CLI command waits for its RPC. */
  readonly cliRequestTimeoutMs: number;
}

/** OpenTelemetry tracing: off unless an OTLP endpoint is set (the exporter reads the other OTEL_* variables itself). */
export interface TracingConfig {
  /** OTEL_EXPORTER_OTLP_ENDPOINT: where spans go over OTLP/HTTP; undefined: tracing is off. */
  readonly otlpEndpoint: string | undefined;
}

export interface HttpConfig {
  readonly host: string;
  readonly port: number;
  /**
   * A second listener for the operator surface (OperatorService, its reflection, /metrics);
   * when set, the public port no longer serves them. Undefined: everything on the one port.
   */
  readonly admin: AdminListenerConfig | undefined;
  readonly bodyLimitBytes: number;
  /** Longer request URLs get 414. */
  readonly maxUrlBytes: number;
  /** Proxies whose X-Forwarded-For is believed (addresses or CIDRs); empty: none. */
  readonly trustedProxies: readonly string[];
  readonly keepAliveTimeoutMs: number;
  /** Longest time an HTTP/1.1 request may take to arrive in full. */
  readonly requestTimeoutMs: number;
  readonly headersTimeoutMs: number;
  /** Idle HTTP/2 sessions are closed after this long. */
  readonly h2IdleTimeoutMs: number;
  /** SETTINGS_MAX_CONCURRENT_STREAMS of every HTTP/2 session (src/http/http2-stream-budget.ts). */
  readonly h2MaxConcurrentStreams: number;
  /** HTTP/2 streams one client address may reset before they are answered, at once, and refilled per second; beyond, GOAWAY. */
  readonly h2ResetBurst: number;
  readonly h2ResetsPerSecond: number;
  /** Open HTTP/2 sessions per client address; more are refused with GOAWAY. */
  readonly h2MaxSessionsPerAddress: number;
  /** How long SIGTERM waits for in-flight requests. */
  readonly shutdownTimeoutMs: number;
  /** /readyz and gRPC health answer within this, whatever the dependencies do. */
  readonly readinessTimeoutMs: number;
  /** Every RPC but the operator's answers within this (504 DEADLINE_EXCEEDED otherwise). */
  readonly requestDeadlineMs: number;
  /** After this long past SIGTERM the process exits with code 1 whatever is still running. */
  readonly shutdownDeadlineMs: number;
}

export interface AdminListenerConfig {
  readonly host: string;
  readonly port: number;
}

export interface StorageConfig {
  /** Postgres connection string; absent selects the embedded PGlite database under dataDir. */
  readonly databaseUrl: string | undefined;
  /** Postgres schema holding the service's tables (lets test runs and deployments of one server stay apart). */
  readonly databaseSchema: string;
  readonly dataDir: string;
  readonly databasePoolMax: number;
  readonly databaseAcquireTimeoutMs: number;
  /** Redis connection string; absent selects the in-process stand-in (single instance only). */
  readonly redisUrl: string | undefined;
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

/**
 * Per principal (the API user behind an access token, or a SCIM client) and per instance, on
 * every RPC that takes a bearer credential: the token endpoints have their own limiter, the
 * operator's surface is not budgeted.
 */
export interface PrincipalBudgetConfig {
  /** RPCs of one principal running at once; further ones wait in memory, holding no connection. */
  readonly concurrency: number;
  /** RPCs of one principal waiting for a running slot; beyond it: 429 TOO_MANY_CONCURRENT_REQUESTS. */
  readonly queue: number;
  /** RPCs of one principal per fixed window (in process, per instance): beyond it 429 TOO_MANY_REQUESTS. */
  readonly rate: Budget;
}

/** Secret settings come from `NAME` or from the file named by `NAME_FILE` (secret-settings.ts). */
export interface SecretsConfig {
  /** Base64 of ≥ 32 bytes from which the secret pepper and encryption keys are derived; generated in dataDir when absent. */
  readonly masterKey: SecretSetting | undefined;
  /** Operator credential; generated in dataDir when absent. */
  readonly operatorToken: SecretSetting | undefined;
}

export interface TokenConfig {
  /** `iss` of issued tokens; every instance of a deployment must use the same. */
  readonly issuer: string;
  /** The audience this service accepts in access tokens, and the default `aud` of new ones. */
  readonly audience: string;
  /** Further audiences clients may request tokens for (other APIs of the platform). */
  readonly allowedAudiences: readonly string[];
  readonly accessTokenTtlSeconds: number;
  /** Lifetime of tokens from the deprecated /get-auth-token (documented as 86400 s). */
  readonly legacyTokenTtlSeconds: number;
  readonly refreshTokenTtlSeconds: number;
  /** How long a credential generation cached in Redis lives before it is re-read from Postgres. */
  readonly credentialCacheSeconds: number;
  /** A token with an unknown `kid` reloads the signing keys at most this often. */
  readonly unknownKeyReloadIntervalMs: number;
  /**
   * How long `keys rotate` publishes the next signing key (JWKS, verification on every instance)
   * before any instance signs with it: longer than every JWKS cache downstream and than
   * SIGNING_KEY_RELOAD_INTERVAL_MS, so no verifier meets a token whose key it has not loaded.
   */
  readonly signingKeyPrepublishSeconds: number;
  /** Fetching a trusted issuer's JWKS by URL: timeout, pause after a failure, and cache lifetime. */
  readonly jwksFetchTimeoutMs: number;
  readonly jwksCooldownMs: number;
  readonly jwksCacheMaxAgeMs: number;
  /** Longest lifetime accepted from an external subject token (exp − iat). */
  readonly externalTokenMaxLifetimeSeconds: number;
}

/** Background jobs of every instance. */
export interface JobsConfig {
  /** Picks up signing keys rotated by another instance (when its announcement did not arrive). */
  readonly signingKeyReloadIntervalMs: number;
  /**
   * Asks Postgres for the latest credential change and repairs the cache if it missed any: the
   * bound on how long a missed change notification can go unnoticed.
   */
  readonly credentialReconcileIntervalMs: number;
  /** Forgets credential changes older than the cache's TTL. */
  readonly credentialLogPruneIntervalMs: number;
  /** Writes buffered token audit events. */
  readonly auditFlushIntervalMs: number;
  /** How often a gRPC health Watch re-evaluates the instance's health. */
  readonly healthWatchIntervalMs: number;
}

export interface AuditConfig {
  readonly batchSize: number;
  /** Events kept while the database is down; beyond it the oldest are dropped and counted. */
  readonly maxBuffered: number;
}

function intFrom(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function urlFrom(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  const value = nonEmpty(env[name]) ?? fallback;
  try {
    new URL(value);
  } catch {
    throw new ConfigError(`${name} must be an absolute URL, got "${value}"`);
  }
  return value.replace(/\/$/, "");
}

function listFrom(value: string | undefined): string[] {
  return (value ?? "")
    .split(",")
    .map((v) => v.trim())
    .filter((v) => v !== "");
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

/**
 * True when `host` accepts connections from this machine only (127.0.0.0/8, ::1, localhost).
 * Beyond it, without TRUSTED_PROXIES, clients behind a shared proxy share one address budget.
 */
export function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** How a client on this machine reaches a listener bound to `host` (a wildcard address means this machine). */
function localUrl(host: string, port: number): string {
  const clientHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  return `http://${clientHost.includes(":") ? `[${clientHost}]` : clientHost}:${port}`;
}

/**
 * The issuer when TOKEN_ISSUER is unset: the address clients use, since discovery (RFC 8414
 * section 3.3) refuses metadata whose issuer differs from the URL it was fetched from. SERVER_URL
 * when set; else HOST itself when it names one address (HOST=127.0.0.1 gives http://127.0.0.1:PORT);
 * else, for a wildcard HOST, http://localhost:PORT (this machine by name).
 */
function defaultIssuer(env: NodeJS.ProcessEnv, host: string, port: number): string {
  const serverUrl = nonEmpty(env.SERVER_URL);
  if (serverUrl) return serverUrl.replace(/\/+$/, "");
  const wildcard = host === "0.0.0.0" || host === "::";
  return localUrl(wildcard ? "localhost" : host, port);
}

/**
 * ADMIN_PORT unset: no admin listener. Its host defaults to the loopback address, not HOST: it
 * is an operator surface, reached from the machine or through a deliberate ADMIN_HOST.
 */
function adminListenerFrom(env: NodeJS.ProcessEnv, publicPort: number): AdminListenerConfig | undefined {
  if (nonEmpty(env.ADMIN_PORT) === undefined) return undefined;
  const port = intFrom(env, "ADMIN_PORT", 0, 0, 65535);
  // Port 0 (any free port, as tests use) cannot collide; the same fixed port would not start.
  if (port !== 0 && port === publicPort) throw new ConfigError(`ADMIN_PORT must differ from PORT, both are ${port}`);
  return { host: nonEmpty(env.ADMIN_HOST) ?? "127.0.0.1", port };
}

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const host = nonEmpty(env.HOST) ?? "0.0.0.0";
  const port = intFrom(env, "PORT", 8080, 0, 65535);
  const databaseSchema = nonEmpty(env.DATABASE_SCHEMA) ?? "public";
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(databaseSchema)) {
    throw new ConfigError(`DATABASE_SCHEMA must be a lower-case SQL identifier, got "${databaseSchema}"`);
  }
  const serverUrl = nonEmpty(env.SERVER_URL) ?? localUrl(host, port);
  const admin = adminListenerFrom(env, port);
  const adminUrl = nonEmpty(env.ADMIN_URL)
    ? urlFrom(env, "ADMIN_URL", "")
    : admin
      ? localUrl(admin.host, admin.port)
      : serverUrl;
  const shutdownTimeoutMs = intFrom(env, "SHUTDOWN_TIMEOUT_MS", 10_000, 0, 600_000);
  const issuer = urlFrom(env, "TOKEN_ISSUER", defaultIssuer(env, host, port));
  const signingKeyReloadIntervalMs = intFrom(env, "SIGNING_KEY_RELOAD_INTERVAL_MS", MINUTE_MS, 10, HOUR_MS);
  // 15 minutes: above the 10 minutes JWKS caches commonly hold (jose's default, this service's
  // own JWKS_CACHE_MAX_AGE_MS), plus a reload interval and clock skew.
  const signingKeyPrepublishSeconds = intFrom(env, "SIGNING_KEY_PREPUBLISH_SECONDS", 900, 1, 7 * 86_400);
  if (signingKeyPrepublishSeconds * 1000 <= signingKeyReloadIntervalMs) {
    throw new ConfigError(
      `SIGNING_KEY_PREPUBLISH_SECONDS (${signingKeyPrepublishSeconds} s) must be longer than SIGNING_KEY_RELOAD_INTERVAL_MS (${signingKeyReloadIntervalMs} ms): an instance that missed the announcement must still load the next key before it signs`,
    );
  }
  const databaseQueryTimeoutMs = intFrom(env, "DATABASE_QUERY_TIMEOUT_MS", 1_000, 100, 10 * MINUTE_MS);
  // Half the query timeout by default: a lock wait must end as a 409 before the statement timeout makes it a 503.
  const databaseLockTimeoutMs = intFrom(
    env,
    "DATABASE_LOCK_TIMEOUT_MS",
    Math.floor(databaseQueryTimeoutMs / 2),
    0,
    10 * MINUTE_MS,
  );
  if (databaseLockTimeoutMs >= databaseQueryTimeoutMs) {
    throw new ConfigError(
      `DATABASE_LOCK_TIMEOUT_MS must be below DATABASE_QUERY_TIMEOUT_MS (${databaseQueryTimeoutMs}), got ${databaseLockTimeoutMs}`,
    );
  }
  return {
    http: {
      host,
      port,
      admin,
      bodyLimitBytes: intFrom(env, "BODY_LIMIT_BYTES", 64 * 1024, 1024, 64 * 1024 * 1024),
      // Below Node's 16 KiB header limit, so a long URL gets 414 rather than the parser's 431.
      maxUrlBytes: intFrom(env, "HTTP_MAX_URL_BYTES", 8 * 1024, 256, 15 * 1024),
      trustedProxies: listFrom(env.TRUSTED_PROXIES),
      keepAliveTimeoutMs: intFrom(env, "HTTP_KEEP_ALIVE_TIMEOUT_MS", 5_000, 100, HOUR_MS),
      requestTimeoutMs: intFrom(env, "HTTP_REQUEST_TIMEOUT_MS", 30_000, 100, HOUR_MS),
      headersTimeoutMs: intFrom(env, "HTTP_HEADERS_TIMEOUT_MS", 10_000, 100, HOUR_MS),
      h2IdleTimeoutMs: intFrom(env, "HTTP2_IDLE_TIMEOUT_MS", 120_000, 100, HOUR_MS),
      // Below 10, a grpc-js client's ordinary multiplexing would queue; above 10000 the limit means little.
      h2MaxConcurrentStreams: intFrom(env, "HTTP2_MAX_CONCURRENT_STREAMS", 100, 10, 10_000),
      h2ResetBurst: intFrom(env, "HTTP2_RESET_BURST", 200, 1, 100_000),
      h2ResetsPerSecond: intFrom(env, "HTTP2_RESETS_PER_SECOND", 20, 1, 100_000),
      h2MaxSessionsPerAddress: intFrom(env, "HTTP2_MAX_SESSIONS_PER_ADDRESS", 64, 1, 100_000),
      shutdownTimeoutMs,
      readinessTimeoutMs: intFrom(env, "READINESS_TIMEOUT_MS", 1_000, 10, MINUTE_MS),
      requestDeadlineMs: intFrom(env, "REQUEST_DEADLINE_MS", 5_000, 50, 10 * MINUTE_MS),
      shutdownDeadlineMs: intFrom(env, "SHUTDOWN_DEADLINE_MS", shutdownTimeoutMs + 5_000, 0, 900_000),
    },
    storage: {
      databaseUrl: secretSetting(env, "DATABASE_URL")?.value,
      databaseSchema,
      dataDir: path.resolve(nonEmpty(env.DATA_DIR) ?? "./data"),
      databasePoolMax: intFrom(env, "DATABASE_POOL_MAX", 10, 1, 1000),
      databaseAcquireTimeoutMs: intFrom(env, "DATABASE_ACQUIRE_TIMEOUT_MS", 500, 100, 10 * MINUTE_MS),
      redisUrl: secretSetting(env, "REDIS_URL")?.value,
      redisKeyPrefix: nonEmpty(env.REDIS_KEY_PREFIX) ?? "auth:",
      redisConnectTimeoutMs: intFrom(env, "REDIS_CONNECT_TIMEOUT_MS", 2_000, 100, MINUTE_MS),
      redisReconnectMaxDelayMs: intFrom(env, "REDIS_RECONNECT_MAX_DELAY_MS", 2_000, 10, MINUTE_MS),
      redisCommandTimeoutMs: intFrom(env, "REDIS_COMMAND_TIMEOUT_MS", 500, 10, MINUTE_MS),
      redisBreakerFailures: intFrom(env, "REDIS_BREAKER_FAILURES", 3, 1, 1000),
      redisBreakerOpenMs: intFrom(env, "REDIS_BREAKER_OPEN_MS", 2_000, 10, 10 * MINUTE_MS),
      databaseQueryTimeoutMs,
      databaseLockTimeoutMs,
      databaseLockWaitMs: intFrom(env, "DATABASE_LOCK_WAIT_MS", 2_000, 0, 10 * MINUTE_MS),
      databaseJobsPoolMax: intFrom(env, "DATABASE_JOBS_POOL_MAX", 2, 1, 100),
    },
    secrets: {
      masterKey: secretSetting(env, "MASTER_KEY"),
      operatorToken: secretSetting(env, "OPERATOR_TOKEN"),
    },
    tokens: {
      issuer,
      audience: urlFrom(env, "TOKEN_AUDIENCE", `${issuer}/v2`),
      allowedAudiences: listFrom(env.ALLOWED_AUDIENCES),
      accessTokenTtlSeconds: intFrom(env, "ACCESS_TOKEN_TTL_SECONDS", 3600, 60, 86_400),
      legacyTokenTtlSeconds: intFrom(env, "LEGACY_TOKEN_TTL_SECONDS", 86_400, 60, 86_400),
      refreshTokenTtlSeconds: intFrom(env, "REFRESH_TOKEN_TTL_SECONDS", 30 * 86_400, 300, 365 * 86_400),
      credentialCacheSeconds: intFrom(env, "CREDENTIAL_CACHE_SECONDS", 300, 1, 86_400),
      unknownKeyReloadIntervalMs: intFrom(env, "SIGNING_KEY_UNKNOWN_KID_RELOAD_MS", 5_000, 0, HOUR_MS),
      signingKeyPrepublishSeconds,
      jwksFetchTimeoutMs: intFrom(env, "JWKS_FETCH_TIMEOUT_MS", 3_000, 100, MINUTE_MS),
      jwksCooldownMs: intFrom(env, "JWKS_COOLDOWN_MS", 30_000, 0, HOUR_MS),
      jwksCacheMaxAgeMs: intFrom(env, "JWKS_CACHE_MAX_AGE_MS", 600_000, 1_000, 24 * HOUR_MS),
      externalTokenMaxLifetimeSeconds: intFrom(env, "EXTERNAL_TOKEN_MAX_LIFETIME_SECONDS", 86_400, 60, 30 * 86_400),
    },
    rateLimits: rateLimitsFromEnv(env),
    principalBudget: {
      concurrency: intFrom(env, "RPC_CONCURRENCY_PER_PRINCIPAL", 4, 1, 10_000),
      queue: intFrom(env, "RPC_QUEUE_PER_PRINCIPAL", 64, 0, 100_000),
      rate: budgetFrom(env, "RPC_RATE_LIMIT_PER_PRINCIPAL", { points: 5_000, durationSeconds: 10 }),
    },
    jobs: {
      signingKeyReloadIntervalMs,
      credentialReconcileIntervalMs: intFrom(env, "CREDENTIAL_RECONCILE_INTERVAL_MS", 500, 10, HOUR_MS),
      credentialLogPruneIntervalMs: intFrom(env, "CREDENTIAL_LOG_PRUNE_INTERVAL_MS", 60_000, 10, 24 * HOUR_MS),
      auditFlushIntervalMs: intFrom(env, "AUDIT_FLUSH_INTERVAL_MS", 250, 10, MINUTE_MS),
      healthWatchIntervalMs: intFrom(env, "HEALTH_WATCH_INTERVAL_MS", 5_000, 10, HOUR_MS),
    },
    audit: {
      batchSize: intFrom(env, "AUDIT_BATCH_SIZE", 500, 1, 10_000),
      maxBuffered: intFrom(env, "AUDIT_MAX_BUFFERED", 100_000, 1, 10_000_000),
    },
    tracing: {
      otlpEndpoint:
        nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT) === undefined
          ? undefined
          : urlFrom(env, "OTEL_EXPORTER_OTLP_ENDPOINT", ""),
    },
    logLevel: nonEmpty(env.LOG_LEVEL) ?? "info",
    serverUrl,
    adminUrl,
    cliRequestTimeoutMs: intFrom(env, "CLI_REQUEST_TIMEOUT_MS", 30_000, 100, HOUR_MS),
  };
}
