import type { Knex } from "knex";
import type { TenantScope } from "../../../domain/shared/tenant-scope.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { ProfileChange, ProfileDocument, UserProfileRecord } from "../../../domain/users/model.js";
import type { UserProfileRepository } from "../../../domain/users/ports.js";
import { profileEmailOf, type ScimEmail } from "../../../domain/scim/model.js";
import type { UserRow } from "../tables.js";
import { knexOf } from "../unit-of-work.js";

/** users.id is a uuid column: any other text would be a Postgres error, and is no user. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A users row with its company's and TMC's names. */
type ProfileRow = UserRow & { company_name: string; tmc_name: string };

/**
 * Users' profiles: the identity columns of `users` (the truth for their fields) and the `profile`
 * jsonb (the rest of the document). Every query is confined to the scope's TMC.
 */
export class PostgresUserRepository implements UserProfileRepository {
  async find(tx: Tx, scope: TenantScope, userId: string): Promise<UserProfileRecord | undefined> {
    if (!UUID.test(userId)) return undefined;
    const row = (await profiles(tx, scope, userId).first()) as ProfileRow | undefined;
    return row && toRecord(row);
  }

  async lock(tx: Tx, scope: TenantScope, userId: string): Promise<UserProfileRecord | undefined> {
    if (!UUID.test(userId)) return undefined;
    const row = (await profiles(tx, scope, userId).forUpdate("users").noWait().first()) as ProfileRow | undefined;
    return row && toRecord(row);
  }

  async update(tx: Tx, scope: TenantScope, userId: string, change: ProfileChange): Promise<void> {
    const db = knexOf(tx);
    await db<UserRow>("users")
      .where({ tmc_id: scope.tmcId, id: userId })
      .update({
        given_name: change.givenName,
        family_name: change.familyName,
        profile: JSON.stringify(change.profile) as unknown as Record<string, unknown>,
        updated_at: db.fn.now() as unknown as Date,
      });
  }
}

function profiles(tx: Tx, scope: TenantScope, userId: string): Knex.QueryBuilder<ProfileRow, ProfileRow | undefined> {
  return knexOf(tx)<ProfileRow>("users")
    .join("companies", "companies.id", "users.company_id")
    .join("tmcs", "tmcs.id", "users.tmc_id")
    .where({ "users.tmc_id": scope.tmcId, "users.id": userId })
    .select("users.*", "companies.name as company_name", "tmcs.name as tmc_name") as unknown as Knex.QueryBuilder<
    ProfileRow,
    ProfileRow | undefined
  >;
}

function toRecord(row: ProfileRow): UserProfileRecord {
  return {
    id: row.id,
    tmcId: row.tmc_id,
    tmcName: row.tmc_name,
    companyId: row.company_id,
    companyName: row.company_name,
    email: row.email,
    givenName: row.given_name,
    familyName: row.family_name,
    isActive: row.is_active,
    externalId: row.external_id ?? undefined,
    ...provisioned(profileEmailOf(emailsOf(row.scim_attributes))),
    profile: profileOf(row.profile),
  };
}

function provisioned(email: string | undefined): { provisionedEmail?: string } {
  return email === undefined ? {} : { provisionedEmail: email };
}

/** The SCIM emails kept in scim_attributes (none when it holds no list). */
function emailsOf(value: unknown): ScimEmail[] | undefined {
  const emails = profileOf(value).emails;
  return Array.isArray(emails) ? (emails as ScimEmail[]) : undefined;
}

/** jsonb arrives parsed from pg and PGlite alike; a string (a driver that did not parse it) is parsed here. */
function profileOf(value: unknown): ProfileDocument {
  const parsed = typeof value === "string" ? (JSON.parse(value) as unknown) : value;
  return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as ProfileDocument) : {};
}
