import { context, propagation, trace, type Tracer } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, SimpleSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

export type { SpanExporter };

/** The service name spans carry unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) says otherwise. */
export const TRACING_SERVICE_NAME = "auth-api-user-service";

/** OpenTelemetry tracing (src/config/config.ts reads it): off unless an OTLP endpoint is set. */
export interface TracingConfig {
  /**
   * OTEL_EXPORTER_OTLP_ENDPOINT. Set: spans are exported over OTLP/HTTP (the exporter reads the
   * standard OTEL_EXPORTER_OTLP_* variables itself: the endpoint, `…_TRACES_ENDPOINT`, headers,
   * timeout). Unset: tracing is off and nothing of the SDK is created.
   */
  readonly otlpEndpoint: string | undefined;
}

export interface TracingOptions extends TracingConfig {
  /**
   * Tests only (passed through `createService`'s options, never from the environment): export
   * to this exporter, span by span (SimpleSpanProcessor), instead of OTLP.
   */
  readonly spanExporter?: SpanExporter;
}

/** A started tracer provider: the tracer the service's spans come from, and its flush-and-stop. */
export interface Tracing {
  readonly tracer: Tracer;
  /** Exports what is still buffered, stops the exporter and releases the API's globals. */
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry trace SDK when tracing is configured, else returns undefined and
 * creates nothing: the OpenTelemetry API then stays a no-op, and the service adds no tracing
 * interceptor, no query listener and no Redis span (each checks that it was given a tracer).
 *
 * The SDK is registered globally (tracer provider, AsyncLocalStorage context manager, W3C trace
 * context and baggage propagators), so the `@opentelemetry/api` calls of the RPC core and the
 * stores see the active span across awaits. One traced service per process: shutdown releases
 * the globals.
 */
export function startTracing(options: TracingOptions): Tracing | undefined {
  if (options.otlpEndpoint === undefined && options.spanExporter === undefined) return undefined;
  // The service's own name first; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it.
  const resource = defaultResource()
    .merge(resourceFromAttributes({ "service.name": TRACING_SERVICE_NAME }))
    .merge(detectResources({ detectors: [envDetector] }));
  const spanProcessor = options.spanExporter
    ? new SimpleSpanProcessor(options.spanExporter)
    : new BatchSpanProcessor(new OTLPTraceExporter());
  const provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register();
  return {
    tracer: provider.getTracer(TRACING_SERVICE_NAME),
    async shutdown() {
      try {
        await provider.shutdown();
      } finally {
        trace.disable();
        context.disable();
        propagation.disable();
      }
    },
  };
}
