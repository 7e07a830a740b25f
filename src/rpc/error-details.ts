import { create, type DescMessage } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ViolationsSchema, type Violation } from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import { ErrorResponseSchema, type ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";
import { ServiceError, type ErrorParameter } from "../domain/errors.js";

/** Builds the platform ErrorResponse for any failure; unknown failures reveal nothing. */
export function errorResponseFor(
  error: unknown,
  requestId: string,
  input?: DescMessage,
  options: { oauth?: boolean } = {},
): { code: Code; body: ErrorResponse } {
  const result = baseErrorResponse(error, requestId, input);
  // OAuth endpoints: every 400 also speaks RFC 6749 5.2, so standard clients understand it.
  if (options.oauth && result.code === Code.InvalidArgument && !result.body.error) {
    result.body.error = "invalid_request";
    result.body.errorDescription = result.body.errorMessages[0]?.message ?? "The request is invalid";
  }
  return result;
}

function baseErrorResponse(error: unknown, requestId: string, input?: DescMessage): { code: Code; body: ErrorResponse } {
  if (error instanceof ServiceError) {
    return {
      code: error.code,
      body: create(ErrorResponseSchema, {
        debugIdentifier: requestId,
        errorMessages: [
          {
            errorCode: error.errorCode,
            message: error.message,
            errorParameters: error.parameters.map((p) => ({ name: p.name, value: p.value })),
            errorDetail: error.detail,
          },
        ],
        error: error.oauthError ?? "",
        errorDescription: error.oauthError ? error.message : "",
      }),
    };
  }
  if (error instanceof ConnectError) {
    const existing = error.findDetails(ErrorResponseSchema)[0];
    if (existing) return { code: error.code, body: existing };
    if (error.code === Code.InvalidArgument) {
      // protovalidate's interceptor: one errorParameter per violated field path.
      const violations: Violation[] = error.findDetails(ViolationsSchema).flatMap((v) => v.violations);
      const parameters: ErrorParameter[] = violations.map((v) => ({
        name: fieldPathOf(v, input),
        value: v.message,
      }));
      return fromParts(Code.InvalidArgument, "API_VALIDATION_FAILED", "The request is invalid", parameters, requestId);
    }
    if (error.code === Code.Unimplemented) {
      return fromParts(Code.Unimplemented, "NOT_IMPLEMENTED", error.rawMessage, [], requestId);
    }
    if (error.code === Code.Canceled || error.code === Code.DeadlineExceeded) {
      return fromParts(error.code, error.code === Code.Canceled ? "CANCELED" : "DEADLINE_EXCEEDED", error.rawMessage, [], requestId);
    }
  }
  return fromParts(Code.Internal, "INTERNAL_ERROR", "An internal error occurred", [], requestId);
}

function fromParts(code: Code, errorCode: string, message: string, parameters: ErrorParameter[], requestId: string) {
  return {
    code,
    body: create(ErrorResponseSchema, {
      debugIdentifier: requestId,
      errorMessages: [{ errorCode, message, errorParameters: parameters, errorDetail: "" }],
    }),
  };
}

/** The violated field as a REST client names it: JSON names joined by dots ("companyId.id"). */
function fieldPathOf(violation: Violation, input: DescMessage | undefined): string {
  let message = input;
  const parts: string[] = [];
  for (const element of violation.field?.elements ?? []) {
    const field = message?.fields.find((f) => f.number === element.fieldNumber);
    let part = field?.jsonName ?? element.fieldName;
    if (element.subscript.case) part += `[${String(element.subscript.value)}]`;
    parts.push(part);
    message = field?.message;
  }
  return parts.join(".");
}

/** The ConnectError that carries an ErrorResponse as its detail, for every protocol. */
export function toConnectError(code: Code, body: ErrorResponse): ConnectError {
  const message = body.errorMessages[0]?.message ?? "error";
  return new ConnectError(message, code, undefined, [{ desc: ErrorResponseSchema, value: body }]);
}
