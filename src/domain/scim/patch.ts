import {
  InvalidScimPatchOp,
  NoPathInScimPatchOp,
  NoTarget,
  ScimError,
  scimPatch,
  type ScimPatchOperation,
  type ScimResource,
} from "scim-patch";
import { parse } from "scim2-parse-filter";
import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import { ENTERPRISE_USER_SCHEMA, MAX_PATCH_OPERATIONS, PATCH_OP_SCHEMA, USER_SCHEMA } from "./model.js";
import type { ScimJson } from "./resource.js";
import { attributeNamed, schemaNamed, SERVICE_OWNED } from "./user-schema.js";

const invalidPath = (message: string) =>
  new DomainError("INVALID_PATH", message, { params: [{ name: "path", value: "invalid" }] });

/** Keys that would reach Object.prototype through scim-patch's path walking. */
const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/** One attribute path (RFC 7644 3.10 ATTRPATH, or a valuePath with a sub-attribute): attr[.sub] or attr[filter][.sub]. */
const PATH = /^(?:(urn:[A-Za-z0-9:._-]+):)?([A-Za-z$][\w$-]*)(\[(.+)\])?(?:\.([A-Za-z$][\w$-]*))?$/s;

/**
 * Applies a SCIM PatchOp (RFC 7644 3.5.2) to a User resource with scim-patch, after checking the
 * message and each operation against the schema table (user-schema.ts): op names are
 * case-insensitive (Entra ID sends "Replace"); a path naming an attribute the schema lacks is
 * noTarget, a read-only one mutability, a malformed one invalidPath — nothing is silently
 * dropped. A path-less value object, or a value for the enterprise extension's URN, is taken
 * apart into one operation per attribute it names ("name.givenName" and URN-qualified names
 * included); id, meta and schemas echoed back in such an object are ignored (RFC 7644 3.3).
 * Every failure of the message or of scim-patch is a SCIM 400, never a 500.
 */
export function applyPatch(resource: ScimJson, patch: ScimJson): ScimJson {
  const schemas = patch.schemas;
  if (!Array.isArray(schemas) || !schemas.includes(PATCH_OP_SCHEMA)) {
    throw invalidArgument(`A PATCH request must list the schema ${PATCH_OP_SCHEMA} in "schemas"`, [
      { name: "schemas", value: "missing" },
    ]);
  }
  const operations = patch.Operations ?? patch.operations;
  if (!Array.isArray(operations) || operations.length === 0)
    throw invalidArgument('A PATCH request needs a non-empty "Operations" array', [
      { name: "Operations", value: "missing" },
    ]);
  if (operations.length > MAX_PATCH_OPERATIONS)
    throw invalidArgument(`A PATCH request has at most ${MAX_PATCH_OPERATIONS} operations`, [
      { name: "Operations", value: "too many" },
    ]);
  const applicable = operations.flatMap((raw, index) => checkedOperations(raw, index));
  try {
    return scimPatch(structuredClone(resource) as unknown as ScimResource, applicable, {
      mutateDocument: true,
      treatMissingAsAdd: true,
    }) as unknown as ScimJson;
  } catch (error) {
    throw translated(error);
  }
}

type OpName = "add" | "replace" | "remove";

function checkedOperations(raw: unknown, index: number): ScimPatchOperation[] {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    throw invalidArgument(`Operations[${index}] must be an object`, [
      { name: `Operations[${index}]`, value: "invalid" },
    ]);
  const { op, path, value } = raw as { op?: unknown; path?: unknown; value?: unknown };
  const name = typeof op === "string" ? op.toLowerCase() : "";
  if (name !== "add" && name !== "replace" && name !== "remove") {
    throw invalidArgument(`Operations[${index}].op must be add, replace or remove`, [
      { name: `Operations[${index}].op`, value: "invalid" },
    ]);
  }
  if (path !== undefined && typeof path !== "string") throw invalidPath(`Operations[${index}].path must be a string`);
  checkKeys(value);
  if (name === "remove" && (path === undefined || path === ""))
    throw new DomainError("NO_TARGET", `Operations[${index}]: remove needs a path`, {
      params: [{ name: `Operations[${index}].path`, value: "missing" }],
    });
  if (name !== "remove" && value === undefined)
    throw new DomainError("INVALID_VALUE", `Operations[${index}]: ${name} needs a value`, {
      params: [{ name: `Operations[${index}].value`, value: "missing" }],
    });
  if (path === undefined || path === "") return spread(name, undefined, value, index);
  if (path.trim().toLowerCase() === ENTERPRISE_USER_SCHEMA.toLowerCase()) {
    if (name === "remove")
      return enterpriseAttributes().map(
        (a) => ({ op: "remove", path: `${ENTERPRISE_USER_SCHEMA}:${a.name}` }) as ScimPatchOperation,
      );
    return spread(name, ENTERPRISE_USER_SCHEMA, value, index);
  }
  return [operation(name, path, value, index)];
}

