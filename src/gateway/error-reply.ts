import { toJson } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import type { FastifyReply } from "fastify";
import { ErrorResponseSchema } from "../../gen/travel/common/v1/error_pb.js";
import { errorResponseFor } from "../rpc/error-details.js";
import { ServiceError } from "../domain/errors.js";
import { httpStatusOf } from "./http-status.js";

/** Sends any failure as the platform ErrorResponse with its documented HTTP status. */
export function sendError(reply: FastifyReply, error: unknown, options: { oauth?: boolean } = {}): FastifyReply {
  const requestId = reply.request.id;
  const { code, body } = errorResponseFor(error instanceof ConnectError || error instanceof ServiceError ? error : undefined, requestId, undefined, options);
  // Errors relayed from the RPC carry the id of the same request already; make sure of it.
  body.debugIdentifier = requestId;
  const status = httpStatusOf(code, body.errorMessages[0]?.errorCode);
  return reply
    .code(status)
    .header("cache-control", "no-store")
    .type("application/json; charset=utf-8")
    .send(toJson(ErrorResponseSchema, body));
}
