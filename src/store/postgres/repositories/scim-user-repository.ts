import crypto from "node:crypto";
import type { Knex } from "knex";
import { DomainError } from "../../../errors/domain-error.js";
import type {
  BusinessInfo,
  CompareOperator,
  FilterAttribute,
  KeptAttributes,
  ScimUser,
  ScimUserRecord,
  UserFilter,
  UserPage,
} from "../../../domain/scim/model.js";
import type { ScimUserRepository } from "../../../domain/scim/ports.js";
import type { TenantScope } from "../../../domain/shared/tenant-scope.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { UserRow } from "../tables.js";
import { pageWithTotal } from "../paging.js";
import { knexOf, rethrowDbError } from "../unit-of-work.js";

/** The columns of `users` SCIM reads, and of the profile document only businessInfo (the enterprise extension). */
type ScimUserRow = Omit<UserRow, "profile"> & {
  profile?: unknown;
  business_info: BusinessInfo | string | null;
  preferred_language: unknown;
};

const COLUMNS = [
  "id",
  "company_id",
  "tmc_id",
  "email",
  "given_name",
  "family_name",
  "display_name",
  "name_formatted",
  "is_active",
  "external_id",
  "scim_attributes",
  "created_at",
  "updated_at",
] as const;
/** The columns, the profile's businessInfo and preferredLanguage (not the whole document: it holds personal data SCIM never shows). */
const selected = (db: Knex | Knex.Transaction) => [
  ...COLUMNS,
  db.raw("profile->'businessInfo' as business_info"),
  db.raw("profile->'personalInfo'->'preferredLanguage' as preferred_language"),
];

/** The stored emails' values, for a filter on emails.value (none when scim_attributes holds no list). */
const EMAIL_VALUES =
  "(select lower(e->>'value') as v from jsonb_array_elements(case when jsonb_typeof(scim_attributes->'emails') = 'array' then scim_attributes->'emails' else '[]'::jsonb end) as e)";

/** Stored attribute → column; case-insensitive attributes compare lower-cased columns (email_normalized is lower(email)). */
const COLUMN: Readonly<Record<FilterAttribute, { column: string; lower?: string }>> = {
  id: { column: "id" },
  userName: { column: "email_normalized", lower: "email_normalized" },
  // The userName, or any stored email (compared by emailCondition).
  emails: { column: "email_normalized", lower: "email_normalized" },
  externalId: { column: "external_id" },
  givenName: { column: "given_name", lower: "lower(given_name)" },
  familyName: { column: "family_name", lower: "lower(family_name)" },
  displayName: { column: "display_name", lower: "lower(display_name)" },
  active: { column: "is_active" },
  created: { column: "created_at" },
  lastModified: { column: "updated_at" },
};

const SQL_OPERATOR = { eq: "=", ne: "<>", gt: ">", ge: ">=", lt: "<", le: "<=" } as const;

/**
 * SCIM's view of the `users` table, confined to one company of one TMC, without the users SCIM
 * deleted. Filters become parameterised knex conditions (values are always bound, never spliced).
 */
export class PostgresScimUserRepository implements ScimUserRepository {
  async list(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    filter: UserFilter | undefined,
    page: UserPage,
  ): Promise<{ users: ScimUser[]; total: number }> {
    const db = knexOf(tx);
    const base = () => {
      const query = visible(db, scope, companyId);
      if (filter) query.where((qb) => condition(qb, filter));
      return query;
    };
    // One round trip: the page with the total of the whole match, even for an empty page.
    const { rows, total } = await pageWithTotal<ScimUserRow>(db, {
      count: base(),
      page: base()
        .select(selected(db))
        .orderBy([{ column: "created_at" }, { column: "id" }])
        .offset(page.startIndex - 1)
        .limit(page.count),
      order: "page.created_at, page.id",
      present: "id",
    });
    return { users: rows.map(toScimUser), total };
  }

  async find(tx: Tx, scope: TenantScope, companyId: string, userId: string): Promise<ScimUser | undefined> {
    if (!isUuid(userId)) return undefined;
    const row = await visible(knexOf(tx), scope, companyId)
      .where({ id: userId })
      .first(selected(knexOf(tx)));
    return row && toScimUser(row as unknown as ScimUserRow);
  }

  async lock(tx: Tx, scope: TenantScope, companyId: string, userId: string): Promise<ScimUser | undefined> {
    if (!isUuid(userId)) return undefined;
    const row = await visible(knexOf(tx), scope, companyId)
      .where({ id: userId })
      .forUpdate()
      .noWait()
      .first(selected(knexOf(tx)));
    return row && toScimUser(row as unknown as ScimUserRow);
  }

