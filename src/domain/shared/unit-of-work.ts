declare const txBrand: unique symbol;

/**
 * An open database transaction (or the pool, for `UnitOfWork.direct`), opaque to the domain:
 * the domain passes it to repository methods and never looks inside. Inside a transaction only
 * its Tx may be used (on the embedded database a second connection would deadlock).
 */
export interface Tx {
  readonly [txBrand]: true;
}

export interface UnitOfWork {
  /** Statements that each commit on their own (reads, single inserts). */
  readonly direct: Tx;
  /** Runs `work` in one transaction: all of it commits, or none of it. */
  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
}
