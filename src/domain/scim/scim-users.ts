import { DomainError, notFound } from "../../errors/domain-error.js";
import type { AuditEvent } from "../audit/model.js";
import type { AuditRepository } from "../audit/ports.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import { parseUserFilter } from "./filter.js";
import type { Tx } from "../shared/unit-of-work.js";
import { enterpriseOf, titleOf, withEnterprise, withTitle } from "./enterprise-profile.js";
import {
  DEFAULT_PAGE_COUNT,
  MAX_PAGE_COUNT,
  type EnterpriseAttributes,
  type KeptAttributes,
  type ScimCaller,
  type ScimUser,
  type ScimUserAttributes,
  type ScimUserRecord,
  type PatchOperation,
  type ProjectedUser,
  type ScimListResponse,
  type ScimUserDocument,
  type ScimUserResource,
} from "./model.js";
import { applyPatch } from "./patch.js";
import type { ScimUserRepository } from "./ports.js";
import {
  listResponse,
  project,
  serviceProviderConfig,
  userAttributes,
  userResource,
  userResourceType,
  userSchemas,
  type DiscoveryDocument,
  type ReadMode,
} from "./resource.js";

/** What a list or read asks for besides the filter and page (RFC 7644 3.9). */
export interface Projection {
  readonly attributes: string;
  readonly excludedAttributes: string;
}

/** What ScimUsers is built from. */
export interface ScimUsersDeps {
  readonly uow: UnitOfWork;
  readonly users: ScimUserRepository;
  readonly audit: AuditRepository;
}

/**
 * SCIM 2.0 provisioning of a company's users (RFC 7644). Every operation is confined to the
 * calling SCIM API user's company: another company's user is "not found", exactly like an
 * unknown one. Users deleted over SCIM are deactivated (is_active = false), stay in the table
 * for the profile API, and are "not found" over SCIM from then on. Every write is audited in its
 * own transaction, like the other admin operations (actor = the SCIM API user's clientId; the
 * target user's id and the names of the attributes written, never their values).
 */
export class ScimUsers {
  constructor(
    private readonly deps: ScimUsersDeps,
    /** The SCIM base URL (…/v2/scim/v2) for meta.location and Location. */
    private readonly baseUrl: string,
  ) {}

  async list(
    caller: ScimCaller,
    request: { filter: string; startIndex: number | undefined; count: number | undefined } & Projection,
  ): Promise<ScimListResponse<ProjectedUser>> {
    const filter = parseUserFilter(request.filter);
    // RFC 7644 3.4.2.4: a startIndex below 1 means 1, a negative count means 0; larger counts are capped.
    const startIndex = Math.max(1, request.startIndex ?? 1);
    const count = Math.min(MAX_PAGE_COUNT, Math.max(0, request.count ?? DEFAULT_PAGE_COUNT));
    const { users, total } = await this.deps.users.list(
      this.deps.uow.direct,
      tenantScope(caller.tmcId),
      caller.companyId,
      filter,
      { startIndex, count },
    );
    return listResponse(
      users.map((u) => project(userResource(u, this.baseUrl), request.attributes, request.excludedAttributes)),
      total,
      startIndex,
    );
  }

  async get(
    caller: ScimCaller,
    userId: string,
    projection: Projection = { attributes: "", excludedAttributes: "" },
  ): Promise<ProjectedUser> {
    const user = await this.deps.users.find(this.deps.uow.direct, tenantScope(caller.tmcId), caller.companyId, userId);
    if (!user) throw userNotFound(userId);
    return project(userResource(user, this.baseUrl), projection.attributes, projection.excludedAttributes);
  }

  async create(
    caller: ScimCaller,
    document: ScimUserDocument,
    requestId: string,
  ): Promise<{ resource: ScimUserResource; location: string }> {
    const attributes = userAttributes(document, { kind: "create" });
    const user = await this.deps.uow.transaction(async (tx) => {
      const record = await this.recordOf(tx, caller, undefined, attributes);
      const created = await this.deps.users.insert(tx, tenantScope(caller.tmcId), caller.companyId, record);
      await this.deps.audit.append(tx, [
        event("SCIM_USER_CREATE", caller, created.id, requestId, writtenNames(attributes)),
      ]);
      return created;
    });
    const resource = userResource(user, this.baseUrl);
    return { resource, location: resource.meta.location };
  }

