import { InvalidScimPatchOp, NoPathInScimPatchOp, NoTarget, ScimError, scimPatch, type ScimPatchOperation, type ScimResource } from "scim-patch";
import { parse } from "scim2-parse-filter";
import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import { MAX_PATCH_OPERATIONS, PATCH_OP_SCHEMA, USER_SCHEMA } from "./model.js";
import type { ScimJson } from "./resource.js";

const invalidPath = (message: string) => new DomainError("INVALID_PATH", message, { params: [{ name: "path", value: "invalid" }] });

/** Top-level User attributes this service stores; PATCH paths naming any other attribute are ignored (RFC 7643: unsupported attributes). */
const STORED = new Set(["username", "name", "active", "externalid", "emails", "displayname"]);
const READ_ONLY = new Set(["id", "meta", "schemas"]);
/** Keys that would reach Object.prototype through scim-patch's path walking. */
const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/** One attribute path (RFC 7644 3.10 ATTRPATH, or a valuePath with a sub-attribute): attr[.sub] or attr[filter][.sub]. */
const PATH = /^(?:(urn:[A-Za-z0-9:._-]+):)?([A-Za-z][\w$-]*)(\[(.+)\])?(?:\.([A-Za-z][\w$-]*))?$/s;

/**
 * Applies a SCIM PatchOp (RFC 7644 3.5.2) to a User resource with scim-patch, after checking the
 * message and each operation: op names are case-insensitive (Entra ID sends "Replace"),
 * operations on attributes the service does not store are ignored, a path-less replace of a
 * value object works as RFC 7644 describes. Every failure of the message or of scim-patch is a
 * SCIM 400 (invalidSyntax, invalidPath, invalidValue, noTarget, mutability), never a 500.
 */
export function applyPatch(resource: ScimJson, patch: ScimJson): ScimJson {
  const schemas = patch.schemas;
  if (!Array.isArray(schemas) || !schemas.includes(PATCH_OP_SCHEMA)) {
    throw invalidArgument(`A PATCH request must list the schema ${PATCH_OP_SCHEMA} in "schemas"`, [{ name: "schemas", value: "missing" }]);
  }
  const operations = patch.Operations ?? patch.operations;
  if (!Array.isArray(operations) || operations.length === 0) throw invalidArgument('A PATCH request needs a non-empty "Operations" array', [{ name: "Operations", value: "missing" }]);
  if (operations.length > MAX_PATCH_OPERATIONS) throw invalidArgument(`A PATCH request has at most ${MAX_PATCH_OPERATIONS} operations`, [{ name: "Operations", value: "too many" }]);
  const applicable: ScimPatchOperation[] = [];
  for (const [index, raw] of operations.entries()) {
    const operation = checkedOperation(raw, index);
    if (operation) applicable.push(operation);
  }
  try {
    return scimPatch(structuredClone(resource) as unknown as ScimResource, applicable, { mutateDocument: true, treatMissingAsAdd: true }) as unknown as ScimJson;
  } catch (error) {
    throw translated(error);
  }
}

function checkedOperation(raw: unknown, index: number): ScimPatchOperation | undefined {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw invalidArgument(`Operations[${index}] must be an object`, [{ name: `Operations[${index}]`, value: "invalid" }]);
  const { op, path, value } = raw as { op?: unknown; path?: unknown; value?: unknown };
  const name = typeof op === "string" ? op.toLowerCase() : "";
  if (name !== "add" && name !== "replace" && name !== "remove") {
    throw invalidArgument(`Operations[${index}].op must be add, replace or remove`, [{ name: `Operations[${index}].op`, value: "invalid" }]);
  }
  if (path !== undefined && typeof path !== "string") throw invalidPath(`Operations[${index}].path must be a string`);
  checkKeys(value);
  if (name === "remove" && (path === undefined || path === "")) throw new DomainError("NO_TARGET", `Operations[${index}]: remove needs a path`, { params: [{ name: `Operations[${index}].path`, value: "missing" }] });
  if (name !== "remove" && value === undefined) throw new DomainError("INVALID_VALUE", `Operations[${index}]: ${name} needs a value`, { params: [{ name: `Operations[${index}].value`, value: "missing" }] });
  if (path === undefined || path === "") {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw new DomainError("INVALID_VALUE", `Operations[${index}]: without a path, the value must be an object of attributes`, { params: [{ name: `Operations[${index}].value`, value: "invalid" }] });
    }
    if (Object.keys(value).some((key) => READ_ONLY.has(key.toLowerCase()))) {
      // id, meta and schemas are read-only; a client echoing them back changes nothing (RFC 7644 3.5.2).
      const kept = Object.fromEntries(Object.entries(value).filter(([key]) => !READ_ONLY.has(key.toLowerCase())));
      return { op: name, value: kept } as ScimPatchOperation;
    }
    return { op: name, value } as ScimPatchOperation;
  }
  const attribute = pathAttribute(path);
  if (READ_ONLY.has(attribute)) throw new DomainError("MUTABILITY", `"${attribute}" is read-only`, { params: [{ name: `Operations[${index}].path`, value: "read-only" }] });
  if (!STORED.has(attribute)) return undefined;
  return { op: name, path: canonicalPath(path), value } as ScimPatchOperation;
}

