import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  ENTERPRISE_USER_SCHEMA,
  ADDRESS_PARTS,
  KEPT_STRINGS,
  MAX_PATCH_OPERATIONS,
  PATCH_OP_SCHEMA,
  USER_SCHEMA,
  type PatchOperation,
  type PatchTarget,
  type ScimCaller,
  type ScimAddress,
  type ScimEmail,
  type ScimEnterprise,
  type ScimMultiValue,
  type ScimManager,
  type ScimName,
  type ScimUserDocument,
  type ScimValue,
} from "../../domain/scim/model.js";
import {
  definitionsOf,
  FORBIDDEN_KEYS,
  pathOf,
  printable,
  resolveTarget,
  schemaNamed,
  SERVICE_OWNED,
  USER_SCHEMAS,
} from "../../domain/scim/user-schema.js";
import { DomainError, invalidArgument, permissionDenied, unauthenticated } from "../../errors/domain-error.js";
import { scimClientKey } from "../interceptors/authentication-interceptor.js";

/**
 * SCIM bodies at the RPC edge. The contract carries them as google.protobuf.Struct, because SCIM's
 * request JSON is open in ways a protobuf message's JSON mapping is not: attribute names are
 * case-insensitive (RFC 7643 2.1), attributes the service does not hold are ignored in a whole
 * resource (RFC 7644 3.3), Entra ID sends booleans as "True"/"False" and the manager as a bare id,
 * and a PATCH value is any JSON whose type depends on its path. Here they are decoded into the
 * domain's typed models (ScimUserDocument, PatchOperation) — names matched against the schema
 * table, every value checked for its attribute's type, length and format — so the domain never
 * reads wire JSON; and the domain's typed resources are turned back into Structs.
 */

/** The SCIM API user the authentication interceptor verified, as the company-confined caller of the SCIM domain. */
export function scimCallerOf(ctx: HandlerContext): ScimCaller {
  const client = ctx.values.get(scimClientKey);
  if (!client) throw unauthenticated("A valid SCIM token is required");
  // SCIM_TOKEN API users are COMPANY_ADMINs of one company (enforced at creation; checked again here).
  if (client.role !== "COMPANY_ADMIN" || !client.orgId)
    throw permissionDenied("SCIM provisioning requires a COMPANY_ADMIN SCIM API user of a company");
  return { clientId: client.clientId, tmcId: client.tmcId, companyId: client.orgId };
}

/** A typed SCIM document as the Struct the response carries (undefined attributes dropped: a Struct holds JSON only). */
export function structOf(document: object): JsonObject {
  return JSON.parse(JSON.stringify(document)) as JsonObject;
}

// ---- whole resources (create, replace) ---------------------------------------------------------

/**
 * A User resource sent by a client (RFC 7644 3.3, 3.5.1) as a typed document: it must list the
 * core schema; attributes /Schemas does not list, and read-only ones (id, meta, manager.$ref), are
 * ignored; an attribute sent as null is cleared.
 */
export function userDocumentOf(body: JsonObject | undefined): ScimUserDocument {
  const json = bodyOf(body, "resource");
  const schemas = json.schemas;
  if (
    !Array.isArray(schemas) ||
    !schemas.some((s) => typeof s === "string" && s.toLowerCase() === USER_SCHEMA.toLowerCase())
  ) {
    throw invalidArgument(`The resource must list the schema ${USER_SCHEMA} in "schemas"`, [
      { name: "schemas", value: "missing" },
    ]);
  }
  const attrs = caseInsensitive(json);
  const document: Record<string, unknown> = { schemas: schemas.filter((s) => typeof s === "string") };
  // In the order the values are checked.
  const fields: Array<[string, string, (value: JsonValue) => unknown]> = [
    ["username", "userName", userNameOf],
    ["emails", "emails", listOf("emails", emailOf)],
    ["name", "name", nameOf],
    ["externalid", "externalId", externalIdOf],
    ["displayname", "displayName", text("displayName")],
    ["active", "active", booleanOf],
    [ENTERPRISE_USER_SCHEMA.toLowerCase(), ENTERPRISE_USER_SCHEMA, enterpriseOf],
    ["title", "title", text("title")],
    ["phonenumbers", "phoneNumbers", listOf("phoneNumbers", phoneOf)],
    ["addresses", "addresses", listOf("addresses", addressOf)],
    ["preferredlanguage", "preferredLanguage", text("preferredLanguage")],
    ...KEPT_STRINGS.map((name): [string, string, (value: JsonValue) => unknown] => [
      name.toLowerCase(),
      name,
      text(name),
    ]),
  ];
  for (const [key, name, decode] of fields) {
    const value = attrs.get(key);
    if (value !== undefined) document[name] = decode(value);
  }
  return document as ScimUserDocument;
}

