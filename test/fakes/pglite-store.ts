import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after } from "node:test";
import { PGlite } from "@electric-sql/pglite";
import knexPkg, { type Knex } from "knex";
import ClientPgLite from "knex-pglite";
import type { Tx, UnitOfWork } from "../../src/domain/shared/unit-of-work.js";
import { migrationSource } from "../../src/store/postgres/migrations/index.js";
import { postgresRepositories, type Repositories } from "../../src/store/postgres/repositories/index.js";
import { credentialChangeChannel } from "../../src/store/postgres/repositories/credential-change-log.js";
import { signingKeyChangeChannel } from "../../src/store/postgres/repositories/signing-key-repository.js";
import { KnexUnitOfWork } from "../../src/store/postgres/unit-of-work.js";
import { SIGNING_KEY_CHANGE, type NotificationSource } from "./change-feed.js";
import { instrumented, type Instrumented } from "./instrumented-repositories.js";

const { knex } = knexPkg;

/**
 * The real Postgres repositories over one in-memory PGlite per test process, for the fast tier
 * (test/unit): migrated once (or loaded from a migrated snapshot a previous process left in
 * os.tmpdir, keyed by the migrations' source), then emptied between tests with `reset()`.
 *
 * PGlite has one connection: a test that needs two transactions open at once belongs in
 * test/store, which runs on real Postgres as well.
 */
export interface PgliteStore {
  readonly pglite: PGlite;
  readonly db: Knex;
  readonly uow: KnexUnitOfWork;
  readonly repositories: Repositories;
  /** PGlite's NOTIFYs, for FakeChangeFeed (signing-key changes as SIGNING_KEY_CHANGE). */
  readonly notifications: NotificationSource;
  /** Empties every table and restarts every sequence (migrations stay applied). */
  reset(): Promise<void>;
}

/** One test's view: the process's store, emptied, with freshly instrumented repositories. */
export interface PgliteTestStore extends Instrumented<Repositories> {
  readonly pglite: PGlite;
  readonly db: Knex;
  readonly uow: RecordingUnitOfWork;
  readonly notifications: NotificationSource;
  /** The payloads of the NOTIFYs delivered since the test's store was taken (signing-key changes as SIGNING_KEY_CHANGE). */
  readonly notified: string[];
}

/** The store emptied, and repositories that record (and can fail or hold) this test's calls. */
export async function pgliteTestStore(): Promise<PgliteTestStore> {
  const store = await emptyPgliteStore();
  const notified: string[] = [];
  const stop = store.notifications.listen((payload) => notified.push(payload));
  stopHearing?.();
  stopHearing = stop;
  return {
    notified,
    ...instrumented(postgresRepositories("public")),
    pglite: store.pglite,
    db: store.db,
    uow: new RecordingUnitOfWork(store.uow),
    notifications: store.notifications,
  };
}

/** The real unit of work, recording how each transaction it ran ended; its next commit can be made to fail. */
export class RecordingUnitOfWork implements UnitOfWork {
  readonly transactions: Array<{ outcome: "open" | "committed" | "rolled back" }> = [];
  private commitFailure: { error: unknown } | undefined;

  constructor(private readonly inner: UnitOfWork) {}

  /**
   * The next transaction's work runs to its end, then its commit fails with `error`: the
   * transaction rolls back (nothing it wrote stays, no NOTIFY it sent is delivered) and the
   * caller gets `error`, as when the connection drops at COMMIT.
   */
  failNextCommit(error: unknown): void {
    this.commitFailure = { error };
  }

  get direct(): Tx {
    return this.inner.direct;
  }

  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    const entry: { outcome: "open" | "committed" | "rolled back" } = { outcome: "open" };
    this.transactions.push(entry);
    try {
      const failure = this.commitFailure;
      this.commitFailure = undefined;
      const result = await this.inner.transaction(async (tx) => {
        const done = await work(tx);
        if (failure) throw failure.error;
        return done;
      });
      entry.outcome = "committed";
      return result;
    } catch (error) {
      entry.outcome = "rolled back";
      throw error;
    }
  }
}