  async replace(
    caller: ScimCaller,
    userId: string,
    document: ScimUserDocument,
    requestId: string,
  ): Promise<ScimUserResource> {
    return this.write(caller, userId, "SCIM_USER_REPLACE", requestId, (current) =>
      userAttributes(document, { kind: "replace", current }),
    );
  }

  /** RFC 7644 3.5.2: the operations' targets and values were checked against the schema table at the RPC edge. */
  async patch(
    caller: ScimCaller,
    userId: string,
    operations: readonly PatchOperation[],
    requestId: string,
  ): Promise<ScimUserResource> {
    return this.write(caller, userId, "SCIM_USER_PATCH", requestId, (current) => {
      const patched = applyPatch(userResource(current, this.baseUrl), operations);
      return userAttributes(patched, { kind: "patch", current } satisfies ReadMode);
    });
  }

  async delete(caller: ScimCaller, userId: string, requestId: string): Promise<void> {
    const scope = tenantScope(caller.tmcId);
    await this.deps.uow.transaction(async (tx) => {
      if (!(await this.deps.users.markDeleted(tx, scope, caller.companyId, userId))) throw userNotFound(userId);
      await this.deps.audit.append(tx, [event("SCIM_USER_DELETE", caller, userId, requestId)]);
    });
  }

  serviceProviderConfig(): DiscoveryDocument {
    return serviceProviderConfig(this.baseUrl);
  }

  resourceTypes(): ScimListResponse<DiscoveryDocument> {
    return listResponse([userResourceType(this.baseUrl)], 1, 1);
  }

  resourceType(id: string): DiscoveryDocument {
    if (id !== "User") throw notFound("Resource type", [{ name: "resourceTypeId", value: id.slice(0, 100) }]);
    return userResourceType(this.baseUrl);
  }

  schemas(): ScimListResponse<DiscoveryDocument> {
    const schemas = userSchemas(this.baseUrl);
    return listResponse(schemas, schemas.length, 1);
  }

  schema(id: string): DiscoveryDocument {
    const schema = userSchemas(this.baseUrl).find((s) => s.id === id);
    if (!schema) throw notFound("Schema", [{ name: "schemaId", value: id.slice(0, 100) }]);
    return schema;
  }

  /** Locks the user, computes its new attributes from the current ones, stores and audits them in one transaction. */
  private async write(
    caller: ScimCaller,
    userId: string,
    action: string,
    requestId: string,
    next: (current: ScimUser) => ScimUserAttributes,
  ): Promise<ScimUserResource> {
    const scope = tenantScope(caller.tmcId);
    const user = await this.deps.uow.transaction(async (tx) => {
      const current = await this.deps.users.lock(tx, scope, caller.companyId, userId);
      if (!current) throw userNotFound(userId);
      const record = await this.recordOf(tx, caller, current, next(current));
      const updated = await this.deps.users.update(tx, scope, caller.companyId, userId, record);
      if (!updated) throw userNotFound(userId);
      await this.deps.audit.append(tx, [event(action, caller, userId, requestId, changedNames(current, updated))]);
      return updated;
    });
    return userResource(user, this.baseUrl);
  }

  /** The columns, and businessInfo when title or the enterprise extension changes it (else undefined: not rewritten). */
  private async recordOf(
    tx: Tx,
    caller: ScimCaller,
    current: ScimUser | undefined,
    attributes: ScimUserAttributes,
  ): Promise<ScimUserRecord> {
    const { enterprise, title, preferredLanguage, ...columns } = attributes;
    const before = current?.businessInfo ?? {};
    let businessInfo = before;
    if (title !== undefined && title.value !== titleOf(before)) businessInfo = withTitle(businessInfo, title.value);
    const { managerName: storedManagerName, ...stored } = enterpriseOf(before);
    // Unchanged: businessInfo is not rewritten (fields SCIM cannot see, such as a reference without a name, stay as they are).
    if (enterprise !== undefined && !(current && sameAttributes(stored, enterprise))) {
      businessInfo = withEnterprise(
        businessInfo,
        enterprise,
        caller.companyId,
        await this.managerNameOf(tx, caller, current, enterprise, stored.managerId, storedManagerName),
      );
    }
    return {
      ...columns,
      businessInfo: businessInfo === before ? undefined : businessInfo,
      // Written only when it changes, like businessInfo.
      preferredLanguage:
        preferredLanguage !== undefined && preferredLanguage.value !== current?.preferredLanguage
          ? preferredLanguage
          : undefined,
    };
  }

