import { context, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from "@opentelemetry/api";
import type { Knex } from "knex";

/** Queries whose answer never came (a connection cut mid-query) are ended beyond this many open spans. */
const MAX_OPEN_SPANS = 10_000;

interface QueryEvent {
  readonly __knexQueryUid?: string;
  readonly sql?: string;
  readonly method?: string;
}

/**
 * Makes a client span of every query a traced request sends through `db`, from Knex's query
 * events: `db.system` (postgresql or pglite), the operation (`SELECT`, `INSERT`, …) and the
 * statement with its placeholders (`$1`, `?`) — never the bound values, which are only in the
 * event's `bindings`. Transaction control (BEGIN, COMMIT) and queries outside a traced request
 * (background jobs, migrations) make no span. Called by the composition root only when tracing
 * is on: with it off, no listener is attached at all.
 */
export function traceQueries(db: Knex, tracer: Tracer, system: "postgresql" | "pglite"): void {
  const open = new Map<string, Span>();
  const end = (query: QueryEvent | undefined, error?: unknown) => {
    const uid = query?.__knexQueryUid;
    const span = uid === undefined ? undefined : open.get(uid);
    if (!span) return;
    open.delete(uid!);
    if (error !== undefined) {
      // The SQLSTATE only: Knex puts the statement with its bound values into the message.
      const code = (error as { code?: unknown }).code;
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
    const span = tracer.startSpan(
      operation,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          "db.system": system,
          "db.operation.name": operation,
          ...(query.sql ? { "db.query.text": query.sql } : {}),
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
