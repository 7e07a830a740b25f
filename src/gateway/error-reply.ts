import { toJson } from "@bufbuild/protobuf";
import type { FastifyReply, FastifyRequest } from "fastify";
import { ErrorDialect, ErrorResponseSchema } from "../../gen/travel/common/v1/error_pb.js";
import { errorAtEdge } from "../rpc/errors/error-response.js";
import { httpStatusOf } from "./http-status.js";

/** Why a request was refused, for its log line: the catalogue code, the message, and the RPC when one ran. */
export interface Refusal {
  readonly errorCode: string;
  readonly message: string;
  readonly rpc?: string;
  /** The answer's errorParameters (which fields a validation refusal names). */
  readonly errorParameters?: ReadonlyArray<{ readonly name: string; readonly value: string }>;
  /** Log-only fields of the refusal (which client, which check failed); never sent to the caller. */
  readonly logged?: Readonly<Record<string, string>>;
}

const refusals = new WeakMap<FastifyRequest, Refusal>();

/** Remembers why `request` was refused; the first note wins (the RPC's, which names the RPC), later ones only add what it lacked. */
export function noteRefusal(request: FastifyRequest, refusal: Refusal): void {
  const earlier = refusals.get(request);
  refusals.set(request, earlier ? { ...refusal, ...earlier, rpc: earlier.rpc ?? refusal.rpc } : refusal);
}

export function refusalOf(request: FastifyRequest): Refusal | undefined {
  return refusals.get(request);
}

/** Sends any failure as the platform ErrorResponse with its documented HTTP status. */
export function sendError(
  reply: FastifyReply,
  error: unknown,
  dialect = ErrorDialect.ERROR_DIALECT_UNSPECIFIED,
): FastifyReply {
  const { status, json, refusal } = renderError(error, reply.request.id, dialect);
  if (refusal) noteRefusal(reply.request, refusal);
  return reply
    .code(status)
    .header("x-request-id", reply.request.id)
    .header("cache-control", "no-store")
    .type(errorContentTypeOf(dialect))
    .send(json);
}

/** The media type of an error body in `dialect` (RFC 7644 3.12: SCIM errors are application/scim+json). */
export function errorContentTypeOf(dialect: ErrorDialect): string {
  return dialect === ErrorDialect.SCIM ? "application/scim+json; charset=utf-8" : "application/json; charset=utf-8";
}

/** The HTTP status and JSON body of any failure, for replies written outside Fastify (a raw socket). */
export function renderError(error: unknown, requestId: string, dialect = ErrorDialect.ERROR_DIALECT_UNSPECIFIED) {
  const { code, body, refusal } = errorAtEdge(error, requestId, dialect);
  // Errors relayed from the RPC carry the id of the same request already; make sure of it.
  body.debugIdentifier = requestId;
  const status = httpStatusOf(code, body.errorMessages[0]?.errorCode);
  // The SCIM dialect (RFC 7644 3.12) carries the HTTP status in the body, as a string.
  if (dialect === ErrorDialect.SCIM) body.status = String(status);
  return { status, json: toJson(ErrorResponseSchema, body), body, refusal };
}
