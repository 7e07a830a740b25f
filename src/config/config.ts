import path from "node:path";
import { rateLimitsFromEnv, type RateLimits } from "../domain/rate-limit/token-rate-limiter.js";

/** Everything the service reads from its environment, parsed once at start. */
export interface Config {
  readonly host: string;
  readonly port: number;
  /** Postgres connection string; absent selects the embedded PGlite database under dataDir. */
  readonly databaseUrl: string | undefined;
  /** Redis connection string; absent selects the in-process stand-in (single instance only). */
  readonly redisUrl: string | undefined;
  readonly dataDir: string;
  /** Postgres schema holding the service's tables (lets test runs and tenants of a server stay apart). */
  readonly databaseSchema: string;
  /** Operator credential from the environment; when absent one is generated and kept in dataDir. */
  readonly operatorToken: string | undefined;
  /** Base64 of 32 bytes from which the secret pepper and encryption keys are derived. */
  readonly masterKey: string | undefined;
  readonly bodyLimitBytes: number;
  readonly logLevel: string;
  /** Where the CLI finds a running server. */
  readonly serverUrl: string;
  readonly shutdownTimeoutMs: number;
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
  /** Proxies whose X-Forwarded-For is believed (addresses or CIDRs); empty: none. */
  readonly trustedProxies: readonly string[];
  /** Prefix of every Redis key this deployment writes. */
  readonly redisKeyPrefix: string;
  /** Token-endpoint budgets (TOKEN_RATE_LIMIT_PER_CLIENT, TOKEN_RATE_LIMIT_PER_ADDRESS, TOKEN_FAILURE_LIMIT). */
  readonly rateLimits: RateLimits;
}

export class ConfigError extends Error {}

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
  return (value ?? "").split(",").map((v) => v.trim()).filter((v) => v !== "");
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const host = nonEmpty(env.HOST) ?? "0.0.0.0";
  const port = intFrom(env, "PORT", 8080, 0, 65535);
  const databaseSchema = nonEmpty(env.DATABASE_SCHEMA) ?? "public";
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(databaseSchema)) {
    throw new ConfigError(`DATABASE_SCHEMA must be a lower-case SQL identifier, got "${databaseSchema}"`);
  }
  const clientHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  const serverUrl = nonEmpty(env.SERVER_URL) ?? `http://${clientHost.includes(":") ? `[${clientHost}]` : clientHost}:${port}`;
  const issuer = urlFrom(env, "TOKEN_ISSUER", serverUrl.replace(/^http:\/\/127\.0\.0\.1/, "http://localhost"));
  const audience = urlFrom(env, "TOKEN_AUDIENCE", `${issuer}/v2`);
  return {
    host,
    port,
    databaseUrl: nonEmpty(env.DATABASE_URL),
    redisUrl: nonEmpty(env.REDIS_URL),
    dataDir: path.resolve(nonEmpty(env.DATA_DIR) ?? "./data"),
    databaseSchema,
    operatorToken: nonEmpty(env.OPERATOR_TOKEN),
    masterKey: nonEmpty(env.MASTER_KEY),
    bodyLimitBytes: intFrom(env, "BODY_LIMIT_BYTES", 64 * 1024, 1024, 64 * 1024 * 1024),
    logLevel: nonEmpty(env.LOG_LEVEL) ?? "info",
    serverUrl,
    shutdownTimeoutMs: intFrom(env, "SHUTDOWN_TIMEOUT_MS", 10_000, 0, 600_000),
    issuer,
    audience,
    allowedAudiences: listFrom(env.ALLOWED_AUDIENCES),
    accessTokenTtlSeconds: intFrom(env, "ACCESS_TOKEN_TTL_SECONDS", 3600, 60, 86_400),
    legacyTokenTtlSeconds: intFrom(env, "LEGACY_TOKEN_TTL_SECONDS", 86_400, 60, 86_400),
    refreshTokenTtlSeconds: intFrom(env, "REFRESH_TOKEN_TTL_SECONDS", 30 * 86_400, 300, 365 * 86_400),
    trustedProxies: listFrom(env.TRUSTED_PROXIES),
    redisKeyPrefix: nonEmpty(env.REDIS_KEY_PREFIX) ?? "auth:",
    rateLimits: rateLimitsFromEnv(env),
  };
}
