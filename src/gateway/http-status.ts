import { Code } from "@connectrpc/connect";

/** Connect code → HTTP status of the REST face (connect-es keeps its table private, so we own ours). */
const statusByCode: Record<Code, number> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 400,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

/** Where the documented REST status is more specific than the code (spec 7.3: the limit is a 409; body errors found by Fastify before any RPC). */
const statusByErrorCode: Readonly<Record<string, number>> = {
  API_USER_LIMIT_EXCEEDED: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
};

export function httpStatusOf(code: Code, errorCode: string | undefined): number {
  return (errorCode && statusByErrorCode[errorCode]) || statusByCode[code] || 500;
}
