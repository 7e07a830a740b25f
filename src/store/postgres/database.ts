import fs from "node:fs";
import path from "node:path";
import knexPkg, { type Knex } from "knex";
import ClientPgLite from "knex-pglite";
import { makeDataDir } from "../data-dir.js";
import { silentLogger, type Logger } from "../../domain/shared/observability.js";
import type { StorageConfig } from "../settings.js";
import { withMigrationLock, type LockConnection } from "./migration-lock.js";
import { migrationSource } from "./migrations/index.js";
import { PgClient } from "./pg-client.js";
import { setLocalOnBegin } from "./transaction-settings.js";
import { SCHEMA_PARAM } from "./unit-of-work.js";

const { knex } = knexPkg;

export type DatabaseKind = "postgres" | "pglite";

export interface Database {
  readonly kind: DatabaseKind;
  /** The pool requests use. */
  readonly db: Knex;
  /**
   * The pool background jobs use (credential reconcile, audit flush, key reload, log prune): a
   * small one of its own on Postgres, so requests that fill theirs cannot stop the jobs. PGlite
   * has a single connection, so there it is the same handle as `db`.
   */
  readonly jobsDb: Knex;
  readonly schema: string;
  /**
   * Applies pending migrations; returns the names it applied. Safe when several instances start
   * at once: one migrates, the others wait for it (logging to `logger`), then find nothing to do.
   */
  migrate(logger?: Logger): Promise<string[]>;
  /** The migrations this version knows that the database has not applied yet, in order. */
  pendingMigrations(): Promise<string[]>;
  ping(): Promise<boolean>;
  /**
   * Opens the request pool's minimum connections (DATABASE_POOL_MIN) and waits for them, so an
   * instance says ready with connections to serve on; fails like a query when they cannot open.
   */
  warmUp(): Promise<void>;
  close(): Promise<void>;
}

/** The storage settings a database opens with; the pool sizes and timeouts default for tests and tools. */
export type DatabaseOptions = Pick<
  StorageConfig,
  "databaseUrl" | "dataDir" | "databaseSchema" | "migrationLockTimeoutMs"
> &
  Partial<
    Pick<
      StorageConfig,
      | "databaseDirectUrl"
      | "databasePoolMax"
      | "databasePoolMin"
      | "databaseAcquireTimeoutMs"
      | "databaseQueryTimeoutMs"
      | "databaseLockTimeoutMs"
      | "databaseJobsPoolMax"
      | "databasePoolMode"
    >
  >;

/**
 * Knex prints its warnings (a pool's "Acquire connection" errors under a stall) with console.log,
 * onto stdout, where the CLI writes its JSON answer: they go to stderr instead.
 */
const KNEX_LOG = {
  warn: (message: unknown) => process.stderr.write(`knex: ${String(message)}\n`),
  error: (message: unknown) => process.stderr.write(`knex: ${String(message)}\n`),
  deprecate: (message: unknown) => process.stderr.write(`knex: ${String(message)}\n`),
  debug: () => undefined,
};

/** The part of Knex's (untyped) client that lends one driver connection (pg's or PGlite's) out and back. */
type LendingClient = {
  acquireConnection(): Promise<LockConnection>;
  releaseConnection(connection: unknown): Promise<void>;
};

export function openDatabase(options: DatabaseOptions): Database {
  return options.databaseUrl ? openPostgres(options.databaseUrl, options) : openPglite(options.dataDir);
}

