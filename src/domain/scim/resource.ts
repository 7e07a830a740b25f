import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import {
  LIST_RESPONSE_SCHEMA,
  MAX_PAGE_COUNT,
  RESOURCE_TYPE_SCHEMA,
  SCHEMA_SCHEMA,
  SERVICE_PROVIDER_CONFIG_SCHEMA,
  USER_SCHEMA,
  type ScimUser,
  type ScimUserAttributes,
} from "./model.js";

/** A JSON object as SCIM exchanges it. */
export type ScimJson = { [key: string]: unknown };

const invalidValue = (message: string, attribute: string) => new DomainError("INVALID_VALUE", message, { params: [{ name: attribute, value: "invalid" }] });

/** The longest userName (an email address, RFC 5321) and name parts / externalId we store. */
const MAX_USER_NAME = 320;
const MAX_TEXT = 256;
const EMAIL = /^[^\s@]+@[^\s@]+$/;

/** A stored user as a SCIM User resource (RFC 7643 4.1). */
export function userResource(user: ScimUser, baseUrl: string): ScimJson {
  const formatted = [user.givenName, user.familyName].filter((p) => p !== "").join(" ");
  return {
    schemas: [USER_SCHEMA],
    id: user.id,
    ...(user.externalId !== undefined ? { externalId: user.externalId } : {}),
    userName: user.userName,
    name: { givenName: user.givenName, familyName: user.familyName, ...(formatted ? { formatted } : {}) },
    ...(formatted ? { displayName: formatted } : {}),
    emails: [{ value: user.userName, type: "work", primary: true }],
    active: user.active,
    meta: {
      resourceType: "User",
      created: user.created.toISOString(),
      lastModified: user.lastModified.toISOString(),
      location: `${baseUrl}/Users/${user.id}`,
    },
  };
}

/**
 * The supported attributes of a User resource sent by a client (create, replace, and the result
 * of a PATCH). Attributes the service does not hold (phoneNumbers, title, the enterprise
 * extension, …) and read-only ones (id, meta) are ignored, as RFC 7643 allows; `emails` is
 * derived from userName and ignored on input. `active` may arrive as "True"/"False" (Entra ID).
 * Absent `active` keeps `current.active` (true on create).
 */
export function userAttributes(json: ScimJson, current?: { active: boolean }, checkSchemas = true): ScimUserAttributes {
  if (checkSchemas) {
    const schemas = json.schemas;
    if (!Array.isArray(schemas) || !schemas.some((s) => typeof s === "string" && s.toLowerCase() === USER_SCHEMA.toLowerCase())) {
      throw invalidArgument(`The resource must list the schema ${USER_SCHEMA} in "schemas"`, [{ name: "schemas", value: "missing" }]);
    }
  }
  const attrs = caseInsensitive(json);
  const userName = attrs.get("username");
  if (typeof userName !== "string" || userName.trim() === "") throw invalidValue("userName is required and must be a string", "userName");
  const trimmed = userName.trim();
  if (trimmed.length > MAX_USER_NAME || !EMAIL.test(trimmed)) throw invalidValue("userName must be the user's business email address", "userName");
  const name = attrs.get("name");
  if (name !== undefined && name !== null && (typeof name !== "object" || Array.isArray(name))) throw invalidValue("name must be an object", "name");
  const nameAttrs = caseInsensitive((name ?? {}) as ScimJson);
  const externalId = attrs.get("externalid");
  if (externalId !== undefined && externalId !== null && (typeof externalId !== "string" || externalId.length > MAX_TEXT)) {
    throw invalidValue(`externalId must be a string of at most ${MAX_TEXT} characters`, "externalId");
  }
  return {
    userName: trimmed,
    givenName: text(nameAttrs.get("givenname"), "name.givenName"),
    familyName: text(nameAttrs.get("familyname"), "name.familyName"),
    active: active(attrs.get("active"), current?.active ?? true),
    externalId: typeof externalId === "string" && externalId !== "" ? externalId : undefined,
  };
}

