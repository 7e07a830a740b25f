import type { Knex } from "knex";

/** The part of Knex's (untyped) pg client that opens a transaction, and of the transaction that begins it. */
type TransactionOpener = {
  transaction(...args: unknown[]): KnexTransaction;
};
type KnexTransaction = {
  begin(connection: unknown): Promise<unknown>;
  query(connection: unknown, sql: string): Promise<unknown>;
};

/**
 * Behind a transaction-mode pooler (PgBouncer `pool_mode = transaction`) each transaction gets
 * whichever server connection is free: the pooler refuses startup parameters, and a session SET
 * would stay behind on a connection that another client gets next. The pool's server settings
 * (statement_timeout, lock_timeout) are therefore set per transaction, with SET LOCAL, in the very
 * message that carries BEGIN (one simple-protocol query: no extra round trip). Statements outside
 * a transaction are bounded by the client's query_timeout, and by the role's settings where the
 * operator sets them (docs/operations.md).
 */
export function setLocalOnBegin(db: Knex, settings: Readonly<Record<string, number>>): void {
  const entries = Object.entries(settings);
  if (entries.length === 0) return;
  // Names are this module's callers' constants; values are integers (milliseconds).
  const begin = ["BEGIN", ...entries.map(([name, ms]) => `SET LOCAL ${name} = ${Math.trunc(ms)}`)].join("; ");
  const client = db.client as TransactionOpener;
  const open = client.transaction.bind(client);
  // A top-level transaction begins with `begin`, a nested one with a savepoint (which inherits them).
  client.transaction = (...args: unknown[]) => {
    const transaction = open(...args);
    transaction.begin = (connection) => transaction.query(connection, begin);
    return transaction;
  };
}
