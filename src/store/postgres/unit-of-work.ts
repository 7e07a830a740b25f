import type { Knex } from "knex";
import { DomainError } from "../../errors/domain-error.js";
import type { Tx, UnitOfWork } from "../../domain/shared/unit-of-work.js";
import { databaseFailureOf } from "./unavailable.js";

/**
 * The Knex query runner behind a domain Tx (a transaction, or the pool for `direct`). Called with
 * a table, it answers a query builder on that table in the pool's schema (and joins taken on that
 * builder too): the SQL names the schema, so a transaction-mode pooler, which hands each
 * transaction whatever server connection is free, cannot send it to another schema's tables
 * (no per-connection search_path is relied on). Raw SQL names its tables with `tableIn`.
 */
export function knexOf(tx: Tx): Knex {
  return inSchema(tx as unknown as Knex);
}

/** A pool or transaction whose calls on a table name their schema (see knexOf). */
export function inSchema(db: Knex): Knex {
  const schema = schemaOf(db);
  if (schema === undefined) return db;
  let qualified = qualifying.get(db);
  if (!qualified) {
    qualified = new Proxy(db, {
      // A name with a schema of its own (information_schema.tables) is left as it is.
      apply: (target, _this, args: Parameters<Knex>) =>
        typeof args[0] === "string" && args[0].includes(".") ? target(...args) : target(...args).withSchema(schema),
    });
    qualifying.set(db, qualified);
  }
  return qualified;
}

const qualifying = new WeakMap<Knex, Knex>();

/** The schema a pool's queries name (database.ts sets it where the pool is made), on the pool or one of its transactions. */
export function schemaOf(db: Knex): string | undefined {
  const config = (db.client as { config: { userParams?: Record<string, unknown> } }).config;
  return config.userParams?.[SCHEMA_PARAM] as string | undefined;
}

/** Where database.ts puts a pool's schema among Knex's user parameters. */
export const SCHEMA_PARAM = "schema";

/**
 * `table` as raw SQL names it: schema-qualified and quoted on a pool with a schema (see knexOf),
 * else bare (PGlite's public schema; the migrator's session search_path).
 */
export function tableIn(db: Tx | Knex, table: string): string {
  const schema = schemaOf(db as unknown as Knex);
  return schema === undefined ? table : `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;
}

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** The one place a Knex handle becomes a domain Tx. */
function asTx(db: Knex): Tx {
  return db as unknown as Tx;
}

/**
 * Transactions for the domain. Driver errors the caller caused become catalogue errors here
 * (Backstage's rethrowError): a unique violation is ALREADY_EXISTS, a missing reference NOT_FOUND.
 *
 * Row locks are taken with NOWAIT (and the session's lock_timeout bounds the implicit ones), so a
 * busy row fails the transaction at once instead of parking its pooled connection (thirty
 * waiters on one row once held every connection of the instance). The transaction is then rolled back, its connection returned, and the whole unit
 * retried after a short jittered pause, for at most `lockWaitMs`; past it the caller gets 409
 * RESOURCE_BUSY with Retry-After. A rolled-back attempt left nothing behind, so a retry is safe.
 */
export class KnexUnitOfWork implements UnitOfWork {
  readonly direct: Tx;

  constructor(
    private readonly db: Knex,
    private readonly lockWaitMs = 2_000,
  ) {
    this.direct = asTx(db);
  }

  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    const giveUpAt = Date.now() + this.lockWaitMs;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.db.transaction((trx) => work(asTx(trx)));
      } catch (error) {
        if (databaseFailureOf(error) !== "contended") rethrowDbError(error);
        // 10, 20, 40, 80, then 100 ms at most, each with jitter, so contenders do not retry in step.
        const pauseMs = Math.min(100, 10 * 2 ** attempt) * (0.5 + Math.random());
        if (Date.now() + pauseMs > giveUpAt) {
          throw new DomainError("RESOURCE_BUSY", "Another request is changing the same resource; retry shortly", {
            cause: error,
            retryAfterSeconds: 1,
          });
        }
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    }
  }
}

/** Turns driver errors the caller caused into catalogue errors; everything else propagates. */
export function rethrowDbError(error: unknown, conflictMessage = "The resource already exists"): never {
  const code = (error as { code?: unknown }).code;
  if (code === "23505") throw new DomainError("ALREADY_EXISTS", conflictMessage, { cause: error });
  if (code === "23503") throw new DomainError("NOT_FOUND", "A referenced resource does not exist", { cause: error });
  throw error;
}
