import { toJson } from "@bufbuild/protobuf";
import type { FastifyReply } from "fastify";
import { ErrorDialect, ErrorResponseSchema } from "../../gen/travel/common/v1/error_pb.js";
import { translateError } from "../rpc/errors/error-response.js";
import { httpStatusOf } from "./http-status.js";

/** Sends any failure as the platform ErrorResponse with its documented HTTP status. */
export function sendError(reply: FastifyReply, error: unknown, dialect = ErrorDialect.ERROR_DIALECT_UNSPECIFIED): FastifyReply {
  const { status, json } = renderError(error, reply.request.id, dialect);
  return reply
    .code(status)
    .header("x-request-id", reply.request.id)
    .header("cache-control", "no-store")
    .type("application/json; charset=utf-8")
    .send(json);
}

/** The HTTP status and JSON body of any failure, for replies written outside Fastify (a raw socket). */
export function renderError(error: unknown, requestId: string, dialect = ErrorDialect.ERROR_DIALECT_UNSPECIFIED) {
  const { code, body } = translateError(error, requestId, undefined, dialect);
  // Errors relayed from the RPC carry the id of the same request already; make sure of it.
  body.debugIdentifier = requestId;
  return { status: httpStatusOf(code, body.errorMessages[0]?.errorCode), json: toJson(ErrorResponseSchema, body) };
}