function openPostgres(connectionString: string, options: DatabaseOptions): Database {
  const {
    databaseSchema: schema,
    databasePoolMax: poolMax = 10,
    databasePoolMin: poolMin = 0,
    databaseLockTimeoutMs: lockTimeoutMs,
    databaseJobsPoolMax: jobsPoolMax = 2,
    // Migrations and LISTEN need a real session: a transaction-mode pooler cannot carry them.
    databaseDirectUrl: directUrl = connectionString,
    migrationLockTimeoutMs,
  } = options;
  const connect = (timeouts: RequestTimeouts | undefined, max: number, url = connectionString, min = 0) =>
    connectPostgres(url, options, timeouts, max, min);
  const db = connect({ lockTimeoutMs }, poolMax, connectionString, poolMin);
  // The jobs take no row locks that requests wait on, and a job may wait its turn for one.
  const jobsDb = connect({}, jobsPoolMax);
  return {
    kind: "postgres",
    db,
    jobsDb,
    schema,
    async migrate(logger = silentLogger) {
      // Migrations run on their own short-lived pool on the direct URL, without the request
      // timeouts: waiting for another instance's migration, or building an index, may rightly take
      // longer than a request. One connection holds the lock, the others migrate.
      const migrator = connect(undefined, 3, directUrl);
      try {
        return await migrateUnderLock(migrator, schema, { timeoutMs: migrationLockTimeoutMs, logger });
      } finally {
        await migrator.destroy();
      }
    },
    pendingMigrations: () => pendingMigrations(db, schema),
    ping: () => pingDatabase(db),
    warmUp: () => warmUpPool(db, poolMin),
    close: async () => {
      await Promise.all([db.destroy(), jobsDb.destroy()]);
    },
  };
}

/** A pool's request timeouts: the query and acquire timeouts of the options, and a lock timeout if given. */
interface RequestTimeouts {
  readonly lockTimeoutMs?: number;
}

/**
 * A pool of at most `max` connections; without timeouts (the migrator) a query may take as long as
 * it needs. The request and jobs pools name their schema in the SQL (knexOf, tableIn), whatever
 * server connection a pooler lends them; the migrator, always on a direct session, uses search_path.
 */
function connectPostgres(
  connectionString: string,
  options: DatabaseOptions,
  timeouts: RequestTimeouts | undefined,
  max: number,
  min: number,
): Knex {
  const {
    databaseSchema: schema,
    databaseAcquireTimeoutMs: acquireTimeoutMs = 10_000,
    databaseQueryTimeoutMs: queryTimeoutMs = 30_000,
    databasePoolMode: poolMode = "session",
  } = options;
  // The server-side timeouts. A request waiting for a row lock holds a pooled connection while it
  // waits: lock_timeout ends the wait (55P03, answered 409 RESOURCE_BUSY with Retry-After) well
  // before statement_timeout would, so one busy row cannot park the pool.
  const serverTimeouts = {
    ...(timeouts ? { statement_timeout: queryTimeoutMs } : {}),
    ...(timeouts?.lockTimeoutMs ? { lock_timeout: timeouts.lockTimeoutMs } : {}),
  };
  // A transaction-mode pooler refuses startup parameters: there they are set per transaction.
  const perSession = poolMode === "session";
  const db = knex({
    // Knex's "pg" dialect, closing a new connection whose setup queries fail (pg-client.ts).
    client: PgClient,
    log: KNEX_LOG,
    connection: {
      connectionString,
      application_name: "auth-api-user-service",
      keepAlive: true,
      // A stalled server cannot enforce its own timeout: the client gives up too.
      ...(timeouts ? { query_timeout: queryTimeoutMs, connectionTimeoutMillis: acquireTimeoutMs } : {}),
      ...(perSession ? serverTimeouts : {}),
    },
    ...(timeouts ? { userParams: { [SCHEMA_PARAM]: schema } } : {}),
    // Set once per connection, so it holds only on a session of its own: the migrator's (the
    // direct URL's), and in session mode raw SQL of tools and tests; never behind a transaction pooler.
    ...(perSession || !timeouts ? { searchPath: [schema] } : {}),
    // Tarn keeps `min` connections past their idle timeout, but opens them only on demand: warmUp does.
    pool: { min, max, ...(timeouts ? {} : { afterCreate: exemptFromIdleTimeout }) },
    acquireConnectionTimeout: timeouts ? acquireTimeoutMs : 60_000,
  });
  if (!perSession) setLocalOnBegin(db, serverTimeouts);
  return db;
}

