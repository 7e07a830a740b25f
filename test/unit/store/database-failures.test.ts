import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, test } from "node:test";
import { DatabaseError } from "pg-protocol";
import { databaseFailureOf, isDatabaseUnavailable } from "../../../src/store/postgres/unavailable.js";

const require = createRequire(import.meta.url);
// Knex's own class, as its pool throws it when no connection frees up within acquireConnectionTimeout.
const { KnexTimeoutError } = require("knex/lib/util/timeout.js") as {
  KnexTimeoutError: new (message: string) => Error;
};

/** A server error as node-postgres raises it (pg-protocol's DatabaseError, with its SQLSTATE). */
function serverError(code: string, message: string): Error {
  const error = new DatabaseError(message, message.length, "error");
  error.code = code;
  return error;
}

function socketError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, syscall: "connect" });
}

/** Knex prefixes a failed query's message with its SQL and keeps the driver's fields. */
function knexWrapped(error: Error): Error {
  error.message = `select 1 - ${error.message}`;
  return error;
}

/**
 * A Postgres stall made node-postgres fail new connections with "timeout
 * expired", which the old list did not know: 139 of 319 answers were 500. Every shape below is
 * one the drivers throw (or wrap) when the database cannot serve; each must be "unavailable" (503).
 */
const UNAVAILABLE: ReadonlyArray<[string, unknown]> = [
  ["pg: connectionTimeoutMillis passed while connecting (a stalled server)", new Error("timeout expired")],
  ["pg: the server or the network dropped the connection", new Error("Connection terminated unexpectedly")],
  ["pg: a connection ended while a query ran", new Error("Connection terminated")],
  [
    "pg-pool: the connect timeout, with the socket error as cause",
    new Error("Connection terminated due to connection timeout", {
      cause: new Error("Connection terminated unexpectedly"),
    }),
  ],
  ["pg-pool: no client within connectionTimeoutMillis", new Error("timeout exceeded when trying to connect")],
  ["pg: query_timeout passed (client side)", knexWrapped(new Error("Query read timeout"))],
  [
    "pg: a query on a client whose connection broke",
    new Error("Client has encountered a connection error and is not queryable"),
  ],
  ["pg: a query on a closed client", new Error("Client was closed and is not queryable")],
  ["pg-pool: used after end (shutdown)", new Error("Cannot use a pool after calling end on the pool")],
  [
    "knex: pool acquire timeout (KnexTimeoutError)",
    new KnexTimeoutError(
      "Knex: Timeout acquiring a connection. The pool is probably full. Are you missing a .transacting(trx) call?",
    ),
  ],
  ["knex: a destroyed pool", new Error("Unable to acquire a connection")],
  ["PGlite: closed", new Error("PGlite is closed")],
  ["PGlite: closing", new Error("PGlite is closing")],
  ...["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"].map(
    (code): [string, unknown] => [`socket: ${code}`, socketError(code)],
  ),
  [
    "socket: AggregateError of every address refused (localhost: ::1 and 127.0.0.1)",
    new AggregateError([socketError("ECONNREFUSED"), socketError("ECONNREFUSED")], ""),
  ],
  ["57P01 admin_shutdown", serverError("57P01", "terminating connection due to administrator command")],
  ["57P02 crash_shutdown", serverError("57P02", "terminating connection because of crash of another server process")],
  ["57P03 cannot_connect_now", serverError("57P03", "the database system is starting up")],
  ["57P05 idle_session_timeout", serverError("57P05", "terminating connection due to idle-session timeout")],
  [
    "57014 query_canceled (statement_timeout), wrapped by knex",
    knexWrapped(serverError("57014", "canceling statement due to statement timeout")),
  ],
  [
    "25P03 idle_in_transaction_session_timeout",
    serverError("25P03", "terminating connection due to idle-in-transaction timeout"),
  ],
  ["53300 too_many_connections", serverError("53300", "sorry, too many clients already")],
  ["53100 disk_full", serverError("53100", "could not extend file")],
  ["53200 out_of_memory", serverError("53200", "out of memory")],
  ["08006 connection_failure", serverError("08006", "connection failure")],
  ["08001 sqlclient_unable_to_establish_sqlconnection", serverError("08001", "could not connect")],
  ["08P01 protocol_violation", serverError("08P01", "protocol violation")],
  [
    "a failure whose cause is a connection loss",
    new Error("transaction failed", { cause: new Error("Connection terminated unexpectedly") }),
  ],
];

/** Lock contention: a retryable conflict (409 ABORTED), not an outage. */
const CONTENDED: ReadonlyArray<[string, unknown]> = [
  [
    "55P03 lock_not_available (lock_timeout, NOWAIT)",
    knexWrapped(serverError("55P03", "canceling statement due to lock timeout")),
  ],
  ["40P01 deadlock_detected", serverError("40P01", "deadlock detected")],
  ["40001 serialization_failure", serverError("40001", "could not serialize access due to concurrent update")],
];

/** Bugs and bad data: internal errors (500), never disguised as an outage. */
const NEITHER: ReadonlyArray<[string, unknown]> = [
  ["42P01 undefined_table", serverError("42P01", 'relation "nope" does not exist')],
  ["42601 syntax_error", serverError("42601", "syntax error at or near")],
  ["23502 not_null_violation", serverError("23502", "null value in column")],
  ["22P02 invalid_text_representation", serverError("22P02", "invalid input syntax for type uuid")],
  ["a TypeError", new TypeError("Cannot read properties of undefined (reading 'id')")],
  ["a plain Error", new Error("something else")],
  ["a string", "timeout"],
  ["undefined", undefined],
  ["null", null],
];

describe("which database failures are answered 503 (unavailable), 409 (contended) or 500", () => {
  for (const [name, error] of UNAVAILABLE) {
    test(`unavailable: ${name}`, () => {
      assert.equal(databaseFailureOf(error), "unavailable");
      assert.equal(isDatabaseUnavailable(error), true);
    });
  }
  for (const [name, error] of CONTENDED) {
    test(`contended: ${name}`, () => {
      assert.equal(databaseFailureOf(error), "contended");
      assert.equal(isDatabaseUnavailable(error), false);
    });
  }
  for (const [name, error] of NEITHER) {
    test(`neither: ${name}`, () => assert.equal(databaseFailureOf(error), undefined));
  }
  test("a cycle of causes ends", () => {
    const a = new Error("a");
    const b = new Error("b", { cause: a });
    (a as { cause?: unknown }).cause = b;
    assert.equal(databaseFailureOf(a), undefined);
  });
});
