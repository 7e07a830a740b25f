import {
  InvalidScimPatchOp,
  NoPathInScimPatchOp,
  NoTarget,
  ScimError,
  scimPatch,
  type ScimPatchOperation,
  type ScimResource,
} from "scim-patch";
import { DomainError } from "../../errors/domain-error.js";
import type { PatchOperation, ScimUserDocument, ScimUserResource } from "./model.js";
import { pathOf } from "./user-schema.js";

/**
 * Applies PATCH operations (RFC 7644 3.5.2) to a User resource with scim-patch. Every operation's
 * target was resolved against the schema table (user-schema.ts resolveTarget: noTarget,
 * mutability, invalidPath) and its value decoded for the target's type at the RPC edge, so the
 * result holds only attributes the table lists, with values of their types; what scim-patch
 * refuses (a value filter matching nothing, a value that does not fit) is a SCIM 400, never a 500.
 */
export function applyPatch(resource: ScimUserResource, operations: readonly PatchOperation[]): ScimUserDocument {
  const applicable = operations.map(
    (operation) =>
      (operation.op === "remove"
        ? { op: "remove", path: pathOf(operation.target) }
        : { op: operation.op, path: pathOf(operation.target), value: operation.value }) as ScimPatchOperation,
  );
  try {
    return scimPatch(structuredClone(resource) as unknown as ScimResource, applicable, {
      mutateDocument: true,
      treatMissingAsAdd: true,
    }) as unknown as ScimUserDocument;
  } catch (error) {
    throw translated(error);
  }
}

function translated(error: unknown): DomainError {
  if (error instanceof DomainError) return error;
  // FilterOnEmptyArray and FilterArrayTargetNotFound (not exported) are a value filter that matches nothing.
  const name = error instanceof Error ? error.constructor.name : "";
  if (
    error instanceof NoTarget ||
    error instanceof NoPathInScimPatchOp ||
    name === "FilterOnEmptyArray" ||
    name === "FilterArrayTargetNotFound"
  ) {
    return new DomainError("NO_TARGET", "A PATCH operation's value filter matched nothing", { cause: error });
  }
  if (error instanceof InvalidScimPatchOp)
    return new DomainError("INVALID_VALUE", "A PATCH operation's value does not fit its target", { cause: error });
  if (error instanceof ScimError)
    return new DomainError("INVALID_PATH", "A PATCH operation could not be applied", { cause: error });
  // scim-patch walks the resource with the client's path; whatever else it throws is the client's input.
  return new DomainError("INVALID_PATH", "A PATCH operation could not be applied", { cause: error });
}
