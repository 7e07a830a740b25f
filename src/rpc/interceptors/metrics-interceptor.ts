import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { DomainError } from "../../errors/domain-error.js";
import type { Metrics } from "../../observability/metrics.js";
import { CODE_BY_KIND } from "../errors/connect-codes.js";

/**
 * Counts every unary RPC by outcome code; sits inside the error interceptor so codes are final.
 * Codes are labelled in one scheme, the Connect protocol's wire names: "ok", "unauthenticated",
 * "permission_denied", "resource_exhausted" and so on.
 */
export function metricsInterceptor(metrics: Metrics): Interceptor {
  return (next) => async (req) => {
    const labels = { service: req.service.typeName, method: req.method.name };
    const stop = metrics.rpcDuration.startTimer(labels);
    try {
      const res = await next(req);
      metrics.rpcRequests.inc({ ...labels, code: "ok" });
      return res;
    } catch (error) {
      const code =
        error instanceof ConnectError
          ? error.code
          : error instanceof DomainError
            ? CODE_BY_KIND[error.kind]
            : Code.Internal;
      metrics.rpcRequests.inc({ ...labels, code: codeLabel(code) });
      throw error;
    } finally {
      stop();
    }
  };
}

/** "PermissionDenied" → "permission_denied", as the Connect protocol writes codes. */
export function codeLabel(code: Code): string {
  return (Code[code] ?? "Internal").replace(/(?<!^)([A-Z])/g, "_$1").toLowerCase();
}