// ---- PATCH (RFC 7644 3.5.2) ----------------------------------------------------------------------

/**
 * A SCIM PatchOp message as typed operations: op names are case-insensitive (Entra ID sends
 * "Replace"); every path is resolved against the schema table (noTarget, mutability, invalidPath:
 * nothing is silently dropped); a path-less value object, or a value for the enterprise
 * extension's URN, is taken apart into one operation per attribute it names ("name.givenName" and
 * URN-qualified names included; id, meta and schemas echoed back in it are ignored, RFC 7644 3.3).
 * All paths are checked before any value; each value is then decoded for its target's type.
 */
export function patchOperationsOf(body: JsonObject | undefined): PatchOperation[] {
  const patch = bodyOf(body, "patch");
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
  // Attributes /Schemas lists as accepted and ignored (returned never) are dropped here.
  const targeted = operations.flatMap((raw, index) => targetedOperations(raw, index)).filter((t) => !t.target.ignored);
  for (const { op, target, value, index } of targeted) {
    const { attribute, sub } = definitionsOf(target);
    if ((op === "remove" || value === null) && (sub ?? attribute).alwaysHeld)
      throw new DomainError("MUTABILITY", `"${printable(pathOf(target))}" always holds a value: it cannot be removed`, {
        params: [{ name: `Operations[${index}].path`, value: printable(pathOf(target)) }],
      });
  }
  return targeted.map(({ op, target, value, index }) =>
    op === "remove" ? { op, target } : { op, target, value: valueFor(target, value!, index) },
  );
}

type OpName = "add" | "replace" | "remove";

interface Targeted {
  readonly op: OpName;
  readonly target: PatchTarget;
  /** The value as sent (undefined for remove). */
  readonly value: JsonValue | undefined;
  readonly index: number;
}

function targetedOperations(raw: JsonValue, index: number): Targeted[] {
  if (!isObject(raw))
    throw invalidArgument(`Operations[${index}] must be an object`, [
      { name: `Operations[${index}]`, value: "invalid" },
    ]);
  const { op, path, value } = raw;
  const name = typeof op === "string" ? op.toLowerCase() : "";
  if (name !== "add" && name !== "replace" && name !== "remove") {
    throw invalidArgument(`Operations[${index}].op must be add, replace or remove`, [
      { name: `Operations[${index}].op`, value: "invalid" },
    ]);
  }
  if (path !== undefined && typeof path !== "string")
    throw new DomainError("INVALID_PATH", `Operations[${index}].path must be a string`, {
      params: [{ name: "path", value: "invalid" }],
    });
  checkKeys(value);
  if (name === "remove" && (path === undefined || path === ""))
    throw new DomainError("NO_TARGET", `Operations[${index}]: remove needs a path`, {
      params: [{ name: `Operations[${index}].path`, value: "missing" }],
    });
  if (name !== "remove" && value === undefined)
    throw new DomainError("INVALID_VALUE", `Operations[${index}]: ${name} needs a value`, {
      params: [{ name: `Operations[${index}].value`, value: "missing" }],
    });
  if (path === undefined || path === "") return spread(name, undefined, value!, index);
  if (path.trim().toLowerCase() === ENTERPRISE_USER_SCHEMA.toLowerCase()) {
    if (name === "remove")
      return schemaNamed(ENTERPRISE_USER_SCHEMA)!.attributes.map((a) => ({
        op: name,
        target: resolveTarget(`${ENTERPRISE_USER_SCHEMA}:${a.name}`, index),
        value: undefined,
        index,
      }));
    return spread(name, ENTERPRISE_USER_SCHEMA, value!, index);
  }
  return [{ op: name, target: resolveTarget(path, index), value: name === "remove" ? undefined : value, index }];
}

