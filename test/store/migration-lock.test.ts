// The migration lock (src/store/postgres/migration-lock.ts) and DATABASE_DIRECT_URL on the
// shared Postgres, each test in a schema of its own (the lock is per schema, so other test runs
// never wait for these). Instances are Database objects as createService opens them.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import { loadConfig } from "../../src/config/config.js";
import type { Logger } from "../../src/domain/shared/observability.js";
import { openChangeFeed } from "../../src/store/postgres/change-feed.js";
import type { Database, DatabaseOptions } from "../../src/store/postgres/database.js";
import {
  MigrationLockTimeoutError,
  schemaLockKey,
  withMigrationLock,
} from "../../src/store/postgres/migration-lock.js";
import { credentialChangeChannel } from "../../src/store/postgres/repositories/credential-change-log.js";
import { migrationSource } from "../../src/store/postgres/migrations/index.js";
import { isPostgres, newStorage, serviceEnv, TEST_DATABASE_URL, type Storage } from "../helpers/backend.js";
import { startPrivatePostgres, type PrivatePostgres } from "../helpers/private-postgres.js";
import { dropStorage } from "../helpers/service.js";
import { openStorageDatabase } from "../helpers/storage-database.js";
import { waitFor } from "../helpers/wait.js";

/** A port nothing listens on: a DATABASE_URL there cannot be what a working call used. */
const UNREACHABLE_URL = "postgres://postgres@127.0.0.1:1/test";
const WAITING = "waiting for another instance's migration";

const opened: Database[] = [];
let privateServer: PrivatePostgres | undefined;
const clients: pg.Client[] = [];
const storages: Storage[] = [];

after(async () => {
  for (const database of opened) await database.close().catch(() => {});
  for (const client of clients) await client.end().catch(() => {});
  for (const storage of storages) await dropStorage(storage);
  privateServer?.stop();
});

/** The private server (started once, for the tests that kill a backend or need a database of their own). */
async function privateUrl(): Promise<string> {
  privateServer ??= await startPrivatePostgres();
  return privateServer.url;
}

function freshSchema(): string {
  const storage = newStorage();
  storages.push(storage);
  return storage.schema!;
}

function open(schema: string, options: Partial<DatabaseOptions> = {}): Database {
  // A schema by name: freshSchema's, or one on the private server (options.databaseUrl).
  const database = openStorageDatabase({ env: {}, dataDir: "", schema }, options);
  opened.push(database);
  return database;
}

async function connect(url = TEST_DATABASE_URL): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {}); // a killed backend: the query in flight rejects, which is what tests look at
  clients.push(client);
  await client.connect();
  return client;
}

/** A Logger that keeps what it is told. */
function recordingLogger(): Logger & { lines: Array<{ level: string; message: string; fields: object }> } {
  const lines: Array<{ level: string; message: string; fields: object }> = [];
  const record = (level: string) => (fields: object, message: string) => lines.push({ level, message, fields });
  return { lines, info: record("info"), warn: record("warn"), error: record("error"), debug: record("debug") };
}

const allMigrations = async () => migrationSource.getMigrations([]);

/** Holds the schema's migration lock on a connection of its own (another instance mid-migration) until released. */
async function holdLock(schema: string, url = TEST_DATABASE_URL) {
  const client = await connect(url);
  const [{ pid }] = (await client.query<{ pid: number }>("select pg_backend_pid() as pid")).rows;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let acquired!: () => void;
  const holding = new Promise<void>((resolve) => (acquired = resolve));
  const done = withMigrationLock(client, schema, { timeoutMs: 10_000, logger: recordingLogger() }, async () => {
    acquired();
    await released;
  });
  done.catch(() => {}); // a killed holder rejects; the tests look at the waiter
  await holding;
  return { pid, release, done, client };
}

