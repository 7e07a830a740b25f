import { DomainError, notFound, type ErrorParameter } from "../../errors/domain-error.js";
import type { AuditEvent } from "../audit/model.js";
import type { AuditRepository } from "../audit/ports.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import { IDENTITY_FIELDS, type ProfileCaller, type ProfileDocument, type UserProfileRecord } from "./model.js";
import type { UserProfileRepository } from "./ports.js";

export const USER_UPDATED = "USER_UPDATED";

/** What UserProfiles is built from. */
export interface UserProfilesDeps {
  readonly uow: UnitOfWork;
  readonly users: UserProfileRepository;
  readonly audit: AuditRepository;
}

/**
 * Reading and updating users' profiles (spec 4.6, reference getUserInfo and updateUser).
 *
 * Who may: a TMC admin for any user of its TMC, a company admin for the users of its own company.
 * Anyone else — another TMC, another company of the same TMC — gets the same NOT_FOUND as an
 * unknown id, so the answer never tells whether a user exists elsewhere. An inactive user is
 * NOT_FOUND to a read unless it asks for inactive users too.
 *
 * What is stored: the identity columns (id, company, TMC, email, name, isActive, externalId) are
 * the truth for their fields; the rest of the document lives as the caller wrote it in the
 * profile and the columns are merged over it on read. An update replaces the whole document
 * (PUT), may change the name, and refuses — writing nothing — a document that would move the user
 * to another company or TMC, change its id, activation, identity email or IdP-owned externalId,
 * or name a legal entity other than the user's company (the only one this service knows for it).
 * Read-only fields echoed with their current value are ignored, so a GET body goes back to PUT
 * unchanged (Kubernetes, Keycloak, SCIM RFC 7644 section 3.5.1).
 */
export class UserProfiles {
  constructor(private readonly deps: UserProfilesDeps) {}

  async get(caller: ProfileCaller, userId: string, includeInactive: boolean): Promise<ProfileDocument> {
    const user = visibleTo(
      caller,
      await this.deps.users.find(this.deps.uow.direct, tenantScope(caller.tmcId), userId),
      userId,
    );
    if (!user.isActive && !includeInactive) throw userNotFound(userId);
    return documentOf(user);
  }

  /** Replaces the user's document with `document` (the update request's JSON, without userId). */
  async update(caller: ProfileCaller, userId: string, document: ProfileDocument, requestId: string): Promise<void> {
    const scope = tenantScope(caller.tmcId);
    await this.deps.uow.transaction(async (tx) => {
      const user = visibleTo(caller, await this.deps.users.lock(tx, scope, userId), userId);
      refuseIdentityChanges(user, userId, document);
      const name = objectAt(document, "personalInfo", "name");
      const change = {
        givenName: nonEmpty(name?.given) ?? user.givenName,
        familyName: nonEmpty(name?.family1) ?? user.familyName,
        profile: withoutIdentity(document),
      };
      const changedFields = changedPaths(documentOf(user), documentOf({ ...user, ...change }));
      await this.deps.users.update(tx, scope, userId, change);
      await this.deps.audit.append(tx, [updated(caller, user, changedFields, requestId)]);
    });
  }
}

/** Another tenant's user (the scoped query finds none), another company's, an unknown id: all alike. */
function visibleTo(caller: ProfileCaller, user: UserProfileRecord | undefined, userId: string): UserProfileRecord {
  if (!user) throw userNotFound(userId);
  if (caller.role === "TMC_ADMIN" && user.tmcId === caller.tmcId) return user;
  if (caller.role === "COMPANY_ADMIN" && caller.orgId !== undefined && user.companyId === caller.orgId) return user;
  throw userNotFound(userId);
}

function userNotFound(userId: string): DomainError {
  return notFound("User", [{ name: "userId", value: userId }]);
}