  /**
   * A new manager must be another user of the company that SCIM sees (RFC 7643 4.3: manager.value
   * is the manager's id); its displayName is kept with the reference. An unchanged manager is not
   * looked up again (it may have left since).
   */
  private async managerNameOf(
    tx: Tx,
    caller: ScimCaller,
    current: ScimUser | undefined,
    enterprise: EnterpriseAttributes,
    storedManagerId: string | undefined,
    storedManagerName: string | undefined,
  ): Promise<string | undefined> {
    let managerName = storedManagerName;
    if (enterprise.managerId !== undefined && enterprise.managerId !== storedManagerId) {
      const manager =
        enterprise.managerId === current?.id
          ? undefined
          : await this.deps.users.find(tx, tenantScope(caller.tmcId), caller.companyId, enterprise.managerId);
      if (!manager)
        throw new DomainError("INVALID_VALUE", "manager.value must be the id of another user of the company", {
          params: [{ name: "manager.value", value: "invalid" }],
        });
      managerName =
        manager.displayName ?? ([manager.givenName, manager.familyName].filter((p) => p !== "").join(" ") || undefined);
    }
    return managerName;
  }
}

function sameAttributes(a: object, b: object): boolean {
  const entries = (o: object) =>
    Object.entries(o)
      .filter(([, v]) => v !== undefined)
      .sort(([x], [y]) => x.localeCompare(y));
  return JSON.stringify(entries(a)) === JSON.stringify(entries(b));
}

function userNotFound(userId: string): DomainError {
  return notFound("User", [{ name: "id", value: userId.slice(0, 100) }]);
}

/** The SCIM attribute names a create wrote: the audit trail holds no personal data. */
function writtenNames(attributes: ScimUserAttributes): AuditedNames {
  const names = Object.entries(attributes).flatMap(([key, value]) =>
    key === "enterprise" ||
    key === "kept" ||
    value === undefined ||
    ((key === "title" || key === "preferredLanguage") && (value as { value?: string }).value === undefined)
      ? []
      : [key],
  );
  for (const key of Object.keys(attributes.enterprise ?? {})) names.push(`enterprise.${key}`);
  names.push(...Object.keys(attributes.kept));
  return { names, active: attributes.active };
}

/** The SCIM attribute names whose stored value changed (enterprise ones as enterprise.<name>). */
function changedNames(before: ScimUser, after: ScimUser): AuditedNames {
  const core = ["userName", "givenName", "familyName", "formattedName", "displayName", "active", "externalId"] as const;
  const names: string[] = core.filter((key) => before[key] !== after[key]);
  if (titleOf(before.businessInfo) !== titleOf(after.businessInfo)) names.push("title");
  if (before.preferredLanguage !== after.preferredLanguage) names.push("preferredLanguage");
  for (const key of new Set([...Object.keys(before.kept), ...Object.keys(after.kept)]) as Set<keyof KeptAttributes>)
    if (JSON.stringify(before.kept[key]) !== JSON.stringify(after.kept[key])) names.push(key);
  const [was, is] = [enterpriseOf(before.businessInfo), enterpriseOf(after.businessInfo)];
  for (const key of new Set([...Object.keys(was), ...Object.keys(is)])) {
    if (key !== "managerName" && was[key as keyof typeof was] !== is[key as keyof typeof is])
      names.push(`enterprise.${key}`);
  }
  return { names, active: before.active !== after.active ? after.active : undefined };
}

interface AuditedNames {
  readonly names: readonly string[];
  /** The new activation state, when it is part of the change. */
  readonly active: boolean | undefined;
}

function event(
  action: string,
  caller: ScimCaller,
  userId: string,
  requestId: string,
  written?: AuditedNames,
): AuditEvent {
  return {
    action,
    outcome: "SUCCESS",
    actor: caller.clientId,
    tmcId: caller.tmcId,
    targetClientId: null,
    debugIdentifier: requestId,
    details: {
      targetUserId: userId,
      orgId: caller.companyId,
      ...(written !== undefined ? { attributes: [...written.names].sort().join(",") } : {}),
      ...(written?.active !== undefined ? { active: written.active } : {}),
    },
  };
}