  async insert(tx: Tx, scope: TenantScope, companyId: string, user: ScimUserRecord): Promise<ScimUser> {
    const db = knexOf(tx);
    const company = (await db("companies").where({ id: companyId, tmc_id: scope.tmcId }).first("id")) as
      { id: string } | undefined;
    if (!company)
      throw new DomainError("NOT_FOUND", "Company not found", { params: [{ name: "orgId", value: companyId }] });
    try {
      const [row] = await db<ScimUserRow>("users")
        .insert({
          id: crypto.randomUUID(),
          company_id: companyId,
          tmc_id: scope.tmcId,
          ...columnsOf(db, user, "insert"),
        })
        .returning(selected(db) as never);
      return toScimUser(row as ScimUserRow);
    } catch (error) {
      rethrowUniqueness(error);
    }
  }

  async update(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    userId: string,
    user: ScimUserRecord,
  ): Promise<ScimUser | undefined> {
    if (!isUuid(userId)) return undefined;
    const db = knexOf(tx);
    try {
      const [row] = await visible(db, scope, companyId)
        .where({ id: userId })
        .update({ ...columnsOf(db, user, "update"), updated_at: db.fn.now() as unknown as Date })
        .returning(selected(db) as never);
      return row && toScimUser(row as unknown as ScimUserRow);
    } catch (error) {
      rethrowUniqueness(error);
    }
  }

  async markDeleted(tx: Tx, scope: TenantScope, companyId: string, userId: string): Promise<boolean> {
    if (!isUuid(userId)) return false;
    const db = knexOf(tx);
    const changed = await visible(db, scope, companyId)
      .where({ id: userId })
      .update({
        is_active: false,
        scim_deleted_at: db.fn.now() as unknown as Date,
        updated_at: db.fn.now() as unknown as Date,
      });
    return Number(changed) > 0;
  }
}

/** The company's users SCIM sees: the tenant and company first, in every query. */
function visible(db: Knex | Knex.Transaction, scope: TenantScope, companyId: string) {
  return db<ScimUserRow>("users").where({ tmc_id: scope.tmcId, company_id: companyId }).whereNull("scim_deleted_at");
}

function columnsOf(db: Knex | Knex.Transaction, user: ScimUserRecord, write: "insert" | "update") {
  return {
    email: user.userName,
    email_normalized: user.userName.toLowerCase(),
    given_name: user.givenName,
    family_name: user.familyName,
    display_name: user.displayName ?? null,
    name_formatted: user.formattedName ?? null,
    is_active: user.active,
    external_id: user.externalId ?? null,
    scim_attributes: JSON.stringify(user.kept) as unknown as Record<string, unknown>,
    ...profileOf(db, user, write),
  };
}

/**
 * Only businessInfo and personalInfo.preferredLanguage change, when given; the rest of the profile
 * document stays as the profile API wrote it.
 */
function profileOf(db: Knex | Knex.Transaction, user: ScimUserRecord, write: "insert" | "update") {
  const language = user.preferredLanguage;
  if (user.businessInfo === undefined && language === undefined) return {};
  if (write === "insert") {
    return {
      profile: JSON.stringify({
        ...(user.businessInfo !== undefined ? { businessInfo: user.businessInfo } : {}),
        ...(language?.value !== undefined ? { personalInfo: { preferredLanguage: language.value } } : {}),
      }),
    };
  }
  let sql = "coalesce(profile, '{}'::jsonb)";
  const bindings: string[] = [];
  if (user.businessInfo !== undefined) {
    sql = `jsonb_set(${sql}, '{businessInfo}', ?::jsonb)`;
    bindings.push(JSON.stringify(user.businessInfo));
  }
  if (language !== undefined) {
    const personal = "coalesce(profile->'personalInfo', '{}'::jsonb)";
    sql =
      language.value === undefined
        ? `jsonb_set(${sql}, '{personalInfo}', ${personal} - 'preferredLanguage')`
        : `jsonb_set(${sql}, '{personalInfo}', ${personal} || jsonb_build_object('preferredLanguage', ?::text))`;
    if (language.value !== undefined) bindings.push(language.value);
  }
  return { profile: db.raw(sql, bindings) };
}

