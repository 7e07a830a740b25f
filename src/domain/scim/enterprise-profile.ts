import crypto from "node:crypto";
import type { BusinessInfo, EnterpriseAttributes } from "./model.js";

/**
 * The enterprise extension (RFC 7643 4.3) on the user profile's businessInfo (proto JSON names of
 * travel.user.v2 BusinessInfo), so the profile API and SCIM show one value:
 *   employeeNumber → employeeId, department → departmentRef.name, costCenter → costCenterRef.name,
 *   manager.value → managerRef.id (managerRef.name: the manager's displayName),
 *   organization, division → companySpecifiedAttributes {fixedColumnName, value} (the profile has
 *   no field of its own for them; organizationRef is the company itself).
 * The schema table (user-schema.ts) says the same in its descriptions.
 */
const COMPANY_SPECIFIED = { organization: "organization", division: "division" } as const;

type Reference = { id?: unknown; name?: unknown };

export interface EnterpriseView extends EnterpriseAttributes {
  readonly managerName?: string;
}

export function enterpriseOf(businessInfo: BusinessInfo): EnterpriseView {
  const text = (value: unknown) => (typeof value === "string" && value !== "" ? value : undefined);
  const ref = (key: string) => (isObject(businessInfo[key]) ? (businessInfo[key] as Reference) : undefined);
  const specified = (name: string) => companySpecified(businessInfo).find((a) => a.fixedColumnName === name)?.value;
  return prune({
    employeeNumber: text(businessInfo.employeeId),
    department: text(ref("departmentRef")?.name),
    costCenter: text(ref("costCenterRef")?.name),
    organization: text(specified(COMPANY_SPECIFIED.organization)),
    division: text(specified(COMPANY_SPECIFIED.division)),
    managerId: text(ref("managerRef")?.id),
    managerName: text(ref("managerRef")?.name),
  });
}

/**
 * businessInfo with the extension's attributes written over it: every mapped field takes the new
 * value or is removed; every other field is kept. A department or cost center gets a name-based id
 * (RFC 9562 UUIDv5 in the company's namespace), because the profile's references carry a UUID and
 * SCIM sends only a name: the same name in one company is always the same id. A reference whose
 * name does not change keeps its id (the profile API may have set it).
 */
export function withEnterprise(
  businessInfo: BusinessInfo,
  enterprise: EnterpriseAttributes,
  companyId: string,
  managerName: string | undefined,
): BusinessInfo {
  const next: Record<string, unknown> = { ...businessInfo };
  const set = (key: string, value: unknown) => {
    if (value === undefined) delete next[key];
    else next[key] = value;
  };
  set("employeeId", enterprise.employeeNumber);
  set("departmentRef", namedReference(businessInfo.departmentRef, enterprise.department, companyId, "department"));
  set("costCenterRef", namedReference(businessInfo.costCenterRef, enterprise.costCenter, companyId, "costCenter"));
  set(
    "managerRef",
    enterprise.managerId === undefined
      ? undefined
      : { id: enterprise.managerId, ...(managerName ? { name: managerName } : {}) },
  );
  const others = companySpecified(businessInfo).filter(
    (a) => !Object.values(COMPANY_SPECIFIED).includes(a.fixedColumnName as never),
  );
  const specified = [
    ...others,
    ...(enterprise.organization !== undefined
      ? [{ fixedColumnName: COMPANY_SPECIFIED.organization, value: enterprise.organization }]
      : []),
    ...(enterprise.division !== undefined
      ? [{ fixedColumnName: COMPANY_SPECIFIED.division, value: enterprise.division }]
      : []),
  ];
  set("companySpecifiedAttributes", specified.length > 0 ? specified : undefined);
  return next;
}

/** title (RFC 7643 4.1.1, the job title) is businessInfo.designation. */
export function titleOf(businessInfo: BusinessInfo): string | undefined {
  return typeof businessInfo.designation === "string" && businessInfo.designation !== ""
    ? businessInfo.designation
    : undefined;
}

export function withTitle(businessInfo: BusinessInfo, title: string | undefined): BusinessInfo {
  const { designation: _replaced, ...rest } = businessInfo;
  return title === undefined ? rest : { ...rest, designation: title };
}

function namedReference(
  current: unknown,
  name: string | undefined,
  companyId: string,
  kind: string,
): Reference | undefined {
  if (name === undefined) return undefined;
  if (isObject(current) && (current as Reference).name === name && typeof (current as Reference).id === "string")
    return current as Reference;
  return { id: nameBasedUuid(companyId, `${kind}:${name}`), name };
}

/** RFC 9562 5.5: SHA-1 of the namespace UUID's bytes and the name, version 5, RFC variant. */
export function nameBasedUuid(namespace: string, name: string): string {
  const bytes = crypto
    .createHash("sha1")
    .update(Buffer.from(namespace.replace(/-/g, ""), "hex"))
    .update(name, "utf8")
    .digest()
    .subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function companySpecified(businessInfo: BusinessInfo): Array<{ fixedColumnName?: unknown; value?: unknown }> {
  const list = businessInfo.companySpecifiedAttributes;
  return Array.isArray(list) ? list.filter(isObject) : [];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function prune<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
