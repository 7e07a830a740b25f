import type { FastifyRequest } from "fastify";

/** The trace id of each traced request, for its one log line; nothing while tracing is off. */
const traceIds = new WeakMap<FastifyRequest, string>();

export function noteTrace(request: FastifyRequest, traceId: string): void {
  traceIds.set(request, traceId);
}

/** `{trace_id}` (the OpenTelemetry name, as the logger's other lines) for a traced request's log line, else nothing. */
export function traceFields(request: FastifyRequest): { trace_id?: string } {
  const traceId = traceIds.get(request);
  return traceId === undefined ? {} : { trace_id: traceId };
}
