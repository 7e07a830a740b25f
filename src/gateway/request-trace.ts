import type { FastifyRequest } from "fastify";

/** The trace id of each traced request, for its one log line; nothing while tracing is off. */
const traceIds = new WeakMap<FastifyRequest, string>();

export function noteTrace(request: FastifyRequest, traceId: string): void {
  traceIds.set(request, traceId);
}

/** The trace id of a traced request, for its one log line; undefined while tracing is off. */
export function traceIdOf(request: FastifyRequest): string | undefined {
  return traceIds.get(request);
}
