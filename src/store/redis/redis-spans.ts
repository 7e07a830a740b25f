import { context, SpanKind, SpanStatusCode, trace, type Tracer } from "@opentelemetry/api";
import { ATTR_DB_OPERATION_NAME, ATTR_DB_SYSTEM_NAME, ATTR_ERROR_TYPE } from "@opentelemetry/semantic-conventions";

/** db.system.name's value for Redis (the conventions' `redis`; not yet among the stable constants). */
const DB_SYSTEM_NAME_REDIS = "redis";

/** The tracer of Redis command spans; undefined (the default) while tracing is off. */
let tracer: Tracer | undefined;

/** Called by the composition root: a tracer when tracing is on, undefined to stop. */
export function traceRedisCommands(commandTracer: Tracer | undefined): void {
  tracer = commandTracer;
}

/**
 * Wraps the pending reply of one Redis command of a request in a client span:
 * `db.system.name` redis, the command (`MGET`, `EVALSHA`, …) and what it is for (`redis.purpose`:
 * token-admission, generation-cache.write, rate-limit) — never a key or a value. It takes the promise itself rather than a
 * function, so that with tracing off it is one comparison and no allocation (the span starts a
 * moment after the command was queued, before its reply can arrive). Commands outside a traced
 * request (background jobs) make no span.
 */
export function redisSpan<T>(command: string, pending: Promise<T>, purpose?: string): Promise<T> {
  return tracer === undefined ? pending : traced(tracer, command, pending, purpose);
}

async function traced<T>(
  commandTracer: Tracer,
  command: string,
  pending: Promise<T>,
  purpose: string | undefined,
): Promise<T> {
  const parent = context.active();
  if (trace.getSpan(parent) === undefined) return pending;
  const span = commandTracer.startSpan(
    purpose ? `${command} ${purpose}` : command,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        [ATTR_DB_SYSTEM_NAME]: DB_SYSTEM_NAME_REDIS,
        [ATTR_DB_OPERATION_NAME]: command,
        ...(purpose ? { "redis.purpose": purpose } : {}),
      },
    },
    parent,
  );
  try {
    return await pending;
  } catch (error) {
    // The error's name only: a driver message may quote a command's arguments.
    span.setAttribute(ATTR_ERROR_TYPE, error instanceof Error ? error.name : "_OTHER");
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : "error" });
    throw error;
  } finally {
    span.end();
  }
}
