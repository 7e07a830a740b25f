import { createRequire } from "node:module";
import type { Knex } from "knex";

/** The pg connection knex's setup queries run on, as far as closing it goes. */
interface PgConnection {
  end(): Promise<void>;
}

/** The part of knex's (untyped) Postgres dialect that runs a new connection's setup queries. */
interface KnexPgDialect extends Knex.Client {
  checkVersion(connection: PgConnection): Promise<string>;
  setSchemaSearchPath(connection: PgConnection, searchPath?: string | readonly string[]): Promise<boolean>;
}

const require = createRequire(import.meta.url);
// The dialect `client: "pg"` names; knex exports no types for it (knex-pglite extends it too).
const KnexPgClient = require("knex/lib/dialects/postgres/index.js") as Omit<typeof Knex.Client, "prototype"> &
  (new (config: Knex.Config) => KnexPgDialect);

/**
 * Knex's Postgres dialect, except that a new connection whose setup query fails is closed.
 *
 * Knex (3.3) opens a connection, then runs `select version()` (once per pool) and `set search_path`
 * (the `searchPath` option) on it before the pool owns it; when either fails — a "Query read
 * timeout" after an event-loop stall under load — it rejects without ending the connection, whose
 * socket then outlives the pool and keeps the process alive. Closing it here fixes every pool at the
 * two places it can fail, and keeps search_path as it is: a startup parameter instead would need
 * every pooler in front to accept it (PgBouncer refuses unknown ones), and a fixed `version` would
 * guess the server's. test/store/connection-setup-failure.test.ts stalls each query to prove it.
 */
export class PgClient extends KnexPgClient {
  override checkVersion(connection: PgConnection): Promise<string> {
    return closedOnFailure(connection, () => super.checkVersion(connection));
  }

  override setSchemaSearchPath(connection: PgConnection, searchPath?: string | readonly string[]): Promise<boolean> {
    return closedOnFailure(connection, () => super.setSchemaSearchPath(connection, searchPath));
  }
}

/**
 * `setup`'s result; when it fails, the connection is ended (pg destroys its socket when a query
 * still hangs) without waiting, so the pool hears of the failure at once.
 */
async function closedOnFailure<T>(connection: PgConnection, setup: () => Promise<T>): Promise<T> {
  try {
    return await setup();
  } catch (error) {
    connection.end().catch(() => undefined);
    throw error;
  }
}
