import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import { enterpriseOf, titleOf } from "./enterprise-profile.js";
import {
  ENTERPRISE_USER_SCHEMA,
  LIST_RESPONSE_SCHEMA,
  MAX_PAGE_COUNT,
  RESOURCE_TYPE_SCHEMA,
  SERVICE_PROVIDER_CONFIG_SCHEMA,
  USER_SCHEMA,
  type EnterpriseAttributes,
  type ScimUser,
  type ScimUserAttributes,
} from "./model.js";
import { schemaDocument, schemaNamed, USER_SCHEMAS } from "./user-schema.js";

/** A JSON object as SCIM exchanges it. */
export type ScimJson = { [key: string]: unknown };

const invalidValue = (message: string, attribute: string) =>
  new DomainError("INVALID_VALUE", message, { params: [{ name: attribute, value: "invalid" }] });

/** The longest userName (an email address, RFC 5321) and name parts / externalId we store. */
const MAX_USER_NAME = 320;
const MAX_TEXT = 256;
const EMAIL = /^[^\s@]+@[^\s@]+$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A stored user as a SCIM User resource (RFC 7643 4.1, with the enterprise extension of 4.3 when it has a value). */
export function userResource(user: ScimUser, baseUrl: string): ScimJson {
  const { managerId, managerName, ...enterprise } = enterpriseOf(user.businessInfo);
  const extension: ScimJson = {
    ...enterprise,
    ...(managerId !== undefined
      ? {
          manager: {
            value: managerId,
            $ref: `${baseUrl}/Users/${managerId}`,
            ...(managerName ? { displayName: managerName } : {}),
          },
        }
      : {}),
  };
  const hasExtension = Object.keys(extension).length > 0;
  return {
    schemas: hasExtension ? [USER_SCHEMA, ENTERPRISE_USER_SCHEMA] : [USER_SCHEMA],
    id: user.id,
    ...(user.externalId !== undefined ? { externalId: user.externalId } : {}),
    userName: user.userName,
    name: {
      givenName: user.givenName,
      familyName: user.familyName,
      ...(user.formattedName !== undefined ? { formatted: user.formattedName } : {}),
    },
    ...(user.displayName !== undefined ? { displayName: user.displayName } : {}),
    ...(titleOf(user.businessInfo) !== undefined ? { title: titleOf(user.businessInfo) } : {}),
    emails: [{ value: user.userName, type: "work", primary: true }],
    active: user.active,
    ...(hasExtension ? { [ENTERPRISE_USER_SCHEMA]: extension } : {}),
    meta: {
      resourceType: "User",
      created: user.created.toISOString(),
      lastModified: user.lastModified.toISOString(),
      location: `${baseUrl}/Users/${user.id}`,
    },
  };
}

/**
 * How a resource sent by a client is read: `create` and `replace` are whole resources (RFC 7644
 * 3.3, 3.5.1: name.formatted and displayName default to "givenName familyName", a replace without
 * the enterprise extension keeps the stored one); `patch` is the stored resource after the PATCH
 * operations (an attribute missing from it was removed).
 */
export type ReadMode =
  | { readonly kind: "create" }
  | { readonly kind: "replace"; readonly current: ScimUser }
  | { readonly kind: "patch"; readonly current: ScimUser };

/**
 * The attributes of a User resource sent by a client (create, replace, and the result of a PATCH),
 * as listed in user-schema.ts. Attributes not listed there are ignored in a whole resource, as are
 * read-only ones (id, meta, manager.$ref, RFC 7644 3.3); a PATCH cannot name them (patch.ts).
 * `active` may arrive as "True"/"False" (Entra ID). Absent `active` keeps the current value (true
 * on create). emails holds one work email, the userName (see emailOf).
 */