/** A value object without a path (or for the extension's URN): one operation per attribute it holds. */
function spread(op: OpName, urn: string | undefined, value: JsonValue, index: number): Targeted[] {
  if (!isObject(value)) {
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
    const path = urn === undefined ? key : `${urn}:${key}`;
    return [{ op, target: resolveTarget(path, index), value: op === "remove" ? undefined : inner, index }];
  });
}

/** No key anywhere in a value may reach Object.prototype (scim-patch assigns dotted keys by walking objects). */
function checkKeys(value: JsonValue | undefined, depth = 0): void {
  if (depth > 16 || typeof value !== "object" || value === null) return;
  for (const [key, inner] of Object.entries(value)) {
    if (key.split(".").some((part) => FORBIDDEN_KEYS.has(part)))
      throw new DomainError("INVALID_VALUE", "The value holds a forbidden attribute name", {
        params: [{ name: "value", value: "invalid" }],
      });
    checkKeys(inner, depth + 1);
  }
}

// ---- values, by attribute ------------------------------------------------------------------------

/** The longest userName (an email address, RFC 5321) and other strings held. */
const MAX_USER_NAME = 320;
const MAX_TEXT = 256;
/** The most values of one multi-valued attribute. */
const MAX_VALUES = 50;
const EMAIL = /^[^\s@]+@[^\s@]+$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Decode = (value: JsonValue) => ScimValue;

const invalidValue = (message: string, attribute: string) =>
  new DomainError("INVALID_VALUE", message, { params: [{ name: attribute, value: "invalid" }] });

/**
 * How each attribute and sub-attribute the schema table lists is decoded, by its path
 * (`name`, `name.givenName`, `<URN>:manager.value`). Every writable one must have an entry: the
 * check below runs when the module loads, so a new attribute in user-schema.ts cannot be PATCHed
 * into an untyped value.
 */
const ENTERPRISE = `${ENTERPRISE_USER_SCHEMA}:`;
const DECODERS: Readonly<Record<string, Decode>> = {
  userName: userNameOf,
  externalId: externalIdOf,
  name: nameOf,
  "name.givenName": text("name.givenName"),
  "name.familyName": text("name.familyName"),
  "name.formatted": text("name.formatted"),
  displayName: text("displayName"),
  title: text("title"),
  "name.middleName": text("name.middleName"),
  "name.honorificPrefix": text("name.honorificPrefix"),
  "name.honorificSuffix": text("name.honorificSuffix"),
  ...multiValueDecoders("emails", emailOf),
  "emails.value": emailValueOf,
  ...multiValueDecoders("phoneNumbers", phoneOf),
  ...multiValueDecoders("addresses", addressOf),
  ...Object.fromEntries(ADDRESS_PARTS.map((sub) => [`addresses.${sub}`, text(`addresses.${sub}`)])),
  preferredLanguage: text("preferredLanguage"),
  ...Object.fromEntries(KEPT_STRINGS.map((name) => [name, text(name)])),
  active: booleanOf,
  [`${ENTERPRISE}employeeNumber`]: text("employeeNumber"),
  [`${ENTERPRISE}costCenter`]: text("costCenter"),
  [`${ENTERPRISE}organization`]: text("organization"),
  [`${ENTERPRISE}division`]: text("division"),
  [`${ENTERPRISE}department`]: text("department"),
  [`${ENTERPRISE}manager`]: managerOf,
  [`${ENTERPRISE}manager.value`]: managerIdOf,
};

for (const schema of USER_SCHEMAS) {
  const prefix = schema.id === USER_SCHEMA ? "" : `${schema.id}:`;
  for (const attribute of schema.attributes) {
    if (attribute.mutability === "readOnly" || attribute.ignored) continue;
    const paths = [
      attribute.name,
      ...(attribute.multiValued ? [`${attribute.name}[]`] : []),
      ...(attribute.subAttributes ?? []).flatMap((s) =>
        s.mutability === "readOnly" ? [] : [`${attribute.name}.${s.name}`],
      ),
    ];
    for (const path of paths)
      if (!Object.hasOwn(DECODERS, `${prefix}${path}`))
        throw new Error(`user-schema.ts lists ${prefix}${path}, which scim-mappers.ts cannot decode`);
  }
}

