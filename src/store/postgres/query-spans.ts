import { context, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from "@opentelemetry/api";
import {
  ATTR_DB_COLLECTION_NAME,
  ATTR_DB_NAMESPACE,
  ATTR_DB_OPERATION_NAME,
  ATTR_DB_QUERY_TEXT,
  ATTR_DB_SYSTEM_NAME,
  ATTR_ERROR_TYPE,
  DB_SYSTEM_NAME_VALUE_POSTGRESQL,
} from "@opentelemetry/semantic-conventions";
import type { Knex } from "knex";

/** Queries whose answer never came (a connection cut mid-query) are ended beyond this many open spans. */
const MAX_OPEN_SPANS = 10_000;

interface QueryEvent {
  readonly __knexQueryUid?: string;
  readonly sql?: string;
  readonly method?: string;
}

/**
 * Makes a client span of every query sent through `db` inside a traced request or background job,
 * from Knex's query events, by the OpenTelemetry database conventions: named `<operation>
 * <table>` (`SELECT api_users`), with `db.system.name` postgresql (the embedded PGlite is
 * PostgreSQL too: the same SQL, the same engine), `db.namespace` (the schema),
 * `db.operation.name`, `db.collection.name` (the first table the statement names) and the
 * statement with its placeholders (`$1`, `?`) — never the bound values, which are only in the
 * event's `bindings`. A failed query's span carries its SQLSTATE as `error.type`. Transaction
 * control (BEGIN, COMMIT) and queries outside a traced request or job (migrations) make no span.
 * Called by the composition root only when tracing is on: with it off, no listener is attached.
 */
export function traceQueries(db: Knex, tracer: Tracer, schema: string): void {
  const open = new Map<string, Span>();
  const end = (query: QueryEvent | undefined, error?: unknown) => {
    const uid = query?.__knexQueryUid;
    const span = uid === undefined ? undefined : open.get(uid);
    if (!span) return;
    open.delete(uid!);
    if (error !== undefined) {
      // The SQLSTATE only: Knex puts the statement with its bound values into the message.
      const code = (error as { code?: unknown }).code;
      span.setAttribute(ATTR_ERROR_TYPE, typeof code === "string" ? code : "_OTHER");
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: typeof code === "string" ? code : error instanceof Error ? error.name : "error",
      });
    }
    span.end();
  };
  db.on("query", (query: QueryEvent) => {
    const uid = query.__knexQueryUid;
    if (uid === undefined) return;
    const parent = context.active();
    if (trace.getSpan(parent) === undefined) return;
    const operation = operationOf(query);
    const table = query.sql === undefined ? undefined : tableOf(query.sql);
    const span = tracer.startSpan(
      table ? `${operation} ${table}` : operation,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [ATTR_DB_SYSTEM_NAME]: DB_SYSTEM_NAME_VALUE_POSTGRESQL,
          [ATTR_DB_NAMESPACE]: schema,
          [ATTR_DB_OPERATION_NAME]: operation,
          ...(table ? { [ATTR_DB_COLLECTION_NAME]: table } : {}),
          ...(query.sql ? { [ATTR_DB_QUERY_TEXT]: query.sql } : {}),
        },
      },
      parent,
    );
    if (open.size >= MAX_OPEN_SPANS) {
      for (const [staleUid, stale] of open) {
        stale.end();
        open.delete(staleUid);
        if (open.size < MAX_OPEN_SPANS / 2) break;
      }
    }
    open.set(uid, span);
  });
  db.on("query-response", (_response: unknown, query: QueryEvent) => end(query));
  db.on("query-error", (error: unknown, query: QueryEvent) => end(query, error ?? new Error("query failed")));
}

/** The statement's first keyword (SELECT, INSERT, WITH, …), else Knex's method name. */
function operationOf(query: QueryEvent): string {
  const keyword = /^\s*([a-z]+)/i.exec(query.sql ?? "")?.[1];
  return (keyword ?? query.method ?? "query").toUpperCase();
}

/**
 * The first table a statement names: after FROM, INTO, UPDATE or JOIN, quoted or not, a schema
 * prefix dropped, skipping subqueries, function calls (`extract(epoch from now())`) and the
 * statement's own WITH queries; undefined when it names none (`select 1`).
 */
export function tableOf(sql: string): string | undefined {
  const withQueries = new Set(
    [...sql.matchAll(/(?:\bwith|,)\s*"?([a-z_][a-z0-9_]*)"?\s+as\s*(?:(?:not\s+)?materialized\s*)?\(/gi)].map((m) =>
      m[1]!.toLowerCase(),
    ),
  );
  for (const found of sql.matchAll(
    /\b(?:from|into|update|join)\s+(?:only\s+)?(?:"?[a-z_][a-z0-9_]*"?\.)?"?([a-z_][a-z0-9_]*)\b"?(?![(.])/gi,
  ))
    if (!withQueries.has(found[1]!.toLowerCase())) return found[1];
  return undefined;
}
