import { Code } from "@connectrpc/connect";

export interface ErrorParameter {
  readonly name: string;
  readonly value: string;
}

/**
 * A failure the caller is allowed to see. `code` is the Connect/gRPC code (the REST gateway
 * maps it to an HTTP status); `errorCode` is the stable SCREAMING_SNAKE identifier that
 * appears in ErrorResponse.errorMessages[].errorCode. Anything that is not a ServiceError is
 * an internal failure: logged with its cause, answered as a generic INTERNAL error.
 */
export class ServiceError extends Error {
  constructor(
    readonly code: Code,
    readonly errorCode: string,
    message: string,
    readonly parameters: readonly ErrorParameter[] = [],
    readonly detail = "",
    /** RFC 6749 section 5.2 error, for token-endpoint failures. */
    readonly oauthError?: string,
  ) {
    super(message);
    this.name = "ServiceError";
  }
}

export const notFound = (what: string, parameters: ErrorParameter[] = []) =>
  new ServiceError(Code.NotFound, "NOT_FOUND", `${what} not found`, parameters);

export const invalidArgument = (message: string, parameters: ErrorParameter[] = []) =>
  new ServiceError(Code.InvalidArgument, "API_VALIDATION_FAILED", message, parameters);

export const unauthenticated = (message = "Authentication is required") =>
  new ServiceError(Code.Unauthenticated, "USER_NOT_AUTHENTICATED", message);

export const permissionDenied = (message = "The caller may not perform this operation") =>
  new ServiceError(Code.PermissionDenied, "PERMISSION_DENIED", message);
