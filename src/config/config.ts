import path from "node:path";
import { ConfigError } from "./config-error.js";
import type { AuditConfig } from "../domain/audit/model.js";
import type { TokenConfig } from "../domain/tokens/model.js";
import type { AdminListenerConfig, HttpConfig } from "../http/settings.js";
import type { TracingConfig } from "../observability/tracing.js";
import type { AdmissionConfig } from "../domain/shared/admission.js";
import type { PrincipalBudgetConfig } from "../rpc/interceptors/principal-budget-interceptor.js";
import type { DatabasePoolMode, RedisMode, StorageConfig } from "../store/settings.js";
import type { RateLimits } from "../domain/rate-limit/model.js";
import { budgetFrom, rateLimitsFromEnv, resourceServerRateLimitsFromEnv } from "./rate-limits.js";
import { secretSetting, type SecretSetting } from "./secret-settings.js";

export { ConfigError };

/**
 * Everything the service reads from its environment, parsed once at start and grouped by the
 * part of the service it tunes. Every timeout and interval is here, with its variable named in
 * the README's configuration table. Each group's type is declared once, by the layer that takes
 * the group whole (imported here as a type only: config/ stays a leaf at run time).
 */
export interface Config {
  readonly http: HttpConfig;
  readonly storage: StorageConfig;
  readonly secrets: SecretsConfig;
  readonly tokens: TokenConfig;
  readonly rateLimits: RateLimits;
  /** Resource servers' budgets at introspection (RESOURCE_SERVER_RATE_LIMIT), counted apart. */
  readonly resourceServerRateLimits: RateLimits;
  /** What one authenticated principal may ask of one instance per window. */
  readonly principalBudget: PrincipalBudgetConfig;
  /** Each TMC's, resource server's and the unauthenticated callers' share of one instance, and its adaptive limit. */
  readonly admission: AdmissionConfig;
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

/** Secret settings come from `NAME` or from the file named by `NAME_FILE` (secret-settings.ts). */
export interface SecretsConfig {
  /** Base64 of ≥ 32 bytes from which the secret pepper and encryption keys are derived; generated in dataDir when absent. */
  readonly masterKey: SecretSetting | undefined;
  /** Operator credential; generated in dataDir when absent. */
  readonly operatorToken: SecretSetting | undefined;
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
  /** Creates the audit trail's monthly partitions ahead and drops those past retention. */
  readonly auditPartitionIntervalMs: number;
  /** How often a gRPC health Watch re-evaluates the instance's health. */
  readonly healthWatchIntervalMs: number;
}

function intFrom(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function boolFrom(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = nonEmpty(env[name]);
  if (raw === undefined) return fallback;
  if (raw === "true") return true;
  if (raw === "false") return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
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
 * One of a setting's named values, `fallback` when unset. `choices` lists every value of the type
 * (a missing or extra one fails to compile).
 */
function choiceFrom<T extends string>(
  env: NodeJS.ProcessEnv,
  name: string,
  choices: Record<T, 0>,
  fallback: NoInfer<T>,
): T {
  const value = nonEmpty(env[name]) ?? fallback;
  if (!Object.hasOwn(choices, value)) {
    throw new ConfigError(`${name} must be one of ${Object.keys(choices).join(", ")}, got "${value}"`);
  }
  return value as T;
}

/**
 * True when `host` accepts connections from this machine only (127.0.0.0/8, ::1, localhost).
 * Beyond it, without TRUSTED_PROXIES, clients behind a shared proxy share one address budget.
 */
export function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * Reachable beyond loopback with no TRUSTED_PROXIES, every client behind a
 * balancer arrives with the balancer's address, so one client's failed logins lock out all of
 * them and the per-address HTTP/2 limits count them as one. A warning, not a refusal: directly
 * exposed (no proxy) is a valid deployment and the default HOST is 0.0.0.0, and the field does
 * the same (Fastify, Express and Keycloak trust no forwarding header by default and start).
 */
export function warnWithoutTrustedProxies(
  log: { warn(object: object, message: string): void },
  http: HttpConfig,
): void {
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

/**
 * ALLOWED_AUDIENCES still works (token requests may name its audiences), but a resource
 * server registered for an audience also gets credentials of its own to introspect the tokens
 * addressed to it. Said once at start-up, at warn.
 */
export function warnDeprecatedAllowedAudiences(
  log: { warn(object: object, message: string): void },
  tokens: Pick<TokenConfig, "allowedAudiences">,
): void {
  if (tokens.allowedAudiences.length === 0) return;
  log.warn(
    { setting: "ALLOWED_AUDIENCES", audiences: tokens.allowedAudiences },
    "ALLOWED_AUDIENCES is deprecated: register each audience as a resource server (resource-server create)",
  );
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
  // 5 s: longer than a balancer's fall × inter (HAProxy's 2 × 1 s, deploy/haproxy.cfg) plus a check's timeout.
  const shutdownDrainMs = intFrom(env, "SHUTDOWN_DRAIN_MS", 5_000, 0, 10 * MINUTE_MS);
  const issuer = urlFrom(env, "TOKEN_ISSUER", defaultIssuer(env, host, port));
  const { signingKeyReloadIntervalMs, signingKeyPrepublishSeconds } = signingKeyTimingsFrom(env);
  const { databaseQueryTimeoutMs, databaseLockTimeoutMs } = databaseTimeoutsFrom(env);
  const http = httpFrom(env, { host, port, admin, shutdownTimeoutMs, shutdownDrainMs });
  const storage = storageFrom(env, { databaseSchema, databaseQueryTimeoutMs, databaseLockTimeoutMs });
  return {
    http,
    storage,
    secrets: {
      masterKey: secretSetting(env, "MASTER_KEY"),
      operatorToken: secretSetting(env, "OPERATOR_TOKEN"),
    },
    tokens: tokensFrom(env, { issuer, signingKeyPrepublishSeconds }),
    rateLimits: rateLimitsFromEnv(env),
    resourceServerRateLimits: resourceServerRateLimitsFromEnv(env),
    principalBudget: { rate: budgetFrom(env, "RPC_RATE_LIMIT_PER_PRINCIPAL", { points: 5_000, durationSeconds: 10 }) },
    admission: admissionFrom(env, storage.databasePoolMax, http.requestDeadlineMs),
    jobs: jobsFrom(env, signingKeyReloadIntervalMs),
    audit: {
      batchSize: intFrom(env, "AUDIT_BATCH_SIZE", 500, 1, 10_000),
      maxBuffered: intFrom(env, "AUDIT_MAX_BUFFERED", 100_000, 1, 10_000_000),
      // 0: keep every month. Otherwise at least 1 whole month before the current one is kept.
      retentionMonths: intFrom(env, "AUDIT_RETENTION_MONTHS", 0, 0, 1_200),
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

/** The ADMISSION_* settings; a queued call must give up before half the request deadline (429/503, not 504). */
function admissionFrom(env: NodeJS.ProcessEnv, poolMax: number, requestDeadlineMs: number): AdmissionConfig {
  const queueWaitMs = intFrom(env, "ADMISSION_QUEUE_WAIT_MS", Math.min(1_000, requestDeadlineMs / 2), 0, HOUR_MS);
  if (queueWaitMs > requestDeadlineMs / 2)
    throw new ConfigError(
      `ADMISSION_QUEUE_WAIT_MS must be at most half of REQUEST_DEADLINE_MS (${requestDeadlineMs}), got ${queueWaitMs}`,
    );
  return {
    partyShare: intFrom(env, "ADMISSION_PARTY_SHARE_PERCENT", 50, 1, 100) / 100,
    unauthenticatedShare: intFrom(env, "ADMISSION_UNAUTHENTICATED_SHARE_PERCENT", 50, 1, 100) / 100,
    queuePerParty: intFrom(env, "ADMISSION_QUEUE_PER_PARTY", 64, 0, 100_000),
    queueWaitMs,
    limitMax: intFrom(env, "ADMISSION_LIMIT_MAX", 4 * poolMax, 1, 1_000_000),
  };
}

/** SIGNING_KEY_RELOAD_INTERVAL_MS and SIGNING_KEY_PREPUBLISH_SECONDS, which must exceed it. */
function signingKeyTimingsFrom(env: NodeJS.ProcessEnv) {
  const signingKeyReloadIntervalMs = intFrom(env, "SIGNING_KEY_RELOAD_INTERVAL_MS", MINUTE_MS, 10, HOUR_MS);
  // 15 minutes: above the 10 minutes JWKS caches commonly hold (jose's default, this service's
  // own JWKS_CACHE_MAX_AGE_MS), plus a reload interval and clock skew.
  const signingKeyPrepublishSeconds = intFrom(env, "SIGNING_KEY_PREPUBLISH_SECONDS", 900, 1, 7 * 86_400);
  if (signingKeyPrepublishSeconds * 1000 <= signingKeyReloadIntervalMs) {
    throw new ConfigError(
      `SIGNING_KEY_PREPUBLISH_SECONDS (${signingKeyPrepublishSeconds} s) must be longer than SIGNING_KEY_RELOAD_INTERVAL_MS (${signingKeyReloadIntervalMs} ms): an instance that missed the announcement must still load the next key before it signs`,
    );
  }
  return { signingKeyReloadIntervalMs, signingKeyPrepublishSeconds };
}

/** DATABASE_QUERY_TIMEOUT_MS and DATABASE_LOCK_TIMEOUT_MS, which must stay below it. */
function databaseTimeoutsFrom(env: NodeJS.ProcessEnv) {
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
  return { databaseQueryTimeoutMs, databaseLockTimeoutMs };
}

/** HTTP_*, HTTP2_*, BODY_LIMIT_BYTES, TRUSTED_PROXIES and the readiness, deadline and shutdown timeouts. */
function httpFrom(
  env: NodeJS.ProcessEnv,
  {
    host,
    port,
    admin,
    shutdownTimeoutMs,
    shutdownDrainMs,
  }: Pick<HttpConfig, "host" | "port" | "admin" | "shutdownTimeoutMs" | "shutdownDrainMs">,
): HttpConfig {
  return {
    host,
    port,
    admin,
    // 256 KiB: a batch introspection of 100 access tokens (about 0.7 KB each, more with `act`) fits.
    bodyLimitBytes: intFrom(env, "BODY_LIMIT_BYTES", 256 * 1024, 1024, 64 * 1024 * 1024),
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
    // Five addresses' worth of the per-address budget: many addresses resetting at once end their sessions.
    h2InstanceResetBurst: intFrom(env, "HTTP2_INSTANCE_RESET_BURST", 1_000, 1, 1_000_000),
    h2InstanceResetsPerSecond: intFrom(env, "HTTP2_INSTANCE_RESETS_PER_SECOND", 100, 1, 1_000_000),
    shutdownTimeoutMs,
    readinessTimeoutMs: intFrom(env, "READINESS_TIMEOUT_MS", 1_000, 10, MINUTE_MS),
    readinessIntervalMs: intFrom(env, "READINESS_INTERVAL_MS", 1_000, 10, MINUTE_MS),
    requestDeadlineMs: intFrom(env, "REQUEST_DEADLINE_MS", 5_000, 50, 10 * MINUTE_MS),
    shutdownDrainMs,
    shutdownDeadlineMs: intFrom(
      env,
      "SHUTDOWN_DEADLINE_MS",
      shutdownDrainMs + shutdownTimeoutMs + 5_000,
      0,
      30 * MINUTE_MS,
    ),
  };
}

/** DATABASE_*, DATA_DIR and REDIS_*. */
function storageFrom(
  env: NodeJS.ProcessEnv,
  {
    databaseSchema,
    databaseQueryTimeoutMs,
    databaseLockTimeoutMs,
  }: Pick<StorageConfig, "databaseSchema" | "databaseQueryTimeoutMs" | "databaseLockTimeoutMs">,
): StorageConfig {
  const databaseUrl = secretSetting(env, "DATABASE_URL")?.value;
  return {
    databaseUrl,
    ...migrationsFrom(env, databaseUrl),
    databasePoolMode: poolModeFrom(env),
    databaseSchema,
    dataDir: path.resolve(nonEmpty(env.DATA_DIR) ?? "./data"),
    ...poolSizesFrom(env),
    databaseAcquireTimeoutMs: intFrom(env, "DATABASE_ACQUIRE_TIMEOUT_MS", 500, 100, 10 * MINUTE_MS),
    databaseStartupWaitMs: intFrom(env, "DATABASE_STARTUP_WAIT_MS", 30_000, 0, HOUR_MS),
    ...redisConnectionFrom(env),
    redisConnectTimeoutMs: intFrom(env, "REDIS_CONNECT_TIMEOUT_MS", 2_000, 100, MINUTE_MS),
    redisReconnectMaxDelayMs: intFrom(env, "REDIS_RECONNECT_MAX_DELAY_MS", 2_000, 10, MINUTE_MS),
    redisCommandTimeoutMs: intFrom(env, "REDIS_COMMAND_TIMEOUT_MS", 500, 10, MINUTE_MS),
    redisBreakerFailures: intFrom(env, "REDIS_BREAKER_FAILURES", 3, 1, 1000),
    redisBreakerOpenMs: intFrom(env, "REDIS_BREAKER_OPEN_MS", 2_000, 10, 10 * MINUTE_MS),
    databaseQueryTimeoutMs,
    databaseLockTimeoutMs,
    databaseLockWaitMs: intFrom(env, "DATABASE_LOCK_WAIT_MS", 2_000, 0, 10 * MINUTE_MS),
    databaseJobsPoolMax: intFrom(env, "DATABASE_JOBS_POOL_MAX", 2, 1, 100),
  };
}

/** DATABASE_POOL_MAX and DATABASE_POOL_MIN, which cannot exceed it. */
function poolSizesFrom(env: NodeJS.ProcessEnv): Pick<StorageConfig, "databasePoolMax" | "databasePoolMin"> {
  const databasePoolMax = intFrom(env, "DATABASE_POOL_MAX", 10, 1, 1000);
  // Opened before the instance says ready, so its first requests do not wait for connections.
  const databasePoolMin = intFrom(env, "DATABASE_POOL_MIN", Math.min(4, databasePoolMax), 0, 1000);
  if (databasePoolMin > databasePoolMax) {
    throw new ConfigError(
      `DATABASE_POOL_MIN must not exceed DATABASE_POOL_MAX (${databasePoolMax}), got ${databasePoolMin}`,
    );
  }
  return { databasePoolMax, databasePoolMin };
}

/** DATABASE_DIRECT_URL, MIGRATE_ON_START and MIGRATION_*_TIMEOUT_MS. */
function migrationsFrom(
  env: NodeJS.ProcessEnv,
  databaseUrl: string | undefined,
): Pick<StorageConfig, "databaseDirectUrl" | "migrateOnStart" | "migrationWaitTimeoutMs" | "migrationLockTimeoutMs"> {
  const direct = secretSetting(env, "DATABASE_DIRECT_URL")?.value;
  // Never quoted in the message: like DATABASE_URL it may hold a password.
  if (direct !== undefined && databaseUrl === undefined) {
    throw new ConfigError("DATABASE_DIRECT_URL needs DATABASE_URL: the embedded database has no direct connection");
  }
  return {
    databaseDirectUrl: direct ?? databaseUrl,
    migrateOnStart: boolFrom(env, "MIGRATE_ON_START", true),
    // 10 minutes, as a Kubernetes rollout's default progress deadline: a migration job has that
    // long to finish before the instances waiting for it give up and say so.
    migrationWaitTimeoutMs: intFrom(env, "MIGRATION_WAIT_TIMEOUT_MS", 10 * MINUTE_MS, 0, 24 * HOUR_MS),
    migrationLockTimeoutMs: intFrom(env, "MIGRATION_LOCK_TIMEOUT_MS", 10 * MINUTE_MS, 0, 24 * HOUR_MS),
  };
}

/**
 * DATABASE_POOL_MODE. Said, not detected: a pooler answers like Postgres, and a wrong guess would
 * either be refused at connect or leave timeouts on connections other clients get next. In
 * transaction mode migrations and LISTEN need a session, so DATABASE_DIRECT_URL is required.
 */
function poolModeFrom(env: NodeJS.ProcessEnv): DatabasePoolMode {
  const mode = choiceFrom<DatabasePoolMode>(env, "DATABASE_POOL_MODE", { session: 0, transaction: 0 }, "session");
  if (mode === "transaction" && secretSetting(env, "DATABASE_DIRECT_URL") === undefined) {
    throw new ConfigError(
      "DATABASE_POOL_MODE=transaction needs DATABASE_DIRECT_URL: migrations and LISTEN need a server session the pooler cannot give",
    );
  }
  return mode;
}

/** REDIS_URL (or REDIS_URL_FILE), REDIS_MODE, REDIS_SENTINEL_NAME and REDIS_KEY_PREFIX. */
function redisConnectionFrom(
  env: NodeJS.ProcessEnv,
): Pick<StorageConfig, "redisUrl" | "redisMode" | "redisSentinelName" | "redisKeyPrefix"> {
  const redisUrl = secretSetting(env, "REDIS_URL")?.value;
  const redisMode = choiceFrom<RedisMode>(env, "REDIS_MODE", { standalone: 0, cluster: 0, sentinel: 0 }, "standalone");
  const urls = listFrom(redisUrl);
  // Never echo the value: it may carry a password.
  if (urls.some((url) => !/^rediss?:\/\/[^/]/.test(url) || !URL.canParse(url)))
    throw new ConfigError(
      "REDIS_URL must be redis:// or rediss:// URLs (a comma-separated list in cluster and sentinel mode)",
    );
  if (redisMode === "standalone" && urls.length > 1)
    throw new ConfigError("REDIS_URL names several servers: set REDIS_MODE=cluster or REDIS_MODE=sentinel");
  if (redisMode !== "standalone" && urls.length === 0) throw new ConfigError(`REDIS_MODE=${redisMode} needs REDIS_URL`);
  const redisSentinelName = nonEmpty(env.REDIS_SENTINEL_NAME);
  if (redisMode === "sentinel" && !redisSentinelName)
    throw new ConfigError("REDIS_MODE=sentinel needs REDIS_SENTINEL_NAME (the primary's name the sentinels know)");
  const redisKeyPrefix = nonEmpty(env.REDIS_KEY_PREFIX) ?? "auth:";
  // A brace would make the prefix the Redis Cluster hash tag and put every key in one slot.
  if (/[{}]/.test(redisKeyPrefix))
    throw new ConfigError(`REDIS_KEY_PREFIX must not contain { or }, got "${redisKeyPrefix}"`);
  return { redisUrl: urls.length > 0 ? urls.join(",") : undefined, redisMode, redisSentinelName, redisKeyPrefix };
}

/** TOKEN_*, *_TTL_SECONDS, CREDENTIAL_CACHE_SECONDS, JWKS_*, SIGNING_KEY_*, EXTERNAL_TOKEN_MAX_LIFETIME_SECONDS, CHANGE_STREAM_MAX_OPEN* and SSF_POLL_MAX_OPEN_PER_RESOURCE_SERVER. */
function tokensFrom(
  env: NodeJS.ProcessEnv,
  { issuer, signingKeyPrepublishSeconds }: Pick<TokenConfig, "issuer" | "signingKeyPrepublishSeconds">,
): TokenConfig {
  return {
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
    jwksCacheMinAgeMs: intFrom(env, "JWKS_CACHE_MIN_AGE_MS", 60_000, 1_000, 24 * HOUR_MS),
    jwksUriAllowHttpLoopback: boolFrom(env, "JWKS_URI_ALLOW_HTTP_LOOPBACK", false),
    externalTokenMaxLifetimeSeconds: intFrom(env, "EXTERNAL_TOKEN_MAX_LIFETIME_SECONDS", 86_400, 60, 30 * 86_400),
    changeStreamMaxOpen: intFrom(env, "CHANGE_STREAM_MAX_OPEN", 1_000, 1, 100_000),
    changeStreamMaxOpenPerResourceServer: intFrom(env, "CHANGE_STREAM_MAX_OPEN_PER_RESOURCE_SERVER", 50, 1, 100_000),
    ssfPollMaxOpenPerResourceServer: intFrom(env, "SSF_POLL_MAX_OPEN_PER_RESOURCE_SERVER", 10, 1, 10_000),
  };
}

/** The background jobs' *_INTERVAL_MS. */
function jobsFrom(env: NodeJS.ProcessEnv, signingKeyReloadIntervalMs: number): JobsConfig {
  return {
    signingKeyReloadIntervalMs,
    credentialReconcileIntervalMs: intFrom(env, "CREDENTIAL_RECONCILE_INTERVAL_MS", 500, 10, HOUR_MS),
    credentialLogPruneIntervalMs: intFrom(env, "CREDENTIAL_LOG_PRUNE_INTERVAL_MS", 60_000, 10, 24 * HOUR_MS),
    auditFlushIntervalMs: intFrom(env, "AUDIT_FLUSH_INTERVAL_MS", 250, 10, MINUTE_MS),
    auditPartitionIntervalMs: intFrom(env, "AUDIT_PARTITION_INTERVAL_MS", HOUR_MS, 10, 24 * HOUR_MS),
    healthWatchIntervalMs: intFrom(env, "HEALTH_WATCH_INTERVAL_MS", 5_000, 10, HOUR_MS),
  };
}