/** A value object without a path (or for the extension's URN): one operation per attribute it holds. */
function spread(op: OpName, urn: string | undefined, value: unknown, index: number): ScimPatchOperation[] {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new DomainError(
      "INVALID_VALUE",
      `Operations[${index}]: without a path, the value must be an object of attributes`,
      { params: [{ name: `Operations[${index}].value`, value: "invalid" }] },
    );
  }
  return Object.entries(value).flatMap(([key, inner]) => {
    if (urn === undefined && SERVICE_OWNED.has(key.toLowerCase())) return [];
    if (urn === undefined && key.toLowerCase() === ENTERPRISE_USER_SCHEMA.toLowerCase())
      return spread(op, ENTERPRISE_USER_SCHEMA, inner, index);
    return [operation(op, urn === undefined ? key : `${urn}:${key}`, inner, index)];
  });
}

function operation(op: OpName, path: string, value: unknown, index: number): ScimPatchOperation {
  const target = resolvedPath(path, index);
  // Entra ID sends the manager as the bare id: {value: id} is what the schema says.
  const shaped = target.endsWith(":manager") && typeof value === "string" ? { value } : value;
  return (op === "remove" ? { op, path: target } : { op, path: target, value: shaped }) as ScimPatchOperation;
}

/**
 * The path with its attribute names as the schema spells them (scim-patch matches names exactly;
 * RFC 7644 3.10 makes them case-insensitive), after checking it against the schema table.
 */
function resolvedPath(path: string, index: number): string {
  const match = PATH.exec(path.trim());
  if (!match) throw invalidPath(`The path "${printable(path)}" is not a valid SCIM attribute path`);
  const [, urn, attribute, bracket, filter, sub] = match;
  for (const part of [attribute, sub])
    if (part && FORBIDDEN_KEYS.has(part.toLowerCase())) throw invalidPath("The path names a forbidden attribute");
  if (filter !== undefined) {
    try {
      parse(filter);
    } catch {
      throw invalidPath(`The value filter in "${printable(path)}" is not a valid SCIM filter`);
    }
  }
  const at = { params: [{ name: `Operations[${index}].path`, value: printable(path) }] };
  const schema = schemaNamed(urn);
  if (!schema)
    throw new DomainError("NO_TARGET", `"${printable(urn!)}" is not a schema of the User resource (see /Schemas)`, at);
  if (schema.id === USER_SCHEMA && SERVICE_OWNED.has(attribute!.toLowerCase()))
    throw new DomainError("MUTABILITY", `"${attribute!.toLowerCase()}" is read-only`, at);
  const definition = attributeNamed(schema.attributes, attribute!);
  if (!definition)
    throw new DomainError(
      "NO_TARGET",
      `The User resource holds no attribute "${printable(attribute!)}" (see /Schemas)`,
      at,
    );
  if (definition.mutability === "readOnly")
    throw new DomainError("MUTABILITY", `"${definition.name}" is read-only`, at);
  if (bracket !== undefined && !definition.multiValued)
    throw invalidPath(`"${definition.name}" is not multi-valued: a value filter does not apply`);
  let subName = "";
  if (sub !== undefined) {
    const subDefinition = attributeNamed(definition.subAttributes, sub);
    if (!subDefinition)
      throw new DomainError(
        "NO_TARGET",
        `"${definition.name}" has no sub-attribute "${printable(sub)}" (see /Schemas)`,
        at,
      );
    if (subDefinition.mutability === "readOnly")
      throw new DomainError("MUTABILITY", `"${definition.name}.${subDefinition.name}" is read-only`, at);
    subName = `.${subDefinition.name}`;
  }
  return `${schema.id === USER_SCHEMA ? "" : `${schema.id}:`}${definition.name}${bracket ?? ""}${subName}`;
}

function enterpriseAttributes() {
  return schemaNamed(ENTERPRISE_USER_SCHEMA)!.attributes;
}

/** Paths echoed in messages, without anything that is not plain text. */
function printable(text: string): string {
  return text.replace(/[^\w.:$[\] "-]/g, "?").slice(0, 100);
}

/** No key anywhere in a value may reach Object.prototype (scim-patch assigns dotted keys by walking objects). */
function checkKeys(value: unknown, depth = 0): void {
  if (depth > 16 || typeof value !== "object" || value === null) return;
  for (const [key, inner] of Object.entries(value)) {
    if (key.split(".").some((part) => FORBIDDEN_KEYS.has(part)))
      throw new DomainError("INVALID_VALUE", "The value holds a forbidden attribute name", {
        params: [{ name: "value", value: "invalid" }],
      });
    checkKeys(inner, depth + 1);
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
