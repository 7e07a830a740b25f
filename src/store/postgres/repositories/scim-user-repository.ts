import crypto from "node:crypto";
import type { Knex } from "knex";
import { DomainError } from "../../../errors/domain-error.js";
import type {
  BusinessInfo,
  FilterAttribute,
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
type ScimUserRow = Omit<UserRow, "profile"> & { profile?: unknown; business_info: BusinessInfo | string | null };

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
  "created_at",
  "updated_at",
] as const;
/** The columns and the profile's businessInfo (not the whole document: it holds personal data SCIM never shows). */
const selected = (db: Knex | Knex.Transaction) => [...COLUMNS, db.raw("profile->'businessInfo' as business_info")];

/** Stored attribute → column; case-insensitive attributes compare lower-cased columns (email_normalized is lower(email)). */
const COLUMN: Readonly<Record<FilterAttribute, { column: string; lower?: string }>> = {
  id: { column: "id" },
  userName: { column: "email_normalized", lower: "email_normalized" },
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
    // Only businessInfo changes; the rest of the profile document stays as the profile API wrote it.
    ...(user.businessInfo === undefined
      ? {}
      : write === "insert"
        ? { profile: JSON.stringify({ businessInfo: user.businessInfo }) }
        : {
            profile: db.raw("jsonb_set(coalesce(profile, '{}'::jsonb), '{businessInfo}', ?::jsonb)", [
              JSON.stringify(user.businessInfo),
            ]),
          }),
  };
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
    case "present": {
      const { column } = COLUMN[filter.attribute];
      if (filter.attribute === "externalId") qb.whereNotNull(column).andWhere(column, "<>", "");
      else if (column === "given_name" || column === "family_name" || column === "email_normalized")
        qb.where(column, "<>", "");
      else if (column === "display_name") qb.whereNotNull(column).andWhere(column, "<>", "");
      else qb.whereNotNull(column);
      return;
    }
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

function rethrowUniqueness(error: unknown): never {
  const constraint = (error as { constraint?: unknown }).constraint;
  if (constraint === "users_company_external_id_unique")
    rethrowDbError(error, "A user with this externalId exists in the company");
  rethrowDbError(error, "A user with this userName exists in the company");
}

/** jsonb comes back parsed from pg and PGlite; a non-object (never written by the profile API) counts as none. */
function businessInfoOf(value: BusinessInfo | string | null): BusinessInfo {
  const parsed: unknown = typeof value === "string" ? JSON.parse(value) : value;
  return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as BusinessInfo) : {};
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
    created: new Date(row.created_at),
    lastModified: new Date(row.updated_at),
  };
}
