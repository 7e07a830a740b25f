import { context, propagation, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from "@opentelemetry/api";
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
} from "@opentelemetry/semantic-conventions";
import type { FastifyRequest } from "fastify";
import { ATTR_CALL_PROTOCOL } from "../rpc/interceptors/tracing-interceptor.js";
import type { RestRoute } from "./http-rules.js";

/** W3C trace context from the request's headers (Node's lower-cased header object). */
const incomingGetter = {
  keys: (headers: FastifyRequest["headers"]) => Object.keys(headers),
  get: (headers: FastifyRequest["headers"], key: string) => headers[key],
};

/**
 * The HTTP server span of one REST call, by the OpenTelemetry HTTP conventions: named
 * `<METHOD> <route template>`, with `http.request.method`, `http.route` (the contract's template,
 * never the filled-in path's ids as its name), `url.path`, `client.address` (the address the
 * trusted-proxy rules resolved) and `travel.protocol` rest. It continues the caller's `traceparent`;
 * `forward` replaces the `traceparent` the gateway hands to the RPC core with this span's, so the
 * RPC's span is its child. `end` records the answer's status (an error status for a 5xx only: a 4xx
 * is the client's, as the conventions say for server spans).
 */
export class RestSpan {
  private readonly span: Span;

  constructor(tracer: Tracer, route: RestRoute, request: FastifyRequest) {
    const parent = propagation.extract(context.active(), request.headers, incomingGetter);
    this.span = tracer.startSpan(
      `${route.verb.toUpperCase()} ${route.template}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          [ATTR_HTTP_REQUEST_METHOD]: route.verb.toUpperCase(),
          [ATTR_HTTP_ROUTE]: route.template,
          [ATTR_URL_PATH]: request.url.split("?", 1)[0],
          [ATTR_URL_SCHEME]: request.protocol,
          [ATTR_CLIENT_ADDRESS]: request.ip,
          [ATTR_CALL_PROTOCOL]: "rest",
        },
      },
      parent,
    );
  }

  /** `headers` (the RPC's request headers) with this span as the trace parent. */
  forward(headers: Array<[string, string]>): Array<[string, string]> {
    const carrier: Record<string, string> = {};
    propagation.inject(trace.setSpan(context.active(), this.span), carrier);
    const names = new Set(Object.keys(carrier));
    return [...headers.filter(([name]) => !names.has(name)), ...Object.entries(carrier)];
  }

  end(status: number): void {
    this.span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
    if (status >= 500) {
      this.span.setAttribute(ATTR_ERROR_TYPE, String(status));
      this.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.span.end();
  }
}
