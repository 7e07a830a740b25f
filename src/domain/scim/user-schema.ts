import { DomainError } from "../../errors/domain-error.js";
import { ADDRESS_PARTS, ENTERPRISE_USER_SCHEMA, SCHEMA_SCHEMA, USER_SCHEMA, type PatchTarget } from "./model.js";
import { parseFilterSyntax } from "./filter-syntax.js";

/**
 * The one table of what this service holds of a SCIM User (RFC 7643 4.1 and 4.3): /Schemas is
 * rendered from it, PATCH paths are resolved against it (readOnly → mutability, absent → noTarget),
 * (resolveTarget is the only way to name a PATCH target, so a PATCH cannot reach an attribute the
 * table lacks), and `attributes`/`excludedAttributes` are checked against it. Where each attribute is stored is
 * said in its description; test/scim/scim-round-trip.test.ts PATCHes every attribute and
 * sub-attribute listed in /Schemas (add, replace, path-less, remove) and reads it back: each is
 * stored and returned or refused with its scimType, so the table and the storage cannot drift apart.
 */
export interface AttributeDefinition {
  readonly name: string;
  readonly type: "string" | "boolean" | "complex" | "reference";
  readonly mutability: "readOnly" | "readWrite";
  readonly description: string;
  readonly multiValued?: boolean;
  readonly required?: boolean;
  readonly caseExact?: boolean;
  readonly returned?: "always" | "default";
  readonly uniqueness?: "none" | "server";
  readonly canonicalValues?: readonly string[];
  readonly referenceTypes?: readonly string[];
  readonly subAttributes?: readonly AttributeDefinition[];
  /**
   * Not rendered: the service always holds a value here (active, the work email's type and
   * primary), so a PATCH that removes it or writes null is refused (mutability) rather than
   * answered 200 and ignored.
   */
  readonly alwaysHeld?: true;
  /**
   * Accepted and ignored (RFC 7644 3.3): an IdP may send it, in a whole resource or a PATCH, and
   * nothing is stored; /Schemas renders it writeOnly and returned "never", so no client expects it back.
   */
  readonly ignored?: true;
}

export interface SchemaDefinition {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly attributes: readonly AttributeDefinition[];
}

/** Where the attributes the profile has no place for are kept. */
const KEPT = "Stored as sent (users.scim_attributes)";

/** value, display, type and primary of a multi-valued attribute (RFC 7643 2.4), stored as sent. */
function multiValueSubs(types: readonly string[]): AttributeDefinition[] {
  return [
    { name: "value", type: "string", mutability: "readWrite", description: "Stored as sent" },
    { name: "display", type: "string", mutability: "readWrite", description: "Stored as sent" },
    {
      name: "type",
      type: "string",
      mutability: "readWrite",
      canonicalValues: types,
      description: "Stored as sent",
    },
    {
      name: "primary",
      type: "boolean",
      mutability: "readWrite",
      description: "At most one value is primary: the last one written as primary stays so",
    },
  ];
}

