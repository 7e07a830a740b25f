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
import { ATTR_CLIENT_ADDRESS, ATTR_ERROR_TYPE } from "@opentelemetry/semantic-conventions";
import { ErrorResponseSchema } from "../../../gen/travel/common/v1/error_pb.js";
import { requestInfoOf } from "../request-context.js";
import { codeLabel } from "./metrics-interceptor.js";

/** W3C `traceparent`/`tracestate` from the RPC's request headers (the REST gateway forwards them). */
const headerGetter: TextMapGetter<Headers> = {
  keys: (headers) => [...headers.keys()],
  get: (headers, key) => headers.get(key) ?? undefined,
};

/** The span attribute naming how a call came (RequestInfo.protocol: rest, grpc, grpc-web, connect, cli). */
export const ATTR_CALL_PROTOCOL = "travel.protocol";

/**
 * The RPC conventions' attributes (still incubating in the OpenTelemetry conventions, whose
 * package advises copying incubating names rather than importing them).
 */
const ATTR_RPC_SYSTEM = "rpc.system";
const ATTR_RPC_SERVICE = "rpc.service";
const ATTR_RPC_METHOD = "rpc.method";
const ATTR_RPC_GRPC_STATUS_CODE = "rpc.grpc.status_code";

/**
 * One span per RPC, `<service>/<method>`, continuing the caller's trace when the request carries
 * a `traceparent`: the server span of a gRPC, gRPC-Web or Connect call (`rpc.system` grpc or
 * connect_rpc, `client.address`); for a REST call, an internal span under the gateway's HTTP
 * server span (which forwards its own `traceparent`). `travel.protocol` says how the call came.
 * Outermost (around the error interceptor), so the span holds the final outcome:
 * `rpc.grpc.status_code` (the Connect code's number, 0 for success, the same on every protocol),
 * and on failure an error status with the Connect code and the catalogue `errorCode` — never the
 * message, a header value, a credential or a token. The face learns the trace id for its log
 * line. Registered only when tracing is on (createRpcCore is given a tracer), so it costs nothing
 * otherwise.
 */
export function tracingInterceptor(tracer: Tracer): Interceptor {
  return (next) => async (req) => {
    const parent = propagation.extract(context.active(), req.header, headerGetter);
    const info = requestInfoOf(req.contextValues);
    const protocol = info.protocol ?? "connect";
    const span = tracer.startSpan(
      `${req.service.typeName}/${req.method.name}`,
      {
        kind: protocol === "rest" || protocol === "cli" ? SpanKind.INTERNAL : SpanKind.SERVER,
        attributes: {
          [ATTR_RPC_SYSTEM]: protocol === "grpc" || protocol === "grpc-web" ? "grpc" : "connect_rpc",
          [ATTR_RPC_SERVICE]: req.service.typeName,
          [ATTR_RPC_METHOD]: req.method.name,
          [ATTR_CALL_PROTOCOL]: protocol,
          [ATTR_CLIENT_ADDRESS]: info.remoteAddress,
          "request.id": info.requestId,
        },
      },
      parent,
    );
    info.traced?.(span.spanContext().traceId);
    try {
      const res = await context.with(trace.setSpan(parent, span), () => next(req));
      span.setAttribute(ATTR_RPC_GRPC_STATUS_CODE, 0);
      return res;
    } catch (error) {
      const connectError = ConnectError.from(error);
      const label = codeLabel(connectError.code);
      span.setAttribute(ATTR_RPC_GRPC_STATUS_CODE, connectError.code);
      span.setAttribute("rpc.connect_rpc.error_code", label);
      const errorCode = connectError.findDetails(ErrorResponseSchema)[0]?.errorMessages[0]?.errorCode;
      span.setAttribute(ATTR_ERROR_TYPE, errorCode ?? label);
      span.setStatus({ code: SpanStatusCode.ERROR, message: errorCode ? `${label}: ${errorCode}` : label });
      throw error;
    } finally {
      span.end();
    }
  };
}
