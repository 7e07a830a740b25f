import { toJson } from "@bufbuild/protobuf";
import type { FastifyReply } from "fastify";
import { ErrorDialect, ErrorResponseSchema } from "../../gen/travel/common/v1/error_pb.js";
import { translateError } from "../rpc/errors/error-response.js";
import { httpStatusOf } from "./http-status.js";

/** Sends any failure as the platform ErrorResponse with its documented HTTP status. */
export function sendError(reply: FastifyReply, error: unknown, dialect = ErrorDialect.ERROR_DIALECT_UNSPECIFIED): FastifyReply {
  const requestId = reply.request.id;
  const { code, body } = translateError(error, requestId, undefined, dialect);
  // Errors relayed from the RPC carry the id of the same request already; make sure of it.
  body.debugIdentifier = requestId;
  return reply
    .code(httpStatusOf(code, body.errorMessages[0]?.errorCode))
    .header("cache-control", "no-store")
    .type("application/json; charset=utf-8")
    .send(toJson(ErrorResponseSchema, body));
}
