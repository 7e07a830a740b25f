import type { DescMethod } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import type { FastifyBaseLogger } from "fastify";
import type { Refusal } from "../../gateway/error-reply.js";
import type { DomainError } from "../../errors/domain-error.js";
import { errorAtEdge } from "../../rpc/errors/error-response.js";
import { printable } from "../../rpc/errors/printable.js";

/** Where a refusal of the protocol layer happened: the call's protocol, its logger (bound to the request id), and the note for its access-log line. */
export interface RefusalSite {
  readonly protocol: string;
  readonly log: FastifyBaseLogger;
  readonly note: (refusal: Refusal) => void;
}

/**
 * A refusal of the protocol layer, before or outside the interceptor chain (Connect's router
 * refused the bytes, or the lean gRPC path did), through the one error edge: the ErrorResponse in
 * the method's dialect, as a Connect error for the caller's protocol to frame. Noted for the
 * access-log line; logged at info with Connect's own reason, or at error with the cause when it
 * is INTERNAL_ERROR. `method` is undefined for a path that names no RPC.
 */
export function refusedByProtocol(
  error: DomainError,
  requestId: string,
  method: DescMethod | undefined,
  rpc: string,
  site: RefusalSite,
): ConnectError {
  const answer = errorAtEdge(error, requestId, method);
  if (answer.refusal) site.note({ ...answer.refusal, rpc });
  if (error.code === "INTERNAL_ERROR")
    site.log.error({ rpc, protocol: site.protocol, err: error.cause }, "rpc failed in the protocol layer");
  else
    site.log.info(
      { rpc, protocol: site.protocol, errorCode: error.code, cause: causeOf(error) },
      "rpc refused by the protocol layer",
    );
  return answer.connectError();
}

/** Connect's reason (cut short and escaped), or the kind of error the cause is. */
function causeOf(error: DomainError): string | undefined {
  if (error.cause instanceof ConnectError) return printable(error.cause.rawMessage, 300);
  return error.cause instanceof Error ? error.cause.name : undefined;
}
