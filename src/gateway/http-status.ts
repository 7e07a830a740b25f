import { Code } from "@connectrpc/connect";
import { isErrorCode, specOf } from "../errors/codes.js";

/** Connect code → HTTP status of the REST face (connect-es keeps its table private, so we own ours). */
export const STATUS_BY_CODE: Readonly<Record<Code, number>> = {
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

/** The code's status, unless the catalogue documents a more specific one for the errorCode (spec 7.3: the limit is a 409). */
export function httpStatusOf(code: Code, errorCode: string | undefined): number {
  const documented = errorCode && isErrorCode(errorCode) ? specOf(errorCode).httpStatus : undefined;
  return documented ?? STATUS_BY_CODE[code] ?? 500;
}
