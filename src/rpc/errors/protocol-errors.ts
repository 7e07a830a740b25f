import { Code, ConnectError } from "@connectrpc/connect";
import { DomainError } from "../../errors/domain-error.js";
import { printable } from "./printable.js";

/** How much of the protocol layer's own complaint the caller gets to see. */
const MAX_REASON_LENGTH = 200;

/**
 * The internal errors of Connect's protocol layer that are the caller's fault: bytes that are not
 * a message, a body its content encoding cannot decompress, an envelope flagged compressed
 * without an encoding. Every other INTERNAL of that layer is the server's.
 */
const CLIENT_CAUSED_INTERNAL =
  /^(parse binary: |decompression failed|received compressed envelope|received parsed JSON request body)/;

/**
 * A refusal by Connect's protocol layer, which runs before the interceptor chain (so before
 * errorInterceptor), as a catalogue error. Everything about the request's bytes — a message that
 * does not decode, a body that does not decompress, a bad envelope, an unknown content encoding, a
 * timeout header that is not one, a unary call with no message or two — is the caller's:
 * INVALID_ARGUMENT naming connect's reason (escaped, cut short), never INTERNAL. A message over
 * the size limit is PAYLOAD_TOO_LARGE, as on REST; over gRPC and gRPC-Web (`grpc`), an unknown
 * encoding is UNIMPLEMENTED. Anything else is INTERNAL_ERROR, with the
 * original as the cause for the log.
 */
export function protocolRefusal(error: ConnectError, grpc = false): DomainError {
  const reason = error.rawMessage;
  switch (error.code) {
    case Code.ResourceExhausted:
      if (reason.includes("readMaxBytes"))
        return new DomainError("PAYLOAD_TOO_LARGE", "The request body is too large", { cause: error });
      break;
    case Code.DeadlineExceeded:
      return new DomainError("DEADLINE_EXCEEDED", "The request's deadline passed before it was read", { cause: error });
    case Code.Canceled:
      return new DomainError("CANCELED", "The caller canceled the request", { cause: error });
    case Code.InvalidArgument:
      return undecodable(reason, error);
    case Code.Unimplemented:
      // gRPC's compression.md: an encoding the server does not support is UNIMPLEMENTED (Connect's
      // protocol keeps its 400). "protocol error: missing/extra input message": gRPC's
      // UNIMPLEMENTED, yet nothing is missing on our side.
      if (grpc && reason.startsWith("unknown compression"))
        return new DomainError("NOT_IMPLEMENTED", printable(reason, MAX_REASON_LENGTH), { cause: error });
      if (/^(protocol error|unknown compression)/.test(reason)) return undecodable(reason, error);
      break;
    case Code.Internal:
      if (CLIENT_CAUSED_INTERNAL.test(reason)) return undecodable(reason, error);
      break;
    default:
      break;
  }
  return new DomainError("INTERNAL_ERROR", "An internal error occurred", { cause: error });
}

/**
 * A failure of Connect's protocol layer met inside the interceptor chain: a streaming call's
 * messages are read while the handler runs (the credential-change stream, health Watch,
 * reflection), so a body that does not decode, decompress or frame fails there, as a bare
 * ConnectError. It is the caller's refusal (protocolRefusal's), or undefined for anything else:
 * errors that carry details are the chain's own (the ErrorResponse, protovalidate's violations).
 */
export function chainProtocolRefusal(error: unknown, grpc: boolean): DomainError | undefined {
  if (!(error instanceof ConnectError) || error.details.length > 0) return undefined;
  const refusal = protocolRefusal(error, grpc);
  return CALLERS_BYTES.has(refusal.code) ? refusal : undefined;
}

/** The refusals of protocolRefusal that are about the request's bytes. */
const CALLERS_BYTES: ReadonlySet<string> = new Set(["API_VALIDATION_FAILED", "PAYLOAD_TOO_LARGE", "NOT_IMPLEMENTED"]);

/** The message whose error could not even be written (it was not well-formed Unicode): the request's bytes, which only the protocol layer quotes. */
export function unwritableRefusal(cause: unknown): DomainError {
  return new DomainError("API_VALIDATION_FAILED", "The request could not be decoded", { cause });
}

function undecodable(reason: string, cause: ConnectError): DomainError {
  return new DomainError(
    "API_VALIDATION_FAILED",
    `The request could not be decoded: ${printable(withoutTypeNames(reason), MAX_REASON_LENGTH)}`,
    { cause },
  );
}

/**
 * A protobuf name with its package ("travel.apiuser.v2.ListApiUsersRequest", with ".limit" when
 * it names a field): the decoder's complaints carry them, and they tell a caller (before any
 * authentication) how the service is built, not what was wrong with the request.
 */
const QUALIFIED_NAME = /\b[a-z]\w*(?:\.[a-z]\w*)*\.(?:[A-Z]\w*\.)*[A-Z]\w*(?:\.([a-z_]\w*))?\b/g;

/** The reason with each protobuf name replaced by the field it names ("field limit"), or "message". */
export function withoutTypeNames(reason: string): string {
  return reason
    .replace(/cannot decode (?:field|message|enum) /g, "cannot decode ")
    .replace(QUALIFIED_NAME, (_name, field: string | undefined) => (field ? `field ${field}` : "message"));
}
