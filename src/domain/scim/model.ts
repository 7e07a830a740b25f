/** SCIM 2.0 (RFC 7643, RFC 7644) provisioning of a company's users, mapped onto the `users` table. */

export const USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User";
export const ENTERPRISE_USER_SCHEMA = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";
export const LIST_RESPONSE_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
export const PATCH_OP_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
export const SERVICE_PROVIDER_CONFIG_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig";
export const RESOURCE_TYPE_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ResourceType";
export const SCHEMA_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Schema";

/** Results per page when the client names no count, and the most it may ask for (larger counts are capped). */
export const DEFAULT_PAGE_COUNT = 100;
export const MAX_PAGE_COUNT = 200;
/** Longest filter expression, and most comparisons in one (a filter is one indexed query, not a program). */
export const MAX_FILTER_LENGTH = 2048;
export const MAX_FILTER_TERMS = 50;
/** Most operations in one PATCH request. */
export const MAX_PATCH_OPERATIONS = 100;

/** The SCIM API user a request comes from: every operation is confined to its company. */
export interface ScimCaller {
  readonly clientId: string;
  readonly tmcId: string;
  /** The API user's company (orgId). */
  readonly companyId: string;
}

/** The stored user profile's businessInfo object (proto JSON names), {} when there is none. */
export type BusinessInfo = { readonly [field: string]: unknown };

/**
 * A user as SCIM sees it: id = users.id, userName = users.email (the business email, also the
 * one work email), name.givenName/familyName, name.formatted and displayName (their own columns),
 * active = is_active, externalId, and the profile's businessInfo (the enterprise extension).
 */
export interface ScimUser {
  readonly id: string;
  readonly companyId: string;
  readonly tmcId: string;
  readonly userName: string;
  readonly givenName: string;
  readonly familyName: string;
  readonly formattedName: string | undefined;
  readonly displayName: string | undefined;
  readonly active: boolean;
  readonly externalId: string | undefined;
  readonly businessInfo: BusinessInfo;
  /** personalInfo.preferredLanguage of the profile. */
  readonly preferredLanguage: string | undefined;
  /** The SCIM attributes the profile has no place for (users.scim_attributes), as the IdP sent them. */
  readonly kept: KeptAttributes;
  readonly created: Date;
  readonly lastModified: Date;
}

/**
 * A SCIM User as a client writes it, typed: decoded from SCIM JSON at the RPC edge (names matched
 * case-insensitively, values checked against their type, length and format; attributes /Schemas
 * does not list dropped), so the domain never reads wire JSON. Absent: not sent; null: cleared.
 */
export interface ScimName extends KeptName {
  readonly givenName?: string | null;
  readonly familyName?: string | null;
  readonly formatted?: string | null;
}

/** The name parts the profile has no column for, kept as sent. */
export interface KeptName {
  readonly middleName?: string | null;
  readonly honorificPrefix?: string | null;
  readonly honorificSuffix?: string | null;
}

/** One value of a multi-valued attribute (RFC 7643 2.4): emails, phoneNumbers. */
export interface ScimMultiValue {
  readonly value?: string | null;
  readonly display?: string | null;
  readonly type?: string | null;
  readonly primary?: boolean | null;
}

/** An email (RFC 7643 4.1.2); any number of them, of any type: the userName is the identity, not an email of the list. */
export type ScimEmail = ScimMultiValue;

/** An address's string parts (RFC 7643 4.1.2), as /Schemas lists them and the mappers read them. */
export const ADDRESS_PARTS = ["formatted", "streetAddress", "locality", "region", "postalCode", "country"] as const;

/** An address (RFC 7643 4.1.2). */
export type ScimAddress = { readonly [part in (typeof ADDRESS_PARTS)[number]]?: string | null } & {
  readonly type?: string | null;
  readonly primary?: boolean | null;
};

/**
 * The SCIM attributes kept as the IdP sent them, because the profile has no place for them
 * (users.scim_attributes): the emails (absent: none sent, the userName stands in as the one work
 * email), phone numbers, addresses and the simple core strings.
 */
export interface KeptAttributes {
  readonly emails?: readonly ScimEmail[];
  readonly phoneNumbers?: readonly ScimMultiValue[];
  readonly addresses?: readonly ScimAddress[];
  readonly nickName?: string;
  readonly profileUrl?: string;
  readonly userType?: string;
  readonly locale?: string;
  readonly timezone?: string;
  readonly name?: KeptName;
}

/** The simple core strings kept as sent. */
export const KEPT_STRINGS = ["nickName", "profileUrl", "userType", "locale", "timezone"] as const;

/**
 * The email the user's profile shows (personalInfo.email, when the profile has none of its own):
 * the primary one, else the first of type work, else the first; only a value that looks like an
 * address. undefined: none (the profile shows the userName).
 */
export function profileEmailOf(emails: readonly ScimEmail[] | undefined): string | undefined {
  const addresses = (emails ?? []).filter((e) => typeof e.value === "string" && /^[^\s@]+@[^\s@]+$/.test(e.value));
  return (
    (addresses.find((e) => e.primary === true) ?? addresses.find((e) => e.type === "work") ?? addresses[0])?.value ??
    undefined
  );
}

/** manager (RFC 7643 4.3): value is written, $ref and displayName are the service's. */
export interface ScimManager {
  readonly value?: string | null;
  readonly $ref?: string;
  readonly displayName?: string;
}

export interface ScimEnterprise {
  readonly employeeNumber?: string | null;
  readonly costCenter?: string | null;
  readonly organization?: string | null;
  readonly division?: string | null;
  readonly department?: string | null;
  readonly manager?: ScimManager | null;
}