export function userAttributes(json: ScimJson, mode: ReadMode): ScimUserAttributes {
  if (mode.kind !== "patch") {
    const schemas = json.schemas;
    if (
      !Array.isArray(schemas) ||
      !schemas.some((s) => typeof s === "string" && s.toLowerCase() === USER_SCHEMA.toLowerCase())
    ) {
      throw invalidArgument(`The resource must list the schema ${USER_SCHEMA} in "schemas"`, [
        { name: "schemas", value: "missing" },
      ]);
    }
  }
  const current = mode.kind === "create" ? undefined : mode.current;
  const attrs = caseInsensitive(json);
  const sentUserName = attrs.get("username");
  if (typeof sentUserName !== "string" || sentUserName.trim() === "")
    throw invalidValue("userName is required and must be a string", "userName");
  const userName = emailOf(attrs.get("emails"), email(sentUserName.trim(), "userName"), mode);
  const name = attrs.get("name");
  if (name !== undefined && name !== null && (typeof name !== "object" || Array.isArray(name)))
    throw invalidValue("name must be an object", "name");
  const nameAttrs = caseInsensitive((name ?? {}) as ScimJson);
  const externalId = attrs.get("externalid");
  if (
    externalId !== undefined &&
    externalId !== null &&
    (typeof externalId !== "string" || externalId.length > MAX_TEXT)
  ) {
    throw invalidValue(`externalId must be a string of at most ${MAX_TEXT} characters`, "externalId");
  }
  const givenName = text(nameAttrs.get("givenname"), "name.givenName");
  const familyName = text(nameAttrs.get("familyname"), "name.familyName");
  const fullName = [givenName, familyName].filter((p) => p !== "").join(" ") || undefined;
  const defaulted = (value: string) => (value !== "" ? value : mode.kind === "patch" ? undefined : fullName);
  return {
    userName,
    givenName,
    familyName,
    formattedName: defaulted(text(nameAttrs.get("formatted"), "name.formatted")),
    displayName: defaulted(text(attrs.get("displayname"), "displayName")),
    active: active(attrs.get("active"), current?.active ?? true),
    externalId: typeof externalId === "string" && externalId !== "" ? externalId : undefined,
    enterprise: enterpriseAttributes(attrs.get(ENTERPRISE_USER_SCHEMA.toLowerCase()), mode),
    title:
      attrs.has("title") || mode.kind === "patch"
        ? { value: text(attrs.get("title"), "title") || undefined }
        : undefined,
  };
}

/**
 * emails is the userName seen as the one work email (RFC 7643 4.1.2), so the two never disagree:
 * in a whole resource they must be equal; in a PATCH, a changed work email changes the userName.
 * Another type, a second email, or (PATCH) no email at all is refused rather than dropped.
 */
function emailOf(emails: unknown, userName: string, mode: ReadMode): string {
  if (emails === undefined || emails === null || (Array.isArray(emails) && emails.length === 0)) {
    if (mode.kind === "patch")
      throw invalidValue("emails holds the userName (the work email) and cannot be removed", "emails");
    return userName;
  }
  if (!Array.isArray(emails) || emails.length > 1)
    throw invalidValue('emails holds exactly one email, of type "work" (the userName)', "emails");
  const entry = caseInsensitive(isObject(emails[0]) ? emails[0] : {});
  const type = entry.get("type");
  if (type !== undefined && type !== null && (typeof type !== "string" || type.toLowerCase() !== "work"))
    throw invalidValue('Only the "work" email is held (it is the userName)', "emails.type");
  const primary = entry.get("primary");
  if (primary !== undefined && primary !== null && active(primary, true) !== true)
    throw invalidValue("The work email is the primary email", "emails.primary");
  const sent = entry.get("value");
  if (typeof sent !== "string" || sent.trim() === "")
    throw invalidValue("emails.value is required and must be a string", "emails.value");
  const value = email(sent.trim(), "emails.value");
  if (value.toLowerCase() === userName.toLowerCase()) return userName;
  if (mode.kind === "patch" && value === mode.current.userName) return userName;
  if (mode.kind === "patch" && userName === mode.current.userName) return value;
  throw invalidValue('emails[type eq "work"].value is the userName: the two must be equal', "emails.value");
}

function email(value: string, attribute: string): string {
  if (value.length > MAX_USER_NAME || !EMAIL.test(value))
    throw invalidValue(`${attribute} must be the user's business email address`, attribute);
  return value;
}

