import type { TenantScope } from "../shared/tenant-scope.js";
import type { Tx } from "../shared/unit-of-work.js";
import type { ScimUser, ScimUserRecord, UserFilter, UserPage } from "./model.js";

/**
 * The users of one company as SCIM provisions them (the `users` table). Every method is confined
 * to the tenant and to one of its companies; users deleted over SCIM are invisible to all of them.
 */
export interface ScimUserRepository {
  /** Users matching the filter (all when undefined), by creation time then id. */
  list(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    filter: UserFilter | undefined,
    page: UserPage,
  ): Promise<{ users: ScimUser[]; total: number }>;
  find(tx: Tx, scope: TenantScope, companyId: string, userId: string): Promise<ScimUser | undefined>;
  /** Locks the user's row for the rest of the transaction. */
  lock(tx: Tx, scope: TenantScope, companyId: string, userId: string): Promise<ScimUser | undefined>;
  /** Throws ALREADY_EXISTS when the userName (case-insensitive) or externalId is taken in the company; writes businessInfo into the profile only when it is given. */
  insert(tx: Tx, scope: TenantScope, companyId: string, user: ScimUserRecord): Promise<ScimUser>;
  /** Throws ALREADY_EXISTS like insert. */
  update(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    userId: string,
    user: ScimUserRecord,
  ): Promise<ScimUser | undefined>;
  /** SCIM DELETE: is_active = false and invisible to SCIM from now on (the row stays for the profile API). */
  markDeleted(tx: Tx, scope: TenantScope, companyId: string, userId: string): Promise<boolean>;
}
