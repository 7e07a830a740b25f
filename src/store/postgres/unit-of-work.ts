import type { Knex } from "knex";
import { DomainError } from "../../errors/domain-error.js";
import type { Tx, UnitOfWork } from "../../domain/shared/unit-of-work.js";

/** The Knex query runner behind a domain Tx (a transaction, or the pool for `direct`). */
export function knexOf(tx: Tx): Knex {
  return tx as unknown as Knex;
}

/** The one place a Knex handle becomes a domain Tx. */
function asTx(db: Knex): Tx {
  return db as unknown as Tx;
}

/**
 * Transactions for the domain. Driver errors the caller caused become catalogue errors here
 * (Backstage's rethrowError): a unique violation is ALREADY_EXISTS, a missing reference NOT_FOUND.
 */
export class KnexUnitOfWork implements UnitOfWork {
  readonly direct: Tx;

  constructor(private readonly db: Knex) {
    this.direct = asTx(db);
  }

  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    try {
      return await this.db.transaction((trx) => work(asTx(trx)));
    } catch (error) {
      rethrowDbError(error);
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
