import { Code } from "@connectrpc/connect";
import { ServiceError } from "../domain/errors.js";

/** Turns driver errors the caller caused into domain errors; everything else propagates. */
export function rethrowDbError(error: unknown, conflictMessage = "The resource already exists"): never {
  const code = (error as { code?: unknown }).code;
  if (code === "23505") throw new ServiceError(Code.AlreadyExists, "ALREADY_EXISTS", conflictMessage);
  if (code === "23503") throw new ServiceError(Code.NotFound, "NOT_FOUND", "A referenced resource does not exist");
  throw error;
}
