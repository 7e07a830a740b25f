import { Code } from "@connectrpc/connect";
import { ServiceError } from "../errors.js";

/** Token-endpoint failures: ErrorResponse with a stable errorCode plus RFC 6749's `error`. */
export const invalidRequest = (message: string, parameter?: string) =>
  new ServiceError(Code.InvalidArgument, "INVALID_REQUEST", message, parameter ? [{ name: parameter, value: "invalid" }] : [], "", "invalid_request");

/** One body for an unknown client and a wrong secret (spec 7: 403). */
export const invalidClient = () =>
  new ServiceError(Code.PermissionDenied, "INVALID_CLIENT", "Client authentication failed", [], "", "invalid_client");

export const unsupportedGrantType = (grantType: string) =>
  new ServiceError(
    Code.InvalidArgument,
    "UNSUPPORTED_GRANT_TYPE",
    `Unsupported grant_type "${grantType.slice(0, 80)}"`,
    [{ name: "grant_type", value: grantType.slice(0, 80) }],
    "",
    "unsupported_grant_type",
  );

export const invalidGrant = (message: string) => new ServiceError(Code.InvalidArgument, "INVALID_GRANT", message, [], "", "invalid_grant");

/** RFC 8707 / RFC 8693: the requested audience is not one this service issues tokens for. */
export const invalidTarget = (audience: string) =>
  new ServiceError(Code.InvalidArgument, "INVALID_TARGET", "The requested audience is not allowed", [{ name: "audience", value: audience.slice(0, 200) }], "", "invalid_target");

export const tooManyRequests = (retryAfterSeconds: number) =>
  new ServiceError(
    Code.ResourceExhausted,
    "TOO_MANY_REQUESTS",
    "Rate limit exceeded; retry later with exponential backoff",
    [{ name: "retryAfterSeconds", value: String(retryAfterSeconds) }],
    "",
    "slow_down",
  );
