import { DomainError } from "../../errors/domain-error.js";

/**
 * How a database failure is answered: `unavailable` (503, retry the call later: the database cannot
 * be reached, is stalled, shutting down or out of connections) or `contended` (409 ABORTED: another
 * transaction holds the rows this one needs; retry the call). Anything else is not the database's
 * state but a bug, and stays an internal error.
 */
export type DatabaseFailure = "unavailable" | "contended";

/** Socket errors (node:net, node:dns) on the way to the server. */
const SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
]);

/** SQLSTATEs that say the server cannot serve now (https://www.postgresql.org/docs/current/errcodes-appendix.html). */
const UNAVAILABLE_SQLSTATES = new Set([
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now (starting up, recovery)
  "57P05", // idle_session_timeout: the server closed an idle pooled session
  "57014", // query_canceled: statement_timeout, or the server cancelled it
  "25P03", // idle_in_transaction_session_timeout
]);
/** Whole classes: 08 connection exception, 53 insufficient resources (53300 too_many_connections, disk, memory). */
const UNAVAILABLE_SQLSTATE_CLASSES = new Set(["08", "53"]);

/** Lock contention: lock_timeout or NOWAIT (55P03), a deadlock victim (40P01), a serialization failure (40001). */
const CONTENDED_SQLSTATES = new Set(["55P03", "40P01", "40001"]);

/**
 * Driver messages without a code: node-postgres ("timeout expired" when connectionTimeoutMillis
 * passes while connecting, "Connection terminated unexpectedly", "Query read timeout", …),
 * pg-pool, Knex (a pool acquire timeout, a destroyed pool) and PGlite (closed or closing).
 */
// Not anchored: Knex prefixes a failed query's message with its SQL.
const UNAVAILABLE_MESSAGES =
  /(timeout expired|Connection terminated|Query read timeout|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed and is not queryable|Cannot use a pool after calling end|Unable to acquire a connection|Knex: Timeout acquiring a connection|PGlite is clos(ed|ing))/;

interface ErrorLike {
  readonly code?: unknown;
  readonly name?: unknown;
  readonly message?: unknown;
  readonly cause?: unknown;
  readonly errors?: unknown;
}

/** What kind of database failure `error` is, looking through causes and AggregateErrors; undefined when it is none. */
export function databaseFailureOf(error: unknown, depth = 0): DatabaseFailure | undefined {
  if (depth > 4 || typeof error !== "object" || error === null) return undefined;
  const e = error as ErrorLike;
  if (typeof e.code === "string") {
    if (CONTENDED_SQLSTATES.has(e.code)) return "contended";
    if (
      SOCKET_CODES.has(e.code) ||
      UNAVAILABLE_SQLSTATES.has(e.code) ||
      (/^[0-9A-Z]{5}$/.test(e.code) && UNAVAILABLE_SQLSTATE_CLASSES.has(e.code.slice(0, 2)))
    ) {
      return "unavailable";
    }
  }
  if (e.name === "KnexTimeoutError") return "unavailable";
  if (typeof e.message === "string" && UNAVAILABLE_MESSAGES.test(e.message)) return "unavailable";
  // Connecting to a name with several addresses fails with an AggregateError of one error per address.
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors) {
      const failure = databaseFailureOf(inner, depth + 1);
      if (failure) return failure;
    }
  }
  return databaseFailureOf(e.cause, depth + 1);
}

/** What a socket code says, in words an operator acts on. */
const SOCKET_WORDS: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ETIMEDOUT: "connection timed out",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host name lookup failed",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
};

/**
 * The deepest reason an unavailable database gives (a socket code, a SQLSTATE, a driver message),
 * for a start-up that gives up: "connection refused (ECONNREFUSED)" rather than the pool's "Timeout
 * acquiring a connection" that wraps it. Never the connection string (it may hold a password).
 */
export function databaseFailureCause(error: unknown, depth = 0): string {
  if (depth > 4 || typeof error !== "object" || error === null) return String(error as string);
  const e = error as ErrorLike;
  const inners: unknown[] = Array.isArray(e.errors) ? (e.errors as unknown[]) : [];
  const inner = [...inners, e.cause].find((candidate) => databaseFailureOf(candidate) !== undefined);
  if (inner !== undefined) return databaseFailureCause(inner, depth + 1);
  if (typeof e.code === "string" && SOCKET_CODES.has(e.code))
    return `${SOCKET_WORDS[e.code] ?? "socket error"} (${e.code})`;
  if (typeof e.code === "string" && /^[0-9A-Z]{5}$/.test(e.code) && typeof e.message === "string")
    return `${e.message} (SQLSTATE ${e.code})`;
  if (e.name === "KnexTimeoutError") return "no connection within DATABASE_ACQUIRE_TIMEOUT_MS";
  return typeof e.message === "string" ? e.message : "an unknown failure";
}

/**
 * Whether a failure means Postgres is unreachable, stalled or shutting down: the caller gets 503
 * and may retry, instead of an internal error.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  return databaseFailureOf(error) === "unavailable";
}

/**
 * The catalogue error a database failure is answered with (the RPC core's `classifyError`):
 * 503 DEPENDENCY_UNAVAILABLE or 409 RESOURCE_BUSY, both with Retry-After: 1; undefined for
 * anything that is not the database's state (it stays an internal error).
 */
export function classifyDatabaseError(error: unknown): DomainError | undefined {
  switch (databaseFailureOf(error)) {
    case "unavailable":
      return new DomainError("DEPENDENCY_UNAVAILABLE", "The database did not answer in time; retry with backoff", {
        cause: error,
        retryAfterSeconds: 1,
        // The access-log line says which wait ran out (no connection, no answer, a refused
        // connection), which the caller's message deliberately does not.
        logged: { databaseFailure: databaseFailureCause(error).slice(0, 300) },
      });
    case "contended":
      return new DomainError("RESOURCE_BUSY", "Another request is changing the same resource; retry shortly", {
        cause: error,
        retryAfterSeconds: 1,
      });
    default:
      return undefined;
  }
}
