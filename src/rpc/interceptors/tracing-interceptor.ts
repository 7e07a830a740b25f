import { ConnectError, type Interceptor } from "@connectrpc/connect";
import {
  context,
  propagation,
  SpanKind,
  SpanStatusCode,
  trace,
  type TextMapGetter,
  type Tracer,
} from "@opentelemetry/api";
import { ErrorResponseSchema } from "../../../gen/travel/common/v1/error_pb.js";
import { requestInfoOf } from "../request-context.js";
import { codeLabel } from "./metrics-interceptor.js";

/** W3C `traceparent`/`tracestate` from the RPC's request headers (the REST gateway forwards them). */
const headerGetter: TextMapGetter<Headers> = {
  keys: (headers) => [...headers.keys()],
  get: (headers, key) => headers.get(key) ?? undefined,
};

/**
 * One server span per RPC, `<service>/<method>`, continuing the caller's trace when the request
 * carries a `traceparent`. Outermost (around the error interceptor), so the span holds the final
 * outcome: `rpc.grpc.status_code` (the Connect code's number, 0 for success, the same on every
 * protocol), and on failure an error status with the Connect code and the catalogue `errorCode`
 * — never the message, a header value, a credential or a token. Registered only when tracing is
 * on (createRpcCore is given a tracer), so it costs nothing otherwise.
 */
export function tracingInterceptor(tracer: Tracer): Interceptor {
  return (next) => async (req) => {
    const parent = propagation.extract(context.active(), req.header, headerGetter);
    const span = tracer.startSpan(
      `${req.service.typeName}/${req.method.name}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          "rpc.system": "connect_rpc",
          "rpc.service": req.service.typeName,
          "rpc.method": req.method.name,
          "request.id": requestInfoOf(req.contextValues).requestId,
        },
      },
      parent,
    );
    try {
      const res = await context.with(trace.setSpan(parent, span), () => next(req));
      span.setAttribute("rpc.grpc.status_code", 0);
      return res;
    } catch (error) {
      const connectError = ConnectError.from(error);
      const label = codeLabel(connectError.code);
      span.setAttribute("rpc.grpc.status_code", connectError.code);
      span.setAttribute("rpc.connect_rpc.error_code", label);
      const errorCode = connectError.findDetails(ErrorResponseSchema)[0]?.errorMessages[0]?.errorCode;
      if (errorCode) span.setAttribute("error.type", errorCode);
      span.setStatus({ code: SpanStatusCode.ERROR, message: errorCode ? `${label}: ${errorCode}` : label });
      throw error;
    } finally {
      span.end();
    }
  };
}