let opened: Promise<PgliteStore> | undefined;
/** The previous test store's `notified` listener (one test store at a time per process). */
let stopHearing: (() => void) | undefined;

// Knex's pool keeps the process alive: the file's tests end, then the database closes. Importing
// this module (statically, as every test file using it does) registers the hook on the root test.
after(async () => {
  if (opened) await (await opened).db.destroy();
});

/** The process's store, opened on first use; `reset()` it before each test that writes. */
export function pgliteStore(): Promise<PgliteStore> {
  opened ??= open();
  return opened;
}

/** A store that starts empty: the process's one, reset. */
export async function emptyPgliteStore(): Promise<PgliteStore> {
  const store = await pgliteStore();
  await store.reset();
  return store;
}

async function open(): Promise<PgliteStore> {
  const snapshot = snapshotPath();
  let pglite: PGlite;
  let fresh = false;
  if (fs.existsSync(snapshot)) {
    pglite = await PGlite.create({ loadDataDir: new Blob([fs.readFileSync(snapshot)]) });
  } else {
    pglite = await PGlite.create();
    fresh = true;
  }
  const db = knex({ client: ClientPgLite, dialect: "postgres", connection: { pglite } } as Knex.Config);
  if (fresh) {
    await db.migrate.latest({ migrationSource, schemaName: "public" });
    await saveSnapshot(pglite, snapshot);
  }
  const emptying = await emptyingScript(db);
  const signingKeyChannel = signingKeyChangeChannel("public");
  // One session: LISTEN once, as each instance's PostgresChangeFeed does on its own connection.
  await pglite.exec(`listen "${credentialChangeChannel("public")}"; listen "${signingKeyChannel}"`);
  const store: PgliteStore = {
    pglite,
    db,
    uow: new KnexUnitOfWork(db),
    repositories: postgresRepositories("public"),
    notifications: {
      listen: (listener) =>
        pglite.onNotification((channel, payload) =>
          listener(channel === signingKeyChannel ? SIGNING_KEY_CHANGE : payload),
        ),
    },
    reset: async () => {
      await pglite.exec(emptying);
    },
  };
  return store;
}

/**
 * DELETE from every table (foreign-key triggers off while it runs) and every sequence back to 1:
 * on tables of a few rows this is several times cheaper than TRUNCATE, which makes new files.
 */
async function emptyingScript(db: Knex): Promise<string> {
  const tables = (await db("pg_tables")
    .where({ schemaname: "public" })
    .whereNotIn("tablename", ["knex_migrations", "knex_migrations_lock"])
    .orderBy("tablename")
    .pluck("tablename")) as string[];
  const sequences = (await db("pg_sequences").where({ schemaname: "public" }).pluck("sequencename")) as string[];
  return [
    "set session_replication_role = replica",
    ...tables.map((t) => `delete from "${t}"`),
    ...sequences.filter((s) => !s.startsWith("knex_")).map((s) => `select setval('"${s}"', 1, false)`),
    "set session_replication_role = origin",
  ].join(";\n");
}

/** The snapshot of a freshly migrated database, named after PGlite's version and the migrations' source files. */
function snapshotPath(): string {
  const directory = path.join(import.meta.dirname, "../../src/store/postgres/migrations");
  const hash = crypto.createHash("sha256");
  // A snapshot is PGlite's data directory: another PGlite version may not read it.
  hash.update(fs.readFileSync(path.join(import.meta.dirname, "../../node_modules/@electric-sql/pglite/package.json")));
  for (const name of fs.readdirSync(directory).sort()) {
    hash.update(name);
    hash.update(fs.readFileSync(path.join(directory, name)));
  }
  return path.join(os.tmpdir(), `auth-fast-tier-pglite-${hash.digest("hex").slice(0, 16)}.tar.gz`);
}

/** Written beside, then renamed: processes starting together never read half a snapshot. */
async function saveSnapshot(pglite: PGlite, target: string): Promise<void> {
  const dump = await pglite.dumpDataDir("gzip");
  const partial = `${target}.${process.pid}.partial`;
  fs.writeFileSync(partial, Buffer.from(await dump.arrayBuffer()));
  fs.renameSync(partial, target);
}
