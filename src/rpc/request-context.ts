import { createContextKey, type ContextValues } from "@connectrpc/connect";

/**
 * The request headers the RPC core reads (authorization and its DPoP proof; W3C trace context, so the RPC's span
 * continues the caller's trace; the user agent), all a face hands it: everything else stays at
 * the edge, and copying the rest into a Headers per call was measurable.
 */
export const RPC_REQUEST_HEADERS = ["authorization", "dpop", "user-agent", "traceparent", "tracestate"] as const;

/** Those of RPC_REQUEST_HEADERS a request carries, as the transport takes them (a repeated one once per value). */
export function rpcRequestHeaders(
  incoming: Readonly<Record<string, string | string[] | undefined>>,
): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const name of RPC_REQUEST_HEADERS) {
    const value = incoming[name];
    if (typeof value === "string") out.push([name, value]);
    else if (Array.isArray(value)) for (const each of value) out.push([name, each]);
  }
  return out;
}

/**
 * How a call reached the RPC core: through the REST gateway, over one of the RPC protocols, or
 * as the CLI's in-process call. Spans carry it (`travel.protocol`), so one RPC's traffic can be
 * told apart by the way it came.
 */
export type CallProtocol = "rest" | "grpc" | "grpc-web" | "connect" | "cli";

/** What every RPC knows about the request that carried it, whichever face it came through. */
export interface RequestInfo {
  /** The id the logs carry; returned to clients as ErrorResponse.debugIdentifier. */
  readonly requestId: string;
  readonly remoteAddress: string;
  /** Unset: the face did not say (taken as Connect). */
  readonly protocol?: CallProtocol;
  /**
   * The HTTP request as the client addressed it, behind TRUSTED_PROXIES as the proxy forwarded it
   * (X-Forwarded-Proto and -Host): what a DPoP proof's `htm` and `htu` must name. Unset for the CLI.
   */
  readonly target?: { readonly method: string; readonly url: string };
  /** Told the trace id of the call's span when tracing is on (the face puts it in the request's log line). */
  readonly traced?: (traceId: string) => void;
  /** Told why the RPC was refused (the face puts it in the request's log line). */
  readonly refused?: (refusal: RpcRefusal) => void;
}

/** Why an RPC was refused, for its request's log line. */
export interface RpcRefusal {
  readonly errorCode: string;
  readonly message: string;
  readonly rpc: string;
  /** The answer's errorParameters (the log line redacts any that name a credential). */
  readonly errorParameters?: ReadonlyArray<{ readonly name: string; readonly value: string }>;
  /** The refusal's log-only fields (DomainError.logged: which client, which check failed). */
  readonly logged?: Readonly<Record<string, string>>;
}

/**
 * Set by whoever hands a request to the RPC core: the network faces (src/http/protocol/)
 * and the REST gateway from the Fastify request, the CLI for its own calls. Headers would not
 * do: network callers could forge them.
 */
export const requestInfoKey = createContextKey<RequestInfo | undefined>(undefined, {
  description: "request id and peer of a network call",
});

/** Takes the context values of a handler (ctx.values) or an interceptor (req.contextValues). */
export function requestInfoOf(values: ContextValues): RequestInfo {
  return values.get(requestInfoKey) ?? { requestId: "unknown", remoteAddress: "unknown" };
}

/** The request's DPoP proof (RFC 9449 4.1) and what it must name: the request as the client addressed it. */
export function dpopRequestOf(
  header: Headers,
  values: ContextValues,
): { readonly proof: string | undefined; readonly target: RequestInfo["target"] } {
  return { proof: header.get("dpop") ?? undefined, target: requestInfoOf(values).target };
}