/** The top-level attribute a path names (lower-cased), after checking its syntax and any value filter in it. */
function pathAttribute(path: string): string {
  const match = PATH.exec(path.trim());
  if (!match) throw invalidPath(`The path "${path.slice(0, 100)}" is not a valid SCIM attribute path`);
  const [, urn, attribute, , filter, sub] = match;
  for (const part of [attribute, sub]) if (part && FORBIDDEN_KEYS.has(part.toLowerCase())) throw invalidPath("The path names a forbidden attribute");
  if (filter !== undefined) {
    try {
      parse(filter);
    } catch {
      throw invalidPath(`The value filter in "${path.slice(0, 100)}" is not a valid SCIM filter`);
    }
  }
  // Extension schemas (the enterprise extension, …) are not stored: their attributes are ignored.
  if (urn !== undefined && urn.toLowerCase() !== USER_SCHEMA.toLowerCase()) return `${urn.toLowerCase()}:${attribute!.toLowerCase()}`;
  return attribute!.toLowerCase();
}

/**
 * scim-patch matches attribute names exactly; resources use the RFC's camelCase, clients may not
 * (RFC 7644 3.10: names are case-insensitive), so the known names are written canonically.
 */
const CANONICAL: Readonly<Record<string, string>> = {
  username: "userName",
  name: "name",
  active: "active",
  externalid: "externalId",
  emails: "emails",
  displayname: "displayName",
  givenname: "givenName",
  familyname: "familyName",
  value: "value",
};

function canonicalPath(path: string): string {
  const match = PATH.exec(path.trim())!;
  const [, , attribute, bracket, , sub] = match;
  const canonical = (name: string) => CANONICAL[name.toLowerCase()] ?? name;
  return `${canonical(attribute!)}${bracket ?? ""}${sub ? `.${canonical(sub)}` : ""}`;
}

/** No key anywhere in a value may reach Object.prototype (scim-patch assigns dotted keys by walking objects). */
function checkKeys(value: unknown, depth = 0): void {
  if (depth > 16 || typeof value !== "object" || value === null) return;
  for (const [key, inner] of Object.entries(value)) {
    if (key.split(".").some((part) => FORBIDDEN_KEYS.has(part))) throw new DomainError("INVALID_VALUE", "The value holds a forbidden attribute name", { params: [{ name: "value", value: "invalid" }] });
    checkKeys(inner, depth + 1);
  }
}

function translated(error: unknown): DomainError {
  if (error instanceof DomainError) return error;
  // FilterOnEmptyArray and FilterArrayTargetNotFound (not exported) are a value filter that matches nothing.
  const name = error instanceof Error ? error.constructor.name : "";
  if (error instanceof NoTarget || error instanceof NoPathInScimPatchOp || name === "FilterOnEmptyArray" || name === "FilterArrayTargetNotFound") {
    return new DomainError("NO_TARGET", "A PATCH operation's value filter matched nothing", { cause: error });
  }
  if (error instanceof InvalidScimPatchOp) return new DomainError("INVALID_VALUE", "A PATCH operation's value does not fit its target", { cause: error });
  if (error instanceof ScimError) return new DomainError("INVALID_PATH", "A PATCH operation could not be applied", { cause: error });
  // scim-patch walks the resource with the client's path; whatever else it throws is the client's input.
  return new DomainError("INVALID_PATH", "A PATCH operation could not be applied", { cause: error });
}