const USER: SchemaDefinition = {
  id: USER_SCHEMA,
  name: "User",
  description:
    'User Account: a user of the API user\'s company. The attributes listed are stored and returned, except those returned "never", which are accepted and ignored; on create and replace any other attribute is ignored, and a PATCH naming one is refused (noTarget).',
  attributes: [
    {
      name: "id",
      type: "string",
      mutability: "readOnly",
      caseExact: true,
      returned: "always",
      uniqueness: "server",
      description: "The user's id (users.id), also the profile API's userId",
    },
    {
      name: "userName",
      type: "string",
      mutability: "readWrite",
      required: true,
      uniqueness: "server",
      description: "The business email address (businessInfo.email); unique in the company, case-insensitive",
    },
    {
      name: "externalId",
      type: "string",
      mutability: "readWrite",
      caseExact: true,
      uniqueness: "server",
      description:
        "The provisioning client's id for the user (users.external_id); unique among the company's users, so two IdP objects cannot claim one user",
    },
    {
      name: "name",
      type: "complex",
      mutability: "readWrite",
      description: "The user's name",
      subAttributes: [
        { name: "givenName", type: "string", mutability: "readWrite", description: "personalInfo.name.given" },
        { name: "familyName", type: "string", mutability: "readWrite", description: "personalInfo.name.family1" },
        {
          name: "formatted",
          type: "string",
          mutability: "readWrite",
          description: 'Stored as sent; on create and replace without one, "givenName familyName"',
        },
        { name: "middleName", type: "string", mutability: "readWrite", description: KEPT },
        { name: "honorificPrefix", type: "string", mutability: "readWrite", description: KEPT },
        { name: "honorificSuffix", type: "string", mutability: "readWrite", description: KEPT },
      ],
    },
    {
      name: "displayName",
      type: "string",
      mutability: "readWrite",
      description: 'Stored as sent; on create and replace without one, "givenName familyName"',
    },
    {
      name: "title",
      type: "string",
      mutability: "readWrite",
      description: "businessInfo.designation (the job title); a replace without it keeps it",
    },
    {
      name: "emails",
      type: "complex",
      multiValued: true,
      mutability: "readWrite",
      description:
        "Stored as sent, any number and type (users.scim_attributes); userName stays the identity. Without emails, the userName is shown as the one work email. The profile shows the primary one, else the first work one, else the first (personalInfo.email, when the profile has none of its own)",
      subAttributes: multiValueSubs(["work", "home", "other"]),
    },
    {
      name: "phoneNumbers",
      type: "complex",
      multiValued: true,
      mutability: "readWrite",
      description: `${KEPT} (the profile's phoneNumbers have no SCIM type)`,
      subAttributes: multiValueSubs(["work", "home", "mobile", "fax", "pager", "other"]),
    },
    {
      name: "addresses",
      type: "complex",
      multiValued: true,
      mutability: "readWrite",
      description: KEPT,
      subAttributes: [
        ...ADDRESS_PARTS.map((name): AttributeDefinition => ({
          name,
          type: "string",
          mutability: "readWrite",
          description: KEPT,
        })),
        {
          name: "type",
          type: "string",
          mutability: "readWrite",
          canonicalValues: ["work", "home", "other"],
          description: KEPT,
        },
        { name: "primary", type: "boolean", mutability: "readWrite", description: KEPT },
      ],
    },
    {
      name: "preferredLanguage",
      type: "string",
      mutability: "readWrite",
      description: "personalInfo.preferredLanguage of the profile; a replace without it keeps it",
    },
    ...["nickName", "profileUrl", "userType", "locale", "timezone"].map((name): AttributeDefinition => ({
      name,
      type: "string",
      mutability: "readWrite",
      description: KEPT,
    })),
    {
      name: "active",
      type: "boolean",
      mutability: "readWrite",
      description: 'isActive; also accepted as the strings "True" and "False"',
      alwaysHeld: true,
    },
    ...["password", "ims", "photos", "entitlements", "roles", "x509Certificates"].map((name): AttributeDefinition => ({
      name,
      type: name === "password" ? "string" : "complex",
      ...(name === "password" ? {} : { multiValued: true }),
      mutability: "readWrite",
      description: "Accepted and ignored: not stored, never returned",
      ignored: true,
    })),
  ],
};

const ENTERPRISE_USER: SchemaDefinition = {
  id: ENTERPRISE_USER_SCHEMA,
  name: "EnterpriseUser",
  description: "The enterprise extension (RFC 7643 4.3), mapped onto the user profile's businessInfo",
  attributes: [
    { name: "employeeNumber", type: "string", mutability: "readWrite", description: "businessInfo.employeeId" },
    { name: "costCenter", type: "string", mutability: "readWrite", description: "businessInfo.costCenterRef.name" },
    {
      name: "organization",
      type: "string",
      mutability: "readWrite",
      description: 'businessInfo.companySpecifiedAttributes, fixedColumnName "organization"',
    },
    {
      name: "division",
      type: "string",
      mutability: "readWrite",
      description: 'businessInfo.companySpecifiedAttributes, fixedColumnName "division"',
    },
    { name: "department", type: "string", mutability: "readWrite", description: "businessInfo.departmentRef.name" },
    {
      name: "manager",
      type: "complex",
      mutability: "readWrite",
      description: "businessInfo.managerRef: the id and display name of another user of the company",
      subAttributes: [
        {
          name: "value",
          type: "string",
          mutability: "readWrite",
          caseExact: true,
          description: "The id of a user of the company (also accepted as a plain string in place of the object)",
        },
        {
          name: "$ref",
          type: "reference",
          mutability: "readOnly",
          referenceTypes: ["User"],
          description: "The manager's location",
        },
        {
          name: "displayName",
          type: "string",
          mutability: "readOnly",
          description: "The manager's displayName when the manager was set",
        },
      ],
    },
  ],
};

/** Every schema a User resource may carry: the core one first. */
export const USER_SCHEMAS: readonly SchemaDefinition[] = [USER, ENTERPRISE_USER];

/** Common attributes (RFC 7643 3.1) the service owns: never writable, echoed back by clients. */
export const SERVICE_OWNED = new Set(["id", "meta", "schemas"]);

