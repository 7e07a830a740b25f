import type { Refusal } from "../gateway/error-reply.js";
import type { Metrics } from "../observability/metrics.js";

/**
 * What every face records of a finished request, whichever server answered it (Fastify's routes,
 * or the lean gRPC path of grpc-unary.ts): the HTTP metrics, and the fields of its one
 * "request completed" line that say why it was refused.
 */
export function recordRequest(
  metrics: Metrics,
  request: { readonly method: string; readonly route: string; readonly status: number },
  responseTimeMs: number,
): void {
  metrics.httpRequests.inc({ method: request.method, route: request.route, status: String(request.status) });
  metrics.httpDuration.observe({ method: request.method, route: request.route }, responseTimeMs / 1000);
}

/**
 * A refusal says why: the catalogue errorCode, its message, the RPC, its errorParameters (a
 * validation refusal's fields) and its log-only fields (INVALID_CLIENT's client id and failed
 * check). Never a secret: messages are written for callers, and a parameter naming a credential
 * has its value redacted. Nothing for a request that was not refused.
 */
export function refusalFields(refusal: Refusal | undefined): object {
  if (!refusal) return {};
  const parameters = refusal.errorParameters?.map(({ name, value }) => ({
    name,
    value: CREDENTIAL_PARAMETER.test(name) ? "[redacted]" : value,
  }));
  return {
    errorCode: refusal.errorCode,
    errorMessage: refusal.message,
    rpc: refusal.rpc,
    ...(parameters?.length ? { errorParameters: parameters } : {}),
    ...refusal.logged,
  };
}

/** Parameter names whose value would be a credential (client_secret, subject_token, scimToken); token_type_hint is not. */
const CREDENTIAL_PARAMETER = /secret|password|authorization|(^|[._])token$|Token$/i;