/** The identity fields an update may not change; each refused one is named, and nothing is written. */
function refuseIdentityChanges(user: UserProfileRecord, userId: string, document: ProfileDocument): void {
  const refused: ErrorParameter[] = FIXED_FIELDS.filter((field) => {
    const sent = field.sent(document);
    return sent !== undefined && !sameValue(sent, field.current(user, userId), field.ignoreCase);
  }).map((field) => ({ name: field.name, value: field.refusal }));
  if (refused.length > 0) {
    throw new DomainError(
      "API_VALIDATION_FAILED",
      "The update changes fields that cannot be changed through this operation",
      { params: refused },
    );
  }
}

/**
 * A field an update may send only with the user's current value (or leave out, or empty): where
 * the document holds it, the value it must equal, whether case counts, and the refusal's reason.
 */
interface FixedField {
  readonly name: string;
  /** The value sent; undefined when the document leaves the field out. */
  readonly sent: (document: ProfileDocument) => unknown;
  readonly current: (user: UserProfileRecord, userId: string) => unknown;
  readonly ignoreCase: boolean;
  readonly refusal: string;
}

const LEGAL_ENTITY_ID = "businessInfo.legalEntityRef.id";

/** In the order a refusal names them. */
const FIXED_FIELDS: readonly FixedField[] = [
  {
    name: IDENTITY_FIELDS.id,
    sent: (d) => nonEmpty(d.id),
    current: (_, userId) => userId,
    ignoreCase: true,
    refusal: "must be the user's id (the path's userId)",
  },
  {
    name: IDENTITY_FIELDS.companyId,
    sent: (d) => nonEmpty(objectAt(d, "businessInfo", "organizationRef")?.id),
    current: (user) => user.companyId,
    ignoreCase: true,
    refusal: "must be the user's company: a user cannot be moved to another company",
  },
  {
    name: IDENTITY_FIELDS.companyName,
    sent: (d) => nonEmpty(objectAt(d, "businessInfo", "organizationRef")?.name),
    current: (user) => user.companyName,
    ignoreCase: false,
    refusal: "must be the company's name: a company is not renamed through a user",
  },
  {
    name: IDENTITY_FIELDS.email,
    sent: (d) => nonEmpty(objectAt(d, "businessInfo")?.email),
    current: (user) => user.email,
    ignoreCase: true,
    refusal: "cannot be changed: it is the user's identity (SCIM userName)",
  },
  {
    name: IDENTITY_FIELDS.externalId,
    sent: (d) => nonEmpty(d.externalId),
    current: (user) => user.externalId,
    ignoreCase: false,
    refusal: "cannot be changed: it is owned by the identity provider (SCIM)",
  },
  {
    name: IDENTITY_FIELDS.isActive,
    sent: (d) => d.isActive,
    current: (user) => user.isActive,
    ignoreCase: false,
    refusal: "cannot be changed: activation is managed by the identity provider (SCIM)",
  },
  {
    name: IDENTITY_FIELDS.tmcId,
    sent: (d) => nonEmpty(objectAt(d, "contractingTmcRef")?.id),
    current: (user) => user.tmcId,
    ignoreCase: true,
    refusal: "must be the user's TMC: a user cannot be moved to another TMC",
  },
  {
    name: IDENTITY_FIELDS.tmcName,
    sent: (d) => nonEmpty(objectAt(d, "contractingTmcRef")?.name),
    current: (user) => user.tmcName,
    ignoreCase: false,
    refusal: "must be the TMC's name: a TMC is not renamed through a user",
  },
  // The same answer for an unknown id, another company's and another TMC's: nothing tells
  // whether the id exists elsewhere.
  {
    name: LEGAL_ENTITY_ID,
    sent: (d) => nonEmpty(objectAt(d, "businessInfo", "legalEntityRef")?.id),
    current: (user) => user.companyId,
    ignoreCase: true,
    refusal: "must be the user's company: the only legal entity known for the user",
  },
];

function sameValue(sent: unknown, current: unknown, ignoreCase: boolean): boolean {
  return ignoreCase && typeof sent === "string" && typeof current === "string"
    ? sent.toLowerCase() === current.toLowerCase()
    : sent === current;
}

