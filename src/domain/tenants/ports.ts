import type { TenantScope } from "../shared/tenant-scope.js";
import type { Tx } from "../shared/unit-of-work.js";
import type { Company, NewUser, Tmc, User } from "./model.js";

/** A TMC with how many active (not revoked) API users it holds: the operator's view. */
export interface TmcWithUsage extends Tmc {
  readonly activeApiUsers: number;
}

/** TMCs, their companies and users. Every method but `createTmc` and `listTmcs` is confined to one tenant. */
export interface TenantRepository {
  createTmc(tx: Tx, name: string, maxApiUsers: number): Promise<Tmc>;
  /** Every TMC, by name then id, with its active API-user count; and how many TMCs there are. The operator's, unscoped by nature. */
  listTmcs(tx: Tx, page: { limit: number; offset: number }): Promise<{ tmcs: TmcWithUsage[]; total: number }>;
  findTmc(tx: Tx, scope: TenantScope): Promise<Tmc | undefined>;
  /** Locks the TMC row for the rest of the transaction: serialises limit checks per tenant. */
  lockTmc(tx: Tx, scope: TenantScope): Promise<Tmc | undefined>;
  setApiUserLimit(tx: Tx, scope: TenantScope, maxApiUsers: number): Promise<Tmc | undefined>;
  createCompany(tx: Tx, scope: TenantScope, name: string): Promise<Company>;
  findCompany(tx: Tx, scope: TenantScope, companyId: string): Promise<Company | undefined>;
  /**
   * The tenant a company belongs to, for the operator, who names a company without its TMC.
   * Unscoped by nature: it is how the scope is found.
   */
  tenantOfCompany(tx: Tx, companyId: string): Promise<TenantScope | undefined>;
  /** Throws ALREADY_EXISTS when the email is taken in the company. */
  createUser(tx: Tx, scope: TenantScope, companyId: string, user: NewUser): Promise<User>;
  /**
   * The active users of the tenant with this email (case-insensitive), at most `limit`: those of
   * `companyFirst` first, then by id. Emails are unique per company, not per TMC, so each is of
   * another company; which one an identity provider's token names is the token exchange's rule.
   */
  findActiveUsersByEmail(tx: Tx, scope: TenantScope, email: string, options: EmailLookup): Promise<User[]>;
  /** The active user with this id in the tenant. */
  findActiveUser(tx: Tx, scope: TenantScope, userId: string): Promise<User | undefined>;
}

/** How many users an email lookup returns, and whose come first. */
export interface EmailLookup {
  readonly limit: number;
  readonly companyFirst?: string;
}
