import { Code } from "@connectrpc/connect";
import type { ErrorKind } from "../../errors/codes.js";

/** Catalogue kind → Connect code: the kinds mirror the gRPC codes one for one. */
export const CODE_BY_KIND: Readonly<Record<ErrorKind, Code>> = {
  INVALID_ARGUMENT: Code.InvalidArgument,
  UNAUTHENTICATED: Code.Unauthenticated,
  PERMISSION_DENIED: Code.PermissionDenied,
  NOT_FOUND: Code.NotFound,
  ALREADY_EXISTS: Code.AlreadyExists,
  FAILED_PRECONDITION: Code.FailedPrecondition,
  ABORTED: Code.Aborted,
  RESOURCE_EXHAUSTED: Code.ResourceExhausted,
  UNIMPLEMENTED: Code.Unimplemented,
  UNAVAILABLE: Code.Unavailable,
  CANCELED: Code.Canceled,
  DEADLINE_EXCEEDED: Code.DeadlineExceeded,
  INTERNAL: Code.Internal,
};
