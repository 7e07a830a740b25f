import { DomainError } from "../../errors/domain-error.js";
import { enterpriseOf, titleOf } from "./enterprise-profile.js";
import {
  ENTERPRISE_USER_SCHEMA,
  LIST_RESPONSE_SCHEMA,
  MAX_PAGE_COUNT,
  RESOURCE_TYPE_SCHEMA,
  SERVICE_PROVIDER_CONFIG_SCHEMA,
  USER_SCHEMA,
  KEPT_STRINGS,
  type EnterpriseAttributes,
  type KeptAttributes,
  type ProjectedUser,
  type ScimEmail,
  type ScimMultiValue,
  type ScimEnterprise,
  type ScimListResponse,
  type ScimUser,
  type ScimUserAttributes,
  type ScimUserDocument,
  type ScimUserResource,
} from "./model.js";
import { schemaDocument, schemaNamed, USER_SCHEMAS } from "./user-schema.js";

const invalidValue = (message: string, attribute: string) =>
  new DomainError("INVALID_VALUE", message, { params: [{ name: attribute, value: "invalid" }] });

/** A discovery document (RFC 7644 4: ServiceProviderConfig, ResourceType, Schema) as the service renders it. */
export type DiscoveryDocument = { readonly [key: string]: unknown };

/** A stored user as a SCIM User resource (RFC 7643 4.1, with the enterprise extension of 4.3 when it has a value). */
export function userResource(user: ScimUser, baseUrl: string): ScimUserResource {
  const { managerId, managerName, ...enterprise } = enterpriseOf(user.businessInfo);
  const extension: ScimEnterprise = {
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
  const title = titleOf(user.businessInfo);
  const { emails, name: keptName, ...kept } = user.kept;
  return {
    schemas: hasExtension ? [USER_SCHEMA, ENTERPRISE_USER_SCHEMA] : [USER_SCHEMA],
    id: user.id,
    ...(user.externalId !== undefined ? { externalId: user.externalId } : {}),
    userName: user.userName,
    name: {
      givenName: user.givenName,
      familyName: user.familyName,
      ...(user.formattedName !== undefined ? { formatted: user.formattedName } : {}),
      ...keptName,
    },
    ...(user.displayName !== undefined ? { displayName: user.displayName } : {}),
    ...(title !== undefined ? { title } : {}),
    ...(user.preferredLanguage !== undefined ? { preferredLanguage: user.preferredLanguage } : {}),
    // Without emails of its own (none sent), the userName stands in as the one work email.
    ...(emails === undefined ? { emails: defaultEmails(user.userName) } : emails.length > 0 ? { emails } : {}),
    ...kept,
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
 * The attributes of a User document (create, replace, and the result of a PATCH). Each value was
 * decoded at the RPC edge (type, length, format; `active` from Entra ID's "True"/"False", the
 * manager from a bare id); what is left are the rules between attributes and the stored user:
 * userName is required, emails is the userName, absent `active` keeps the current value (true on
 * create), defaults for name.formatted and displayName, and what a replace or PATCH keeps.
 */
export function userAttributes(document: ScimUserDocument, mode: ReadMode): ScimUserAttributes {
  const current = mode.kind === "create" ? undefined : mode.current;
  if (typeof document.userName !== "string" || document.userName === "")
    throw invalidValue("userName is required and must be a string", "userName");
  const userName = document.userName;
  const name = document.name ?? {};
  const givenName = name.givenName ?? "";
  const familyName = name.familyName ?? "";
  const fullName = [givenName, familyName].filter((p) => p !== "").join(" ") || undefined;
  const defaulted = (value: string | null | undefined) =>
    value ? value : mode.kind === "patch" ? undefined : fullName;
  // title and preferredLanguage live in the profile: a whole resource without them keeps them.
  const sent = (attribute: "title" | "preferredLanguage") => document[attribute] !== undefined || mode.kind === "patch";
  return {
    userName,
    givenName,
    familyName,
    formattedName: defaulted(name.formatted),
    displayName: defaulted(document.displayName),
    active: document.active ?? current?.active ?? true,
    externalId: document.externalId || undefined,
    enterprise: enterpriseAttributes(document[ENTERPRISE_USER_SCHEMA], mode),
    title: sent("title") ? { value: document.title || undefined } : undefined,
    preferredLanguage: sent("preferredLanguage") ? { value: document.preferredLanguage || undefined } : undefined,
    kept: keptAttributes(document, mode),
  };
}

/** The one work email a user without emails of its own shows: its userName. */
function defaultEmails(userName: string): ScimEmail[] {
  return [{ value: userName, type: "work", primary: true }];
}

/**
 * The attributes kept as sent (users.scim_attributes), from a whole resource or a patched one:
 * what is absent is unassigned (a PUT replaces them all, RFC 7644 3.5.1). emails stays unassigned
 * (the userName standing in) unless the client sent or changed them.
 */
function keptAttributes(document: ScimUserDocument, mode: ReadMode): KeptAttributes {
  const text = (value: string | null | undefined) => (value ? value : undefined);
  const name = document.name ?? {};
  const stands =
    mode.kind === "patch" &&
    mode.current.kept.emails === undefined &&
    JSON.stringify(document.emails) === JSON.stringify(defaultEmails(mode.current.userName));
  const kept: Record<string, unknown> = {
    // Absent from a patched resource: removed (none shown); from a whole one: not sent.
    emails: stands
      ? undefined
      : document.emails === undefined
        ? mode.kind === "patch"
          ? []
          : undefined
        : withOnePrimary(document.emails ?? []),
    phoneNumbers: present(withOnePrimary(document.phoneNumbers ?? [])),
    addresses: present(withOnePrimary(document.addresses ?? [])),
    name: present(
      prune({
        middleName: text(name.middleName),
        honorificPrefix: text(name.honorificPrefix),
        honorificSuffix: text(name.honorificSuffix),
      }),
    ),
  };
  for (const key of KEPT_STRINGS) kept[key] = text(document[key]);
  return prune(kept) as KeptAttributes;
}

/**
 * RFC 7643 2.4: "primary" true appears at most once; RFC 7644 3.5.2: a value added as primary
 * takes it from the others. The last one marked primary keeps it; values with nothing set are dropped.
 */
function withOnePrimary<T extends ScimMultiValue | object>(values: readonly T[]): T[] {
  const set = values.map((v) => prune(v as Record<string, unknown>) as T).filter((v) => Object.keys(v).length > 0);
  const last = set.map((v) => (v as ScimMultiValue).primary === true).lastIndexOf(true);
  return set.map((v, i) => ((v as ScimMultiValue).primary === true && i !== last ? { ...v, primary: false } : v));
}

function present<T extends object>(value: T): T | undefined {
  return Object.keys(value).length > 0 ? value : undefined;
}

function prune<T extends Record<string, unknown>>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined && v !== null)) as T;
}

