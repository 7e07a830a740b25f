import path from "node:path";

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
    serverUrl: nonEmpty(env.SERVER_URL) ?? `http://${clientHost.includes(":") ? `[${clientHost}]` : clientHost}:${port}`,
    shutdownTimeoutMs: intFrom(env, "SHUTDOWN_TIMEOUT_MS", 10_000, 0, 600_000),
  };
}
