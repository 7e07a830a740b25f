import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { Metrics } from "../../observability/metrics.js";

/** Counts every unary RPC by outcome code; sits inside the error interceptor so codes are final. */
export function metricsInterceptor(metrics: Metrics): Interceptor {
  return (next) => async (req) => {
    const labels = { service: req.service.typeName, method: req.method.name };
    const stop = metrics.rpcDuration.startTimer(labels);
    try {
      const res = await next(req);
      metrics.rpcRequests.inc({ ...labels, code: "ok" });
      return res;
    } catch (error) {
      const code = error instanceof ConnectError ? error.code : (error as { code?: Code }).code ?? Code.Internal;
      metrics.rpcRequests.inc({ ...labels, code: Code[code] ?? "Internal" });
      throw error;
    } finally {
      stop();
    }
  };
}