/** The value of one PATCH operation, decoded for the attribute (or element, or sub-attribute) it targets. */
function valueFor(target: PatchTarget, value: JsonValue, _index: number): ScimValue {
  const prefix = target.schema === USER_SCHEMA ? "" : `${target.schema}:`;
  const key =
    target.sub !== undefined
      ? `${target.attribute}.${target.sub}`
      : target.filter !== undefined
        ? `${target.attribute}[]`
        : target.attribute;
  return DECODERS[`${prefix}${key}`]!(value);
}

function text(attribute: string): (value: JsonValue) => string | null {
  return (value) => {
    if (value === null) return null;
    if (typeof value !== "string" || value.length > MAX_TEXT)
      throw invalidValue(`${attribute} must be a string of at most ${MAX_TEXT} characters`, attribute);
    return value;
  };
}

function userNameOf(value: JsonValue): string | null {
  if (value === null) return null;
  if (typeof value !== "string") throw invalidValue("userName is required and must be a string", "userName");
  return emailAddress(value.trim(), "userName");
}

function externalIdOf(value: JsonValue): string | null {
  return text("externalId")(value);
}

function nameOf(value: JsonValue): ScimName | null {
  if (value === null) return null;
  if (!isObject(value)) throw invalidValue("name must be an object", "name");
  const attrs = caseInsensitive(value);
  return prune({
    givenName: decoded(attrs.get("givenname"), text("name.givenName")),
    familyName: decoded(attrs.get("familyname"), text("name.familyName")),
    formatted: decoded(attrs.get("formatted"), text("name.formatted")),
    middleName: decoded(attrs.get("middlename"), text("name.middleName")),
    honorificPrefix: decoded(attrs.get("honorificprefix"), text("name.honorificPrefix")),
    honorificSuffix: decoded(attrs.get("honorificsuffix"), text("name.honorificSuffix")),
  });
}

/** A multi-valued attribute in a whole resource: a list of its values (one object is taken as a list of one). */
function listOf<T>(attribute: string, element: (value: JsonValue) => T): (value: JsonValue) => readonly T[] | null {
  return (value) => {
    if (value === null) return null;
    if (isObject(value)) return [element(value)];
    if (!Array.isArray(value) || value.length > MAX_VALUES)
      throw invalidValue(`${attribute} must be a list of at most ${MAX_VALUES} values`, attribute);
    return value.map(element);
  };
}

/**
 * A multi-valued attribute's decoders by PATCH target: the attribute (a list, or one value an add
 * appends), one element (`attr[filter]`), and type, primary and display (value is the caller's).
 */
function multiValueDecoders(attribute: string, element: (value: JsonValue) => object): Record<string, Decode> {
  return {
    [attribute]: (value) => (isObject(value) ? element(value) : listOf(attribute, element)(value)) as ScimValue,
    [`${attribute}[]`]: element as Decode,
    [`${attribute}.type`]: typeOf(attribute),
    [`${attribute}.primary`]: primaryOf,
    ...(attribute === "addresses" ? {} : { [`${attribute}.display`]: text(`${attribute}.display`) }),
    ...(attribute === "phoneNumbers" ? { [`${attribute}.value`]: text(`${attribute}.value`) } : {}),
  };
}

function multiValueOf(attribute: string, value: JsonValue, decodeValue: (value: JsonValue) => string | null) {
  const attrs = caseInsensitive(isObject(value) ? value : {});
  return prune({
    value: decoded(attrs.get("value"), decodeValue),
    display: decoded(attrs.get("display"), text(`${attribute}.display`)),
    type: decoded(attrs.get("type"), typeOf(attribute)),
    primary: decoded(attrs.get("primary"), primaryOf),
  });
}

/** One email; anything but an object is an email without a value. */
function emailOf(value: JsonValue): ScimEmail {
  return multiValueOf("emails", value, emailValueOf);
}

function phoneOf(value: JsonValue): ScimMultiValue {
  return multiValueOf("phoneNumbers", value, text("phoneNumbers.value"));
}