/** A UserFilter as a knex condition: every value a bound parameter. */
function condition(qb: Knex.QueryBuilder, filter: UserFilter): void {
  switch (filter.kind) {
    case "and":
      for (const f of filter.filters) qb.andWhere((inner) => condition(inner, f));
      return;
    case "or":
      for (const f of filter.filters) qb.orWhere((inner) => condition(inner, f));
      return;
    case "not":
      qb.whereNot((inner) => condition(inner, filter.filter));
      return;
    case "constant":
      qb.whereRaw(filter.value ? "true" : "false");
      return;
    case "present":
      presentCondition(qb, filter.attribute);
      return;
    case "compare": {
      const { column, lower } = COLUMN[filter.attribute];
      const target = lower ?? column;
      const value = filter.value;
      // Before every operator: text that is not a UUID never equals the uuid column (and would make
      // Postgres fail the cast), so eq matches nothing and ne matches every user.
      if (filter.attribute === "id" && !isUuid(String(value))) {
        qb.whereRaw(filter.op === "ne" ? "true" : "false");
        return;
      }
      if (filter.attribute === "emails") {
        emailCondition(qb, filter.op, String(value));
        return;
      }
      switch (filter.op) {
        case "co":
        case "sw":
        case "ew": {
          const escaped = String(value).replace(/[\\%_]/g, (c) => `\\${c}`);
          const pattern = filter.op === "sw" ? `${escaped}%` : filter.op === "ew" ? `%${escaped}` : `%${escaped}%`;
          qb.whereRaw(`${target} like ? escape '\\'`, [pattern]);
          return;
        }
        case "ne":
          // RFC 7644: an unassigned attribute is "not equal" to any value.
          if (filter.attribute === "externalId")
            qb.where((inner) => {
              inner.whereNull(column).orWhere(column, "<>", value as string);
            });
          else qb.whereRaw(`${target} <> ?`, [value as string | boolean]);
          return;
        default:
          qb.whereRaw(`${target} ${SQL_OPERATOR[filter.op]} ?`, [
            value instanceof Date ? value.toISOString() : (value as string | boolean),
          ]);
      }
    }
  }
}

/** `attr pr`: assigned (an empty string is unassigned, RFC 7643 2.5). */
function presentCondition(qb: Knex.QueryBuilder, attribute: FilterAttribute): void {
  const { column } = COLUMN[attribute];
  if (attribute === "emails") {
    qb.where((inner) => {
      inner.where(column, "<>", "").orWhereRaw(`exists ${EMAIL_VALUES}`);
    });
    return;
  }
  if (attribute === "externalId") qb.whereNotNull(column).andWhere(column, "<>", "");
  else if (column === "given_name" || column === "family_name" || column === "email_normalized")
    qb.where(column, "<>", "");
  else if (column === "display_name") qb.whereNotNull(column).andWhere(column, "<>", "");
  else qb.whereNotNull(column);
}

/**
 * emails.value: the userName or any stored email matches (RFC 7644 3.4.2.2: a multi-valued
 * attribute matches when one of its values does); ne holds when none is equal.
 */
function emailCondition(qb: Knex.QueryBuilder, op: CompareOperator, value: string): void {
  const comparison = (target: string): [string, string] => {
    if (op === "co" || op === "sw" || op === "ew") {
      const escaped = value.replace(/[\\%_]/g, (c) => `\\${c}`);
      const pattern = op === "sw" ? `${escaped}%` : op === "ew" ? `%${escaped}` : `%${escaped}%`;
      return [`${target} like ? escape '\\'`, pattern];
    }
    return [`${target} ${SQL_OPERATOR[op === "ne" ? "eq" : op]} ?`, value];
  };
  const [onUserName, first] = comparison("email_normalized");
  const [onStored, second] = comparison("v");
  const any = `(${onUserName} or exists (select 1 from ${EMAIL_VALUES} as emails where ${onStored}))`;
  qb.whereRaw(op === "ne" ? `not ${any}` : any, [first, second]);
}

function rethrowUniqueness(error: unknown): never {
  const constraint = (error as { constraint?: unknown }).constraint;
  if (constraint === "users_company_external_id_unique")
    rethrowDbError(error, "A user with this externalId exists in the company");
  rethrowDbError(error, "A user with this userName exists in the company");
}

/** jsonb comes back parsed from pg and PGlite; a non-object (never written by the profile API) counts as none. */
function businessInfoOf(value: BusinessInfo | string | null): BusinessInfo {
  return (jsonObjectOf(value) ?? {}) as BusinessInfo;
}

function jsonObjectOf(value: unknown): Record<string, unknown> | undefined {
  const parsed: unknown = typeof value === "string" ? JSON.parse(value) : value;
  return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
    ? (parsed as Record<string, unknown>)
    : undefined;
}

function isUuid(value: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value);
}

function toScimUser(row: ScimUserRow): ScimUser {
  return {
    id: row.id,
    companyId: row.company_id,
    tmcId: row.tmc_id,
    userName: row.email,
    givenName: row.given_name,
    familyName: row.family_name,
    formattedName: row.name_formatted ?? undefined,
    displayName: row.display_name ?? undefined,
    active: row.is_active,
    externalId: row.external_id ?? undefined,
    businessInfo: businessInfoOf(row.business_info),
    preferredLanguage:
      typeof row.preferred_language === "string" && row.preferred_language !== "" ? row.preferred_language : undefined,
    kept: (jsonObjectOf(row.scim_attributes) ?? {}) as KeptAttributes,
    created: new Date(row.created_at),
    lastModified: new Date(row.updated_at),
  };
}