/** The reference's Persona value for "none given": what a profile never updated reads. */
const NO_PERSONA = "UNKNOWN_PERSONA";

/** The document as read: the stored profile with the identity columns merged over it. */
export function documentOf(user: UserProfileRecord): ProfileDocument {
  const document = structuredClone(user.profile) as ProfileDocument;
  delete document.contractingTmcRef;
  const personalInfo: ProfileDocument = { ...(objectAt(document, "personalInfo") ?? {}) };
  personalInfo.name = { ...(objectAt(personalInfo, "name") ?? {}), given: user.givenName, family1: user.familyName };
  // Without a personal email of its own, the profile shows the one the IdP provisioned, else the account's.
  if (nonEmpty(personalInfo.email) === undefined) personalInfo.email = user.provisionedEmail ?? user.email;
  const company = { id: user.companyId, name: user.companyName };
  const businessInfo: ProfileDocument = {
    ...(objectAt(document, "businessInfo") ?? {}),
    email: user.email,
    organizationRef: company,
  };
  // The reference requires a legal entity; until one is stored, the company is its own.
  if (objectAt(businessInfo, "legalEntityRef") === undefined) businessInfo.legalEntityRef = { ...company };
  // Always present: updateUser requires persona, and a GET body must be accepted back as it is.
  const persona = document.persona ?? NO_PERSONA;
  const merged: ProfileDocument = {
    ...document,
    persona,
    id: user.id,
    personalInfo,
    businessInfo,
    isActive: user.isActive,
    contractingTmcRef: { id: user.tmcId, name: user.tmcName },
  };
  if (user.externalId !== undefined) merged.externalId = user.externalId;
  else delete merged.externalId;
  return merged;
}

/** The document as stored: every identity field removed (the columns hold them). */
function withoutIdentity(document: ProfileDocument): ProfileDocument {
  const stored = structuredClone(document) as ProfileDocument;
  for (const field of ["id", "userId", "isActive", "externalId", "contractingTmcRef"]) delete stored[field];
  const personalInfo = objectAt(stored, "personalInfo");
  const name = objectAt(stored, "personalInfo", "name");
  if (personalInfo && name) {
    delete name.given;
    delete name.family1;
    if (Object.keys(name).length === 0) delete personalInfo.name;
  }
  const businessInfo = objectAt(stored, "businessInfo");
  if (businessInfo) {
    delete businessInfo.email;
    delete businessInfo.organizationRef;
  }
  return stored;
}

/**
 * The fields whose value differs, as JSON paths two levels deep at most ("personalInfo.addresses",
 * "travelPreferences"): names only, never values, for the audit trail.
 */
export function changedPaths(before: ProfileDocument, after: ProfileDocument, prefix = "", depth = 2): string[] {
  const changed: string[] = [];
  for (const key of [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()) {
    const a = before[key];
    const b = after[key];
    if (depth > 1 && isObject(a) && isObject(b)) changed.push(...changedPaths(a, b, `${prefix}${key}.`, depth - 1));
    else if (JSON.stringify(canonical(a)) !== JSON.stringify(canonical(b))) changed.push(`${prefix}${key}`);
  }
  return changed;
}

function updated(
  caller: ProfileCaller,
  user: UserProfileRecord,
  changedFields: readonly string[],
  requestId: string,
): AuditEvent {
  return {
    action: USER_UPDATED,
    outcome: "SUCCESS",
    actor: caller.clientId,
    tmcId: user.tmcId,
    targetClientId: user.id,
    debugIdentifier: requestId,
    details: { targetKind: "USER", changedFields: changedFields.join(",") },
  };
}

function objectAt(document: ProfileDocument, ...path: string[]): ProfileDocument | undefined {
  let value: unknown = document;
  for (const key of path) {
    if (!isObject(value)) return undefined;
    value = value[key];
  }
  return isObject(value) ? value : undefined;
}

function isObject(value: unknown): value is ProfileDocument {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function nonEmpty(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** Key order does not make a change. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (isObject(value))
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, canonical(value[k])]),
    );
  return value;
}