describe("the migration lock", { skip: !isPostgres && "Postgres backend only (one process owns PGlite)" }, () => {
  it("two instances migrating at once: one migrates, the other logs that it waits, then finds nothing to do", async () => {
    const schema = freshSchema();
    const loggers = [recordingLogger(), recordingLogger()];
    const [first, second] = [open(schema), open(schema)];
    const results = await Promise.all([first.migrate(loggers[0]), second.migrate(loggers[1])]);
    assert.deepEqual(results.map((applied) => applied.length).sort(), [0, (await allMigrations()).length]);
    const waiter = results[0].length === 0 ? 0 : 1;
    const waited = loggers[waiter].lines.filter((line) => line.message.startsWith(WAITING));
    assert.ok(waited.length >= 1, JSON.stringify(loggers[waiter].lines));
    assert.equal(waited[0].level, "warn");
    assert.equal(typeof (waited[0].fields as { waitedMs?: unknown }).waitedMs, "number");
    assert.deepEqual(
      loggers[1 - waiter].lines.filter((line) => line.message.startsWith(WAITING)),
      [],
      "the one that migrated never waited",
    );
    assert.deepEqual(await first.pendingMigrations(), []);
  });

  it("waits at most MIGRATION_LOCK_TIMEOUT_MS, then fails with a clear error", async () => {
    const schema = freshSchema();
    const holder = await holdLock(schema);
    const logger = recordingLogger();
    const started = Date.now();
    await assert.rejects(open(schema, { migrationLockTimeoutMs: 600 }).migrate(logger), (error: Error) => {
      assert.ok(error instanceof MigrationLockTimeoutError);
      assert.match(error.message, /gave up waiting for another instance's migration of schema "t_.*" after \d+ ms/);
      assert.match(error.message, /MIGRATION_LOCK_TIMEOUT_MS/);
      return true;
    });
    assert.ok(Date.now() - started >= 600);
    assert.ok(logger.lines.some((line) => line.message.startsWith(WAITING)));
    holder.release();
    await holder.done;
    assert.equal((await open(schema).pendingMigrations()).length, (await allMigrations()).length, "nothing applied");
  });

  it("the lock holder's backend killed: the lock ends with it, and the waiter migrates", async () => {
    const url = await privateUrl();
    const schema = "killed_holder";
    const holder = await holdLock(schema, url);
    const logger = recordingLogger();
    const migrating = open(schema, { databaseUrl: url }).migrate(logger);
    await waitFor("the waiter's log line", () => logger.lines.some((line) => line.message.startsWith(WAITING)));
    const admin = await connect(url);
    // On the private server: the backend this test opened itself (holdLock's client).
    const [{ killed }] = (
      await admin.query<{ killed: boolean }>("select pg_terminate_backend($1) as killed", [holder.pid])
    ).rows;
    assert.equal(killed, true);
    assert.deepEqual(await migrating, await allMigrations());
    holder.release();
    await assert.rejects(holder.done, "the holder's transaction died with its connection");
  });

  it("a migration that fails leaves the lock released: the next migrate takes it at once", async () => {
    const schema = freshSchema();
    const admin = await connect();
    // A table in the way of the initial migration's CREATE TABLE.
    await admin.query(`create schema "${schema}"; create table "${schema}".tmcs (x int)`);
    await assert.rejects(open(schema).migrate(), /already exists/);
    const [{ held }] = (
      await admin.query<{ held: string }>(
        // This schema's lock only: other test files migrate their own schemas at the same time.
        "select count(*) as held from pg_locks where locktype = 'advisory' and classid = 727501113 and objid = $1",
        [schemaLockKey(schema) >>> 0], // pg_locks shows the signed key as an unsigned oid
      )
    ).rows;
    assert.equal(Number(held), 0, "no migration lock is held");
    await admin.query(`drop table "${schema}".tmcs`);
    const logger = recordingLogger();
    assert.deepEqual(await open(schema, { migrationLockTimeoutMs: 0 }).migrate(logger), await allMigrations());
    assert.deepEqual(logger.lines, [], "no wait");
  });

  it("a server's idle_in_transaction_session_timeout ends neither the lock nor a migration while the migrations run", async () => {
    const schema = freshSchema();
    // 100 ms: well below the time a fresh schema's migrations take, during which the lock's
    // transaction idles; on a busy host a migration's own transaction idled past it between two
    // statements too (CI: "terminating connection due to idle-in-transaction timeout").
    const url = new URL(TEST_DATABASE_URL);
    url.searchParams.set("options", "-c idle_in_transaction_session_timeout=100");
    const database = open(schema, { databaseDirectUrl: url.toString() });
    assert.deepEqual(await database.migrate(), await allMigrations());
    assert.deepEqual(await database.pendingMigrations(), []);
  });

  it("CREATE INDEX CONCURRENTLY completes while the lock's transaction is open (it holds no snapshot)", async () => {
    // On the private server: the index build waits for every snapshot of its database, other test runs' too.
    const url = await privateUrl();
    const schema = "index_build";
    const ddl = await connect(url);
    await ddl.query(`create schema "${schema}"; create table "${schema}".things (id int)`);
    await ddl.query("set statement_timeout = 5000");
    const createIndex = (name: string) => ddl.query(`create index concurrently ${name} on "${schema}".things (id)`);
    const holder = await holdLock(schema, url);
    await createIndex("things_by_id"); // with the lock held: no wait
    holder.release();
    await holder.done;

    // The test can fail: a transaction that keeps a snapshot (repeatable read, after a read) blocks the build.
    const snapshot = await connect(url);
    await snapshot.query("begin isolation level repeatable read");
    await snapshot.query("select 1");
    await assert.rejects(createIndex("things_by_id_2"), (error: { code?: string }) => error.code === "57014");
    await snapshot.query("rollback");
  });
});

describe("DATABASE_DIRECT_URL", { skip: !isPostgres && "Postgres backend only" }, () => {
  it("migrations go to it, not to DATABASE_URL", async () => {
    const schema = freshSchema();
    const viaDirect = open(schema, { databaseUrl: UNREACHABLE_URL, databaseDirectUrl: TEST_DATABASE_URL });
    assert.deepEqual(await viaDirect.migrate(), await allMigrations());
    const directUnreachable = open(freshSchema(), { databaseDirectUrl: UNREACHABLE_URL });
    await assert.rejects(directUnreachable.migrate(), /ECONNREFUSED/);
  });

  it("the change feed LISTENs on it, not on DATABASE_URL", async () => {
    const schema = freshSchema();
    const config = loadConfig(
      serviceEnv(storages.at(-1)!, { DATABASE_URL: UNREACHABLE_URL, DATABASE_DIRECT_URL: TEST_DATABASE_URL }),
    );
    assert.equal(config.storage.databaseSchema, schema);
    const feed = openChangeFeed(config.storage, recordingLogger());
    const heard: number[] = [];
    feed.start(
      (seq) => heard.push(seq),
      async () => {},
    );
    try {
      await waitFor("the feed connected", () => feed.connected);
      const admin = await connect();
      await admin.query("select pg_notify($1, '42')", [credentialChangeChannel(schema)]);
      await waitFor("the notification", () => heard.includes(42));
    } finally {
      await feed.stop();
    }
  });
});