function text(value: unknown, attribute: string): string {
  if (value === undefined || value === null) return "";
  if (typeof value !== "string" || value.length > MAX_TEXT) throw invalidValue(`${attribute} must be a string of at most ${MAX_TEXT} characters`, attribute);
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

/** RFC 7644 3.9 `attributes` / `excludedAttributes` on the top level; id and schemas are always returned. */
export function project(resource: ScimJson, attributes: string, excluded: string): ScimJson {
  const names = (list: string) =>
    new Set(list.split(",").map((a) => a.trim().toLowerCase().replace(`${USER_SCHEMA.toLowerCase()}:`, "").split(".")[0]!).filter((a) => a !== ""));
  const include = names(attributes);
  const exclude = names(excluded);
  if (include.size === 0 && exclude.size === 0) return resource;
  return Object.fromEntries(
    Object.entries(resource).filter(([key]) => {
      const lower = key.toLowerCase();
      if (lower === "id" || lower === "schemas") return true;
      return include.size > 0 ? include.has(lower) : !exclude.has(lower);
    }),
  );
}

export function listResponse(resources: readonly ScimJson[], total: number, startIndex: number): ScimJson {
  return { schemas: [LIST_RESPONSE_SCHEMA], totalResults: total, itemsPerPage: resources.length, startIndex, Resources: resources };
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
        description: "The scimToken of a COMPANY_ADMIN API user with credential type SCIM_TOKEN, as Authorization: Bearer <scimToken>",
        primary: true,
      },
    ],
    meta: { resourceType: "ServiceProviderConfig", location: `${baseUrl}/ServiceProviderConfig` },
  };
}

export function userResourceType(baseUrl: string): ScimJson {
  return {
    schemas: [RESOURCE_TYPE_SCHEMA],
    id: "User",
    name: "User",
    endpoint: "/Users",
    description: "A user of the API user's company",
    schema: USER_SCHEMA,
    schemaExtensions: [],
    meta: { resourceType: "ResourceType", location: `${baseUrl}/ResourceTypes/User` },
  };
}

const attribute = (name: string, type: string, extra: ScimJson = {}): ScimJson => ({
  name,
  type,
  multiValued: false,
  required: false,
  caseExact: false,
  mutability: "readWrite",
  returned: "default",
  uniqueness: "none",
  ...extra,
});

/** The User schema with exactly the attributes this service stores (others are accepted and ignored). */
export function userSchema(baseUrl: string): ScimJson {
  return {
    schemas: [SCHEMA_SCHEMA],
    id: USER_SCHEMA,
    name: "User",
    description: "User account (only the attributes listed are stored; others are accepted and ignored)",
    attributes: [
      attribute("id", "string", { caseExact: true, mutability: "readOnly", returned: "always", uniqueness: "server" }),
      attribute("userName", "string", { required: true, uniqueness: "server", description: "The business email address; unique in the company (case-insensitive)" }),
      attribute("externalId", "string", { caseExact: true, description: "The provisioning client's id for the user; unique in the company" }),
      attribute("name", "complex", {
        subAttributes: [attribute("givenName", "string"), attribute("familyName", "string"), attribute("formatted", "string", { mutability: "readOnly" })],
      }),
      attribute("displayName", "string", { mutability: "readOnly", description: "givenName familyName" }),
      attribute("emails", "complex", {
        multiValued: true,
        mutability: "readOnly",
        description: "One work email, the userName (set userName to change it)",
        subAttributes: [attribute("value", "string", { mutability: "readOnly" }), attribute("type", "string", { mutability: "readOnly", canonicalValues: ["work"] }), attribute("primary", "boolean", { mutability: "readOnly" })],
      }),
      attribute("active", "boolean"),
    ],
    meta: { resourceType: "Schema", location: `${baseUrl}/Schemas/${USER_SCHEMA}` },
  };
}

