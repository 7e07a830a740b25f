import { AsyncLocalStorage } from "node:async_hooks";
import { createContextKey, type ContextValues } from "@connectrpc/connect";

/** What every RPC knows about the request that carried it, whichever face it came through. */
export interface RequestInfo {
  /** The id the logs carry; returned to clients as ErrorResponse.debugIdentifier. */
  readonly requestId: string;
  readonly remoteAddress: string;
}

/** Set by the network face (connect-fastify's contextValues) from the Fastify request. */
export const requestInfoKey = createContextKey<RequestInfo | undefined>(undefined, {
  description: "request id and peer of a network call",
});

/**
 * Set by the REST gateway around its in-process call. The router transport does not carry
 * call-option context values to handlers, and headers could be forged by network callers,
 * so the gateway hands its request identity over in async-local storage instead.
 */
export const gatewayRequestInfo = new AsyncLocalStorage<RequestInfo>();

/** Takes the context values of a handler (ctx.values) or an interceptor (req.contextValues). */
export function requestInfoOf(values: ContextValues): RequestInfo {
  return (
    values.get(requestInfoKey) ??
    gatewayRequestInfo.getStore() ?? { requestId: "unknown", remoteAddress: "unknown" }
  );
}