/** The schema a URN names (case-insensitive, RFC 7644 3.10), the core one when there is none. */
export function schemaNamed(urn: string | undefined): SchemaDefinition | undefined {
  if (urn === undefined) return USER;
  return USER_SCHEMAS.find((s) => s.id.toLowerCase() === urn.toLowerCase());
}

export function attributeNamed(
  attributes: readonly AttributeDefinition[] | undefined,
  name: string,
): AttributeDefinition | undefined {
  return attributes?.find((a) => a.name.toLowerCase() === name.toLowerCase());
}

/** One schema as /Schemas shows it (RFC 7643 7), with every characteristic spelled out. */
export function schemaDocument(schema: SchemaDefinition, baseUrl: string): Record<string, unknown> {
  const render = (a: AttributeDefinition): Record<string, unknown> => ({
    name: a.name,
    type: a.type,
    multiValued: a.multiValued ?? false,
    description: a.description,
    required: a.required ?? false,
    caseExact: a.caseExact ?? false,
    mutability: a.ignored ? "writeOnly" : a.mutability,
    returned: a.ignored ? "never" : (a.returned ?? "default"),
    uniqueness: a.uniqueness ?? "none",
    ...(a.canonicalValues ? { canonicalValues: a.canonicalValues } : {}),
    ...(a.referenceTypes ? { referenceTypes: a.referenceTypes } : {}),
    ...(a.subAttributes ? { subAttributes: a.subAttributes.map(render) } : {}),
  });
  return {
    schemas: [SCHEMA_SCHEMA],
    id: schema.id,
    name: schema.name,
    description: schema.description,
    attributes: schema.attributes.map(render),
    meta: { resourceType: "Schema", location: `${baseUrl}/Schemas/${schema.id}` },
  };
}

const invalidPath = (message: string) =>
  new DomainError("INVALID_PATH", message, { params: [{ name: "path", value: "invalid" }] });

/** Keys that would reach Object.prototype through scim-patch's path walking. */
export const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/** One attribute path (RFC 7644 3.10 ATTRPATH, or a valuePath with a sub-attribute): attr[.sub] or attr[filter][.sub]. */
const PATH = /^(?:(urn:[A-Za-z0-9:._-]+):)?([A-Za-z$][\w$-]*)(\[(.+)\])?(?:\.([A-Za-z$][\w$-]*))?$/s;

/**
 * A PATCH path resolved against the table (names case-insensitive, RFC 7644 3.10, and returned as
 * the schema spells them): a schema or attribute the table lacks is noTarget, a read-only one (or
 * a service-owned common attribute) mutability, a malformed path invalidPath.
 */
export function resolveTarget(path: string, index: number): PatchTarget {
  const match = PATH.exec(path.trim());
  if (!match) throw invalidPath(`The path "${printable(path)}" is not a valid SCIM attribute path`);
  const [, urn, attribute, bracket, filter, sub] = match;
  for (const part of [attribute, sub])
    if (part && FORBIDDEN_KEYS.has(part.toLowerCase())) throw invalidPath("The path names a forbidden attribute");
  if (filter !== undefined) {
    try {
      parseFilterSyntax(filter);
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
  // Accepted and ignored, whatever part of it the path names.
  if (definition.ignored)
    return { schema: schema.id, attribute: definition.name, filter: bracket, sub: undefined, ignored: true };
  if (definition.mutability === "readOnly")
    throw new DomainError("MUTABILITY", `"${definition.name}" is read-only`, at);
  if (bracket !== undefined && !definition.multiValued)
    throw invalidPath(`"${definition.name}" is not multi-valued: a value filter does not apply`);
  let subName: string | undefined;
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
    subName = subDefinition.name;
  }
  return { schema: schema.id, attribute: definition.name, filter: bracket, sub: subName };
}

/** The definitions a target names: its attribute and, when it names one, its sub-attribute. */
export function definitionsOf(target: PatchTarget): {
  attribute: AttributeDefinition;
  sub: AttributeDefinition | undefined;
} {
  const attribute = attributeNamed(schemaNamed(target.schema)!.attributes, target.attribute)!;
  return { attribute, sub: target.sub === undefined ? undefined : attributeNamed(attribute.subAttributes, target.sub) };
}

/** The target as scim-patch reads a path (the extension's attributes qualified by its URN). */
export function pathOf(target: PatchTarget): string {
  const prefix = target.schema === USER_SCHEMA ? "" : `${target.schema}:`;
  return `${prefix}${target.attribute}${target.filter ?? ""}${target.sub !== undefined ? `.${target.sub}` : ""}`;
}

/** Paths echoed in messages, without anything that is not plain text. */
export function printable(text: string): string {
  return text.replace(/[^\w.:$[\] "-]/g, "?").slice(0, 100);
}
