import { context, trace } from "@opentelemetry/api";
import pino, { type Logger } from "pino";

/** Paths pino replaces with "[REDACTED]": credentials never reach the log, whatever logs them. */
export const REDACTED_PATHS = [
  "req.headers.authorization",
  "req.headers.cookie",
  "headers.authorization",
  "*.client_secret",
  "*.clientSecret",
  "*.scimToken",
  "*.scim_token",
  "*.access_token",
  "*.refresh_token",
  "*.subject_token",
  "*.token",
  "*.password",
];

/** JSON logs (pino, shared by Fastify and the rest); request URLs are logged without their query string values. */
export function createLogger(level: string, stream?: NodeJS.WritableStream): Logger {
  const options = {
    level,
    mixin: traceContext,
    redact: { paths: REDACTED_PATHS, censor: "[REDACTED]" },
    serializers: {
      req(request: { method: string; url: string; ip?: string }) {
        const [path, query] = request.url.split("?", 2);
        return {
          method: request.method,
          url:
            query === undefined
              ? path
              : `${path}?${[...new URLSearchParams(query).keys()].map((k) => `${k}=…`).join("&")}`,
          remoteAddress: request.ip,
        };
      },
      // Fastify logs its reply; anything else with a statusCode is shown the same way.
      res(reply: { statusCode: number }) {
        return { statusCode: reply.statusCode };
      },
      err: pino.stdSerializers.err,
    },
  };
  // Without a stream: stdout (fd 1) written asynchronously, so lines that arrive while a write is
  // in flight leave in one syscall instead of one each (a synchronous write per line cost about a
  // tenth of the CPU under load). pino flushes what is pending synchronously at process exit.
  return stream ? pino(options, stream) : pino(options, pino.destination({ dest: 1, sync: false }));
}

/**
 * The active span's `trace_id` and `span_id` on a line logged inside a traced request or job (the
 * names the OpenTelemetry spec gives trace context in non-OTLP logs), so a log line finds its
 * trace and a trace its lines. Nothing while tracing is off (the API's no-op context has no span).
 */
function traceContext(): object {
  const span = trace.getSpan(context.active());
  if (span === undefined) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}