/** The enterprise extension's attributes: absent (in a whole resource) keeps the stored ones, empty values are unset. */
function enterpriseAttributes(
  extension: ScimEnterprise | null | undefined,
  mode: ReadMode,
): EnterpriseAttributes | undefined {
  if (extension === undefined || extension === null) return mode.kind === "patch" ? {} : undefined;
  const result = {
    employeeNumber: extension.employeeNumber || undefined,
    costCenter: extension.costCenter || undefined,
    organization: extension.organization || undefined,
    division: extension.division || undefined,
    department: extension.department || undefined,
    managerId: extension.manager?.value || undefined,
  };
  return Object.fromEntries(Object.entries(result).filter(([, v]) => v !== undefined));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * RFC 7644 3.9 `attributes` / `excludedAttributes`: attribute names in the notation of 3.10
 * (case-insensitive, optionally URN-qualified, with a sub-attribute: name.givenName,
 * urn:…:enterprise:2.0:User:department, or a whole extension by its URN). A value filter
 * (emails[type eq "work"]) is not an attribute name: 400 invalidValue, never a silent guess. A
 * well-formed name the schema lacks selects nothing. id and schemas are always returned.
 */
export function project(resource: ScimUserResource, attributes: string, excluded: string): ProjectedUser {
  const include = selection(attributes, "attributes");
  const exclude = selection(excluded, "excludedAttributes");
  if (include.length === 0 && exclude.length === 0) return resource;
  const projected: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(resource)) {
    if (key === "schemas" || key === "id") {
      projected[key] = value;
      continue;
    }
    const schema = key === ENTERPRISE_USER_SCHEMA ? ENTERPRISE_USER_SCHEMA : USER_SCHEMA;
    const names = schema === USER_SCHEMA ? [[key, value] as const] : Object.entries(value as object);
    const kept: Record<string, unknown> = {};
    for (const [name, inner] of names) {
      const picked = pick(inner, name, schema, include, exclude);
      if (picked !== undefined) kept[name] = picked;
    }
    if (schema === USER_SCHEMA) Object.assign(projected, kept);
    else if (Object.keys(kept).length > 0) projected[key] = kept;
  }
  if (!(ENTERPRISE_USER_SCHEMA in projected)) projected.schemas = [USER_SCHEMA];
  return projected as ProjectedUser;
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

export function listResponse<T>(resources: readonly T[], total: number, startIndex: number): ScimListResponse<T> {
  return {
    schemas: [LIST_RESPONSE_SCHEMA],
    totalResults: total,
    itemsPerPage: resources.length,
    startIndex,
    Resources: resources,
  };
}

// ---- discovery (RFC 7644 4, RFC 7643 5-7) ------------------------------------------------------

export function serviceProviderConfig(baseUrl: string): DiscoveryDocument {
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

export function userResourceType(baseUrl: string): DiscoveryDocument {
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
export function userSchemas(baseUrl: string): DiscoveryDocument[] {
  return USER_SCHEMAS.map((schema) => schemaDocument(schema, baseUrl));
}