/** The enterprise extension object (attribute names case-insensitive; manager as {value} or, as Entra ID sends it, the id alone). */
function enterpriseAttributes(extension: unknown, mode: ReadMode): EnterpriseAttributes | undefined {
  if (extension === undefined || extension === null) return mode.kind === "patch" ? {} : undefined;
  if (!isObject(extension)) throw invalidValue(`${ENTERPRISE_USER_SCHEMA} must be an object`, ENTERPRISE_USER_SCHEMA);
  const attrs = caseInsensitive(extension);
  const optional = (key: string, name: string) => text(attrs.get(key), name) || undefined;
  const manager = attrs.get("manager");
  const managerValue = isObject(manager) ? caseInsensitive(manager).get("value") : manager;
  const managerId =
    managerValue === undefined || managerValue === null ? undefined : text(managerValue, "manager.value") || undefined;
  if (managerId !== undefined && !UUID.test(managerId))
    throw invalidValue("manager.value must be the id of a user of the company", "manager.value");
  const result = {
    employeeNumber: optional("employeenumber", "employeeNumber"),
    costCenter: optional("costcenter", "costCenter"),
    organization: optional("organization", "organization"),
    division: optional("division", "division"),
    department: optional("department", "department"),
    managerId: managerId?.toLowerCase(),
  };
  return Object.fromEntries(Object.entries(result).filter(([, v]) => v !== undefined));
}