/**
 * The migrator's sessions are exempt from a server-wide idle_in_transaction_session_timeout: a
 * migration's transaction idles between its statements (on a busy host, past a strict server's
 * 100 ms: the CI failure of a fresh schema's migrations), and the lock's transaction idles while
 * they all run. A SET after connecting, since a startup parameter loses to `options` in the URL.
 */
function exemptFromIdleTimeout(
  connection: CallbackConnection,
  done: (error: Error | null, connection: unknown) => void,
) {
  connection.query("set idle_in_transaction_session_timeout = 0", (error) => done(error, connection));
}

/** A new pg connection as Knex's pool hands it to `afterCreate`. */
interface CallbackConnection {
  query(sql: string, callback: (error: Error | null) => void): void;
}

/**
 * Knex's own lock table makes a second concurrent migrator fail instead of wait, and CREATE SCHEMA
 * IF NOT EXISTS can race too; the migration lock (migration-lock.ts), held on one dedicated
 * connection, makes every other instance wait, then find nothing left to do.
 */
async function migrateUnderLock(
  migrator: Knex,
  schema: string,
  lockOptions: { timeoutMs: number; logger: Logger },
): Promise<string[]> {
  const client = migrator.client as LendingClient;
  const connection = await client.acquireConnection();
  try {
    return await withMigrationLock(connection, schema, lockOptions, async () => {
      // On another connection, committed at once: the lock's transaction stays empty.
      await migrator.raw(`create schema if not exists "${schema}"`);
      return runMigrations(migrator, schema);
    });
  } finally {
    await client.releaseConnection(connection);
  }
}

/** Where the embedded database of a DATA_DIR lives. */
export function embeddedDatabaseDirectory(dataDir: string): string {
  return path.join(dataDir, "pglite");
}

/** Whether DATA_DIR holds an embedded database already (PGlite writes PG_VERSION when it creates one). */
export function embeddedDatabaseExists(dataDir: string): boolean {
  return fs.existsSync(path.join(embeddedDatabaseDirectory(dataDir), "PG_VERSION"));
}

function openPglite(dataDir: string): Database {
  const directory = embeddedDatabaseDirectory(dataDir);
  makeDataDir(dataDir);
  const db = knex({
    client: ClientPgLite,
    dialect: "postgres",
    log: KNEX_LOG,
    connection: { filename: directory },
  } as Knex.Config);
  return {
    kind: "pglite",
    db,
    jobsDb: db,
    schema: "public",
    // One process owns an embedded database (see ownDataDir), so no cross-process lock is needed.
    migrate: () => runMigrations(db, "public"),
    pendingMigrations: () => pendingMigrations(db, "public"),
    ping: () => pingDatabase(db),
    // One connection, opened by the migrations already.
    warmUp: async () => undefined,
    close: () => db.destroy(),
  };
}

async function runMigrations(db: Knex, schema: string): Promise<string[]> {
  const [, applied] = (await db.migrate.latest({ migrationSource, schemaName: schema })) as [number, string[]];
  return applied;
}

async function pendingMigrations(db: Knex, schema: string): Promise<string[]> {
  const known = await migrationSource.getMigrations([]);
  if (!(await db.schema.withSchema(schema).hasTable("knex_migrations"))) return known;
  const rows = (await db.withSchema(schema).from("knex_migrations").select("name")) as Array<{ name: string }>;
  const applied = new Set(rows.map((row) => row.name));
  return known.filter((name) => !applied.has(name));
}

/** Holds `count` pooled connections at once (opening those the pool lacks), then gives them back. */
async function warmUpPool(db: Knex, count: number): Promise<void> {
  const client = db.client as LendingClient;
  const held = await Promise.allSettled(Array.from({ length: count }, () => client.acquireConnection()));
  await Promise.all(
    held.flatMap((result) => (result.status === "fulfilled" ? [client.releaseConnection(result.value)] : [])),
  );
  const failed = held.find((result) => result.status === "rejected");
  if (failed) throw failed.reason;
}

async function pingDatabase(db: Knex): Promise<boolean> {
  try {
    await db.raw("select 1");
    return true;
  } catch {
    return false;
  }
}
