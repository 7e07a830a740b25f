import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { context, propagation, trace } from "@opentelemetry/api";
import { ConfigError, loadConfig } from "../../../src/config/config.js";
import { startTracing } from "../../../src/observability/tracing.js";
import { redisSpan } from "../../../src/store/redis/redis-spans.js";

/*
 * Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT is set, and off means off: no SDK object is
 * created, the OpenTelemetry API stays its no-op, and the Redis span wrapper hands back the
 * command's own promise. (With tracing on: test/observability/tracing.test.ts, end to end.)
 */
describe("tracing off", () => {
  test("the configuration has no endpoint unless OTEL_EXPORTER_OTLP_ENDPOINT is set, and a set one must be a URL", () => {
    assert.equal(loadConfig({}).tracing.otlpEndpoint, undefined);
    assert.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "  " }).tracing.otlpEndpoint, undefined);
    assert.equal(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" }).tracing.otlpEndpoint,
      "http://collector:4318",
    );
    assert.throws(
      () => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" }),
      (e: unknown) => e instanceof ConfigError && /OTEL_EXPORTER_OTLP_ENDPOINT/.test(e.message),
    );
  });

  test("startTracing without an endpoint creates no provider or exporter and registers nothing", () => {
    assert.equal(startTracing({ otlpEndpoint: undefined }), undefined);
    // Nothing registered globally: the API's tracer makes non-recording spans, no propagator
    // reads traceparent, and no context manager carries a span across calls.
    const span = trace.getTracer("probe").startSpan("probe");
    assert.equal(span.isRecording(), false);
    assert.equal(span.spanContext().traceId, "00000000000000000000000000000000");
    span.end();
    assert.deepEqual(propagation.fields(), []);
    const key = Symbol("probe");
    assert.equal(
      context.with(context.active().setValue(key, 1), () => context.active().getValue(key)),
      undefined,
    );
  });

  test("the Redis span wrapper returns the command's own promise: no wrapper, no allocation", async () => {
    const pending = Promise.resolve(["g:1:1"]);
    assert.equal(redisSpan("MGET", pending), pending);
    assert.equal(redisSpan("EVAL", pending, "token-admission"), pending);
    assert.deepEqual(await pending, ["g:1:1"]);
  });
});