export interface ScimUserDocument {
  readonly schemas?: readonly string[];
  readonly userName?: string | null;
  readonly externalId?: string | null;
  readonly name?: ScimName | null;
  readonly displayName?: string | null;
  readonly title?: string | null;
  readonly emails?: readonly ScimEmail[] | null;
  readonly phoneNumbers?: readonly ScimMultiValue[] | null;
  readonly addresses?: readonly ScimAddress[] | null;
  readonly preferredLanguage?: string | null;
  readonly nickName?: string | null;
  readonly profileUrl?: string | null;
  readonly userType?: string | null;
  readonly locale?: string | null;
  readonly timezone?: string | null;
  readonly active?: boolean | null;
  readonly [ENTERPRISE_USER_SCHEMA]?: ScimEnterprise | null;
}

/** A stored user as a SCIM User resource (RFC 7643 4.1): what GET answers, and what a PATCH applies to. */
export interface ScimUserResource extends ScimUserDocument {
  readonly schemas: readonly string[];
  readonly id: string;
  readonly userName: string;
  readonly name: ScimName;
  readonly emails?: readonly ScimEmail[];
  readonly active: boolean;
  readonly meta: ScimMeta;
}

export interface ScimMeta {
  readonly resourceType: string;
  readonly created?: string;
  readonly lastModified?: string;
  readonly location: string;
}

/** A User resource after `attributes` / `excludedAttributes` (RFC 7644 3.9): id and schemas always stay. */
export type ProjectedUser = Pick<ScimUserResource, "schemas" | "id"> & Partial<ScimUserResource>;

/** RFC 7644 3.4.2 ListResponse. */
export interface ScimListResponse<T> {
  readonly schemas: readonly string[];
  readonly totalResults: number;
  readonly itemsPerPage: number;
  readonly startIndex: number;
  readonly Resources: readonly T[];
}

/** What a PATCH operation may write (RFC 7644 3.5.2), decoded for its target's type at the RPC edge. */
export type ScimValue =
  | string
  | boolean
  | null
  | ScimName
  | ScimMultiValue
  | readonly ScimMultiValue[]
  | ScimAddress
  | readonly ScimAddress[]
  | ScimManager;

/**
 * One PATCH operation with its target resolved against the schema table (resolveTarget in
 * user-schema.ts: the only way to make a PatchTarget) and its value of the target's type.
 */
export type PatchOperation =
  | { readonly op: "add" | "replace"; readonly target: PatchTarget; readonly value: ScimValue }
  | { readonly op: "remove"; readonly target: PatchTarget };

/** An attribute path the schema table lists: the attribute, an optional value filter and sub-attribute. */
export interface PatchTarget {
  /** The schema's URN (the core one for core attributes). */
  readonly schema: string;
  readonly attribute: string;
  /** The value filter of a multi-valued attribute, e.g. `[type eq "work"]`, brackets included. */
  readonly filter: string | undefined;
  readonly sub: string | undefined;
  /** An attribute /Schemas lists as accepted and ignored (returned never): the operation is dropped. */
  readonly ignored?: true;
}

/** The enterprise extension's attributes (RFC 7643 4.3); absent = not set. */
export interface EnterpriseAttributes {
  readonly employeeNumber?: string;
  readonly costCenter?: string;
  readonly organization?: string;
  readonly division?: string;
  readonly department?: string;
  /** manager.value: the id of another user of the company. */
  readonly managerId?: string;
}

/** The attributes a client writes (create, replace, patch). */
export interface ScimUserAttributes {
  readonly userName: string;
  readonly givenName: string;
  readonly familyName: string;
  readonly formattedName: string | undefined;
  readonly displayName: string | undefined;
  readonly active: boolean;
  readonly externalId: string | undefined;
  /** undefined: the client did not send the extension (a replace keeps what is stored). */
  readonly enterprise: EnterpriseAttributes | undefined;
  /** title (businessInfo.designation); undefined: not sent (a replace keeps it), {value: undefined}: removed. */
  readonly title: { readonly value: string | undefined } | undefined;
  /** preferredLanguage (personalInfo.preferredLanguage), like title. */
  readonly preferredLanguage: { readonly value: string | undefined } | undefined;
  readonly kept: KeptAttributes;
}

/** What the repository writes: the columns, and businessInfo / preferredLanguage when they change (undefined keeps them). */
export interface ScimUserRecord extends Omit<ScimUserAttributes, "enterprise" | "title"> {
  readonly businessInfo: BusinessInfo | undefined;
}

/** The stored attributes a filter may compare (the repository maps each to a column). */
export type FilterAttribute =
  | "id"
  | "userName"
  /** Any of the user's emails, or its userName. */
  | "emails"
  | "externalId"
  | "givenName"
  | "familyName"
  | "displayName"
  | "active"
  | "created"
  | "lastModified";

export type CompareOperator = "eq" | "ne" | "co" | "sw" | "ew" | "gt" | "ge" | "lt" | "le";

/**
 * A SCIM filter translated to what the repository can query: every leaf names a supported
 * attribute and a value of its type. String comparisons of userName, givenName, familyName and
 * displayName are case-insensitive (caseExact false, RFC 7643 4.1.1); id and externalId are case-exact.
 */
export type UserFilter =
  | { readonly kind: "and" | "or"; readonly filters: readonly UserFilter[] }
  | { readonly kind: "not"; readonly filter: UserFilter }
  | {
      readonly kind: "compare";
      readonly attribute: FilterAttribute;
      readonly op: CompareOperator;
      readonly value: string | boolean | Date;
    }
  | { readonly kind: "present"; readonly attribute: FilterAttribute }
  | { readonly kind: "constant"; readonly value: boolean };

export interface UserPage {
  /** 1-based, as SCIM counts. */
  readonly startIndex: number;
  readonly count: number;
}
