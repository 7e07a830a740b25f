/**
 * The whole error vocabulary of the service: every `errorCode` a caller can see, with its kind.
 * The kind mirrors the gRPC status codes (Zitadel's {Kind, ID}); the edges translate it to a
 * Connect code, an HTTP status and, where the contract asks for one, an error dialect (OAuth).
 * `httpStatus` is set only where the documented REST status is more specific than the kind's.
 */
export type ErrorKind =
  | "INVALID_ARGUMENT"
  | "UNAUTHENTICATED"
  | "PERMISSION_DENIED"
  | "NOT_FOUND"
  | "ALREADY_EXISTS"
  | "FAILED_PRECONDITION"
  | "ABORTED"
  | "RESOURCE_EXHAUSTED"
  | "UNIMPLEMENTED"
  | "UNAVAILABLE"
  | "CANCELED"
  | "DEADLINE_EXCEEDED"
  | "INTERNAL";

export interface ErrorCodeSpec {
  readonly kind: ErrorKind;
  /** A REST status that differs from the kind's usual one (spec 7.3: the API-user limit is 409). */
  readonly httpStatus?: number;
  readonly description: string;
}

export const ERROR_CODES = {
  // Input
  API_VALIDATION_FAILED: {
    kind: "INVALID_ARGUMENT",
    description: "The request is malformed; errorParameters name the fields",
  },
  PAYLOAD_TOO_LARGE: {
    kind: "INVALID_ARGUMENT",
    httpStatus: 413,
    description: "The request body is larger than BODY_LIMIT_BYTES",
  },
  UNSUPPORTED_MEDIA_TYPE: {
    kind: "INVALID_ARGUMENT",
    httpStatus: 415,
    description: "The Content-Type is not the one the route takes",
  },
  URI_TOO_LONG: {
    kind: "INVALID_ARGUMENT",
    httpStatus: 414,
    description: "The request URL is longer than HTTP_MAX_URL_BYTES",
  },
  REQUEST_HEADERS_TOO_LARGE: {
    kind: "INVALID_ARGUMENT",
    httpStatus: 431,
    description: "The request line and headers exceed the HTTP parser's limit",
  },
  REQUEST_TIMEOUT: {
    kind: "DEADLINE_EXCEEDED",
    httpStatus: 408,
    description: "The request did not arrive in full within HTTP_REQUEST_TIMEOUT_MS",
  },
  // Callers
  USER_NOT_AUTHENTICATED: {
    kind: "UNAUTHENTICATED",
    description: "No credential, or one that is invalid, expired or revoked",
  },
  PERMISSION_DENIED: {
    kind: "PERMISSION_DENIED",
    description: "The credential is valid but may not perform this operation",
  },
  // Resources
  NOT_FOUND: { kind: "NOT_FOUND", description: "The resource does not exist, or belongs to another tenant" },
  ROUTE_NOT_FOUND: { kind: "NOT_FOUND", description: "No REST route has this method and path" },
  METHOD_NOT_ALLOWED: {
    kind: "INVALID_ARGUMENT",
    httpStatus: 405,
    description:
      "The REST path (or SCIM resource) exists but not with this HTTP method; Allow names the methods it takes",
  },
  ALREADY_EXISTS: { kind: "ALREADY_EXISTS", description: "A resource with the same unique key exists" },
  API_USER_LIMIT_EXCEEDED: {
    kind: "FAILED_PRECONDITION",
    httpStatus: 409,
    description: "The TMC already has its maximum number of active API users",
  },
  SIGNING_KEY_ROTATION_PENDING: {
    kind: "FAILED_PRECONDITION",
    httpStatus: 409,
    description:
      "A signing key is already published and waiting to activate; rotate again once it signs, or rotate --now",
  },
  // SCIM provisioning (RFC 7644 3.12: each has its scimType in the SCIM error dialect)
  INVALID_FILTER: {
    kind: "INVALID_ARGUMENT",
    description: "The SCIM filter is malformed or uses an attribute or operator that is not supported",
  },
  INVALID_PATH: { kind: "INVALID_ARGUMENT", description: "A SCIM PATCH path is malformed" },
  INVALID_VALUE: {
    kind: "INVALID_ARGUMENT",
    description: "A SCIM attribute value is missing, of the wrong type or not allowed",
  },
  NO_TARGET: {
    kind: "INVALID_ARGUMENT",
    description:
      "A SCIM PATCH operation names no target (remove without a path, a filter that matches nothing, or an attribute /Schemas does not list)",
  },
  MUTABILITY: { kind: "INVALID_ARGUMENT", description: "A SCIM PATCH operation tries to change a read-only attribute" },
  // OAuth token endpoints (RFC 6749 5.2, RFC 8693 2.2.2)
  INVALID_REQUEST: { kind: "INVALID_ARGUMENT", description: "The token request is malformed" },
  INVALID_CLIENT: {
    kind: "PERMISSION_DENIED",
    description: "Client authentication failed (unknown client or wrong secret)",
  },
  CLIENT_AUTHENTICATION_REQUIRED: {
    kind: "UNAUTHENTICATED",
    description: "The token request carries no client authentication (RFC 6749 5.2: 401 invalid_client)",
  },
  RESOURCE_SERVER_AUTHENTICATION_FAILED: {
    kind: "UNAUTHENTICATED",
    description:
      "A resource server's client authentication failed: unknown or removed resource server, wrong secret, or an API user's credentials (RFC 7662 2.1: 401 invalid_client)",
  },
  UNAUTHORIZED_CLIENT: {
    kind: "PERMISSION_DENIED",
    description:
      "The authenticated client may not use this endpoint: batch introspection is for resource servers (RFC 6749 5.2: unauthorized_client)",
  },
  INVALID_GRANT: { kind: "INVALID_ARGUMENT", description: "The refresh token is invalid, expired, used or revoked" },
  INVALID_SCOPE: { kind: "INVALID_ARGUMENT", description: "The requested scope is malformed or wider than allowed" },
  INVALID_TARGET: { kind: "INVALID_ARGUMENT", description: "The requested audience is not allowed" },
  UNSUPPORTED_GRANT_TYPE: { kind: "INVALID_ARGUMENT", description: "The grant_type is not supported" },
  INVALID_DPOP_PROOF: {
    kind: "INVALID_ARGUMENT",
    description:
      "The DPoP proof (RFC 9449) is missing where the client must send one, malformed, replayed, or does not match the request",
  },
  USE_DPOP_NONCE: {
    kind: "INVALID_ARGUMENT",
    description: "The DPoP proof must carry the nonce of the DPoP-Nonce response header (RFC 9449 8)",
  },
  TOO_MANY_REQUESTS: {
    kind: "RESOURCE_EXHAUSTED",
    description: "A rate limit is exhausted; retry after Retry-After seconds",
  },
  TOO_MANY_CONCURRENT_REQUESTS: {
    kind: "RESOURCE_EXHAUSTED",
    description:
      "The caller's TMC (or resource server, or unauthenticated callers together) already runs its share of this instance (ADMISSION_PARTY_SHARE of DATABASE_POOL_MAX) with ADMISSION_QUEUE_PER_PARTY waiting; retry after Retry-After seconds",
  },
  TOO_MANY_OPEN_STREAMS: {
    kind: "RESOURCE_EXHAUSTED",
    description:
      "This instance already holds CHANGE_STREAM_MAX_OPEN change streams, or the resource server holds CHANGE_STREAM_MAX_OPEN_PER_RESOURCE_SERVER on it; retry after Retry-After seconds (another instance may have room)",
  },
  TOO_MANY_OPEN_POLLS: {
    kind: "RESOURCE_EXHAUSTED",
    description:
      "The resource server already has SSF_POLL_MAX_OPEN_PER_RESOURCE_SERVER security-event polls open on this instance; retry after Retry-After seconds",
  },
  // Contention (AIP-193, as Datastore and Firestore answer it): safe to retry the same call
  RESOURCE_BUSY: {
    kind: "ABORTED",
    description:
      "Another request is changing the same resource and held it longer than DATABASE_LOCK_TIMEOUT_MS; nothing was changed by this call; retry after Retry-After seconds",
  },
  // The service
  NOT_IMPLEMENTED: { kind: "UNIMPLEMENTED", description: "The operation is not implemented yet" },
  SERVICE_NOT_READY: { kind: "UNAVAILABLE", description: "A dependency of the service is unreachable" },
  SERVICE_OVERLOADED: {
    kind: "UNAVAILABLE",
    description:
      "This instance sheds load: it is at its adaptive concurrency limit, or the calls ahead of this one are not finishing (a stalled database); retry after Retry-After seconds (another instance may have room)",
  },
  DEPENDENCY_UNAVAILABLE: {
    kind: "UNAVAILABLE",
    description: "The database did not answer in time; retry with backoff",
  },
  CANCELED: { kind: "CANCELED", description: "The caller canceled the request" },
  DEADLINE_EXCEEDED: { kind: "DEADLINE_EXCEEDED", description: "The request's deadline passed before it completed" },
  INTERNAL_ERROR: {
    kind: "INTERNAL",
    description: "An unexpected failure; the cause is in the log, never in the answer",
  },
} as const satisfies Record<string, ErrorCodeSpec>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function specOf(code: ErrorCode): ErrorCodeSpec {
  return ERROR_CODES[code];
}

export function isErrorCode(value: string): value is ErrorCode {
  return Object.prototype.hasOwnProperty.call(ERROR_CODES, value);
}