function isObject(value: unknown): value is ScimJson {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function text(value: unknown, attribute: string): string {
  if (value === undefined || value === null) return "";
  if (typeof value !== "string" || value.length > MAX_TEXT)
    throw invalidValue(`${attribute} must be a string of at most ${MAX_TEXT} characters`, attribute);
  return value;
}

/** RFC 7643 boolean, or the strings Entra ID sends ("True", "False"). */
export function active(value: unknown, fallback: boolean): boolean {
  if (value === undefined || value === null) return fallback;
  if (typeof value === "boolean") return value;
  if (typeof value === "string" && /^(true|false)$/i.test(value.trim())) return value.trim().toLowerCase() === "true";
  throw invalidValue("active must be true or false", "active");
}

/** RFC 7643 2.1: attribute names are case-insensitive. */
function caseInsensitive(json: ScimJson): Map<string, unknown> {
  const map = new Map<string, unknown>();
  for (const [key, value] of Object.entries(json)) {
    const lower = key.toLowerCase();
    const urn = `${USER_SCHEMA.toLowerCase()}:`;
    map.set(lower.startsWith(urn) ? lower.slice(urn.length) : lower, value);
  }
  return map;
}

/**
 * RFC 7644 3.9 `attributes` / `excludedAttributes`: attribute names in the notation of 3.10
 * (case-insensitive, optionally URN-qualified, with a sub-attribute: name.givenName,
 * urn:…:enterprise:2.0:User:department, or a whole extension by its URN). A value filter
 * (emails[type eq "work"]) is not an attribute name: 400 invalidValue, never a silent guess. A
 * well-formed name the schema lacks selects nothing. id and schemas are always returned.
 */
export function project(resource: ScimJson, attributes: string, excluded: string): ScimJson {
  const include = selection(attributes, "attributes");
  const exclude = selection(excluded, "excludedAttributes");
  if (include.length === 0 && exclude.length === 0) return resource;
  const projected: ScimJson = {};
  for (const [key, value] of Object.entries(resource)) {
    if (key === "schemas" || key === "id") {
      projected[key] = value;
      continue;
    }
    const schema = key === ENTERPRISE_USER_SCHEMA ? ENTERPRISE_USER_SCHEMA : USER_SCHEMA;
    const names = schema === USER_SCHEMA ? [[key, value] as const] : Object.entries(value as ScimJson);
    const kept: ScimJson = {};
    for (const [name, inner] of names) {
      const picked = pick(inner, name, schema, include, exclude);
      if (picked !== undefined) kept[name] = picked;
    }
    if (schema === USER_SCHEMA) Object.assign(projected, kept);
    else if (Object.keys(kept).length > 0) projected[key] = kept;
  }
  if (!(ENTERPRISE_USER_SCHEMA in projected)) projected.schemas = [USER_SCHEMA];
  return projected;
}

interface Selected {
  readonly schema: string;
  /** Lower-cased; undefined selects every attribute of the schema (the extension's URN alone). */
  readonly attribute: string | undefined;
  readonly sub: string | undefined;
}

const ATTRIBUTE_NAME = /^(?:(urn:[A-Za-z0-9:._-]+):)?([A-Za-z$][\w$-]*)(?:\.([A-Za-z$][\w$-]*))?$/;

function selection(list: string, parameter: string): Selected[] {
  const selected: Selected[] = [];
  for (const raw of list.split(",")) {
    const name = raw.trim();
    if (name === "") continue;
    if (USER_SCHEMAS.some((s) => s.id.toLowerCase() === name.toLowerCase())) {
      selected.push({ schema: schemaNamed(name)!.id, attribute: undefined, sub: undefined });
      continue;
    }
    const match = ATTRIBUTE_NAME.exec(name);
    if (!match) {
      throw new DomainError(
        "INVALID_VALUE",
        `${parameter} takes attribute names (name, name.givenName, ${ENTERPRISE_USER_SCHEMA}:department), not "${name.slice(0, 100).replace(/[^\w.:$[\] "-]/g, "?")}"`,
        {
          params: [{ name: parameter, value: "invalid" }],
        },
      );
    }
    const [, urn, attribute, sub] = match;
    const schema = schemaNamed(urn);
    if (schema) selected.push({ schema: schema.id, attribute: attribute!.toLowerCase(), sub: sub?.toLowerCase() });
  }
  return selected;
}

/** The part of one attribute's value the selection keeps (undefined: none). */
function pick(
  value: unknown,
  name: string,
  schema: string,
  include: readonly Selected[],
  exclude: readonly Selected[],
): unknown {
  const lower = name.toLowerCase();
  const of = (list: readonly Selected[]) =>
    list.filter((s) => s.schema === schema && (s.attribute === undefined || s.attribute === lower));
  const whole = (list: readonly Selected[]) => of(list).some((s) => s.sub === undefined);
  const subs = (list: readonly Selected[]) => new Set(of(list).flatMap((s) => (s.sub !== undefined ? [s.sub] : [])));
  const filterSubs = (keep: (sub: string) => boolean) => {
    const part = (object: unknown) =>
      isObject(object) ? Object.fromEntries(Object.entries(object).filter(([k]) => keep(k.toLowerCase()))) : object;
    return Array.isArray(value) ? value.map(part) : part(value);
  };
  if (include.length > 0) {
    if (whole(include)) return value;
    const wanted = subs(include);
    return wanted.size > 0 && (isObject(value) || Array.isArray(value)) ? filterSubs((k) => wanted.has(k)) : undefined;
  }
  if (whole(exclude)) return undefined;
  const unwanted = subs(exclude);
  return unwanted.size > 0 ? filterSubs((k) => !unwanted.has(k)) : value;
}

export function listResponse(resources: readonly ScimJson[], total: number, startIndex: number): ScimJson {
  return {
    schemas: [LIST_RESPONSE_SCHEMA],
    totalResults: total,
    itemsPerPage: resources.length,
    startIndex,
    Resources: resources,
  };
}

// ---- discovery (RFC 7644 4, RFC 7643 5-7) ------------------------------------------------------

export function serviceProviderConfig(baseUrl: string): ScimJson {
  return {
    schemas: [SERVICE_PROVIDER_CONFIG_SCHEMA],
    documentationUri: `${baseUrl}/ServiceProviderConfig`,
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: MAX_PAGE_COUNT },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: false },
    authenticationSchemes: [
      {
        type: "oauthbearertoken",
        name: "SCIM token",
        description:
          "The scimToken of a COMPANY_ADMIN API user with credential type SCIM_TOKEN, as Authorization: Bearer <scimToken>",
        primary: true,
      },
    ],
    meta: { resourceType: "ServiceProviderConfig", location: `${baseUrl}/ServiceProviderConfig` },
  };
}

export function userResourceType(baseUrl: string): ScimJson {
  const [core, ...extensions] = USER_SCHEMAS;
  return {
    schemas: [RESOURCE_TYPE_SCHEMA],
    id: "User",
    name: "User",
    endpoint: "/Users",
    description: "A user of the API user's company",
    schema: core!.id,
    schemaExtensions: extensions.map((e) => ({ schema: e.id, required: false })),
    meta: { resourceType: "ResourceType", location: `${baseUrl}/ResourceTypes/User` },
  };
}

/** Every schema of the User resource type, from user-schema.ts. */
export function userSchemas(baseUrl: string): ScimJson[] {
  return USER_SCHEMAS.map((schema) => schemaDocument(schema, baseUrl));
}