function addressOf(value: JsonValue): ScimAddress {
  const attrs = caseInsensitive(isObject(value) ? value : {});
  const part = (name: string) => decoded(attrs.get(name.toLowerCase()), text(`addresses.${name}`));
  return prune({
    ...Object.fromEntries(ADDRESS_PARTS.map((name) => [name, part(name)])),
    type: decoded(attrs.get("type"), typeOf("addresses")),
    primary: decoded(attrs.get("primary"), primaryOf),
  });
}

/** A type label (RFC 7643 2.4: the canonical values are suggestions; any label is kept as sent). */
function typeOf(attribute: string): (value: JsonValue) => string | null {
  return text(`${attribute}.type`);
}

function primaryOf(value: JsonValue): boolean | null {
  return booleanOf(value, "primary");
}

/**
 * An email value: any text of at most 320 characters, kept as sent (RFC 7643 leaves its syntax to
 * the IdP; only the userName must be an address, and the profile takes only one that looks like one).
 */
function emailValueOf(value: JsonValue): string | null {
  if (value === null) return null;
  if (typeof value !== "string" || value.length > MAX_USER_NAME)
    throw invalidValue(`emails.value must be a string of at most ${MAX_USER_NAME} characters`, "emails.value");
  return value.trim();
}

function emailAddress(value: string, attribute: string): string {
  if (value === "") return value;
  if (value.length > MAX_USER_NAME || !EMAIL.test(value))
    throw invalidValue(`${attribute} must be the user's business email address`, attribute);
  return value;
}

/** RFC 7643 boolean, or the strings Entra ID sends ("True", "False"). */
function booleanOf(value: JsonValue, attribute = "active"): boolean | null {
  if (value === null) return null;
  if (typeof value === "boolean") return value;
  if (typeof value === "string" && /^(true|false)$/i.test(value.trim())) return value.trim().toLowerCase() === "true";
  throw invalidValue(`${attribute} must be true or false`, attribute);
}

/** The enterprise extension object (attribute names case-insensitive). */
function enterpriseOf(value: JsonValue): ScimEnterprise | null {
  if (value === null) return null;
  if (!isObject(value)) throw invalidValue(`${ENTERPRISE_USER_SCHEMA} must be an object`, ENTERPRISE_USER_SCHEMA);
  const attrs = caseInsensitive(value);
  const manager = decoded(attrs.get("manager"), managerOf);
  return prune({
    ...(manager !== undefined ? { manager } : {}),
    employeeNumber: decoded(attrs.get("employeenumber"), text("employeeNumber")),
    costCenter: decoded(attrs.get("costcenter"), text("costCenter")),
    organization: decoded(attrs.get("organization"), text("organization")),
    division: decoded(attrs.get("division"), text("division")),
    department: decoded(attrs.get("department"), text("department")),
  });
}

/** manager as {value} or, as Entra ID sends it, the id alone; $ref and displayName are the service's. */
function managerOf(value: JsonValue): ScimManager | null {
  if (value === null) return null;
  // Entra's "Update Manager" request sends a list of one manager object.
  const single = Array.isArray(value) && value.length === 1 ? value[0]! : value;
  const id = isObject(single) ? (caseInsensitive(single).get("value") ?? null) : single;
  return { value: managerIdOf(id) };
}

function managerIdOf(value: JsonValue): string | null {
  const id = text("manager.value")(value);
  if (!id) return id;
  if (!UUID.test(id)) throw invalidValue("manager.value must be the id of a user of the company", "manager.value");
  return id.toLowerCase();
}

// ---- JSON helpers --------------------------------------------------------------------------------

function bodyOf(body: JsonObject | undefined, name: string): JsonObject {
  if (!body) throw invalidArgument("The request body must be a SCIM JSON object", [{ name, value: "missing" }]);
  return body;
}

function decoded<T>(value: JsonValue | undefined, decode: (value: JsonValue) => T): T | undefined {
  return value === undefined ? undefined : decode(value);
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** RFC 7643 2.1: attribute names are case-insensitive (and may carry the core schema's URN). */
function caseInsensitive(json: JsonObject): Map<string, JsonValue> {
  const map = new Map<string, JsonValue>();
  const urn = `${USER_SCHEMA.toLowerCase()}:`;
  for (const [key, value] of Object.entries(json)) {
    const lower = key.toLowerCase();
    map.set(lower.startsWith(urn) ? lower.slice(urn.length) : lower, value);
  }
  return map;
}

function prune<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
