import type { TenantScope } from "../shared/tenant-scope.js";
import type { Tx } from "../shared/unit-of-work.js";
import type {
  CreditFilter,
  CreditPage,
  CreditUsageType,
  ImportedCredit,
  LockedCredit,
  NewAirCredit,
  NewPaymentSource,
  TransferableOn,
  TransferableValues,
} from "./model.js";

export interface AirCreditRepository {
  /** Throws NOT_FOUND when the company is not the tenant's. Returns the new payment source's id. */
  insertPaymentSource(tx: Tx, scope: TenantScope, source: NewPaymentSource): Promise<string>;
  /** Throws NOT_FOUND when a company is not the tenant's. Returns how many were inserted. */
  insertCredits(tx: Tx, scope: TenantScope, credits: readonly NewAirCredit[]): Promise<number>;
}

/** The v3 operations' storage: listing, migrating and importing unused credits. */
export interface UnusedCreditRepository {
  /** Whether the company exists and is the tenant's. */
  companyExists(tx: Tx, scope: TenantScope, companyId: string): Promise<boolean>;
  /** One page of the company's transferable credits matching `filter`, by expiry date then ticket number, and how many match. */
  listTransferable(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    on: TransferableOn,
    filter: CreditFilter,
    page: { offset: number; limit: number },
  ): Promise<CreditPage>;
  /** Distinct FOP labels, PCCs and legal entity names over all the company's transferable credits, sorted. */
  transferableValues(tx: Tx, scope: TenantScope, companyId: string, on: TransferableOn): Promise<TransferableValues>;
  /** Locks (FOR UPDATE) and returns the credits of a payment source of the tenant; empty when there are none. */
  lockByPaymentSource(tx: Tx, scope: TenantScope, paymentSourceId: string): Promise<LockedCredit[]>;
  /** Sets the usage type of every credit of the payment source (and of the source itself). */
  setUsageType(tx: Tx, scope: TenantScope, paymentSourceId: string, type: CreditUsageType): Promise<void>;
  /**
   * Inserts the credits, or updates those whose ticket number the company already has. Throws
   * NOT_FOUND when the company is not the tenant's, ALREADY_EXISTS when a payment source id
   * belongs to another company. Returns the ticket numbers that already existed.
   */
  upsertCredits(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    credits: readonly ImportedCredit[],
  ): Promise<{ created: number; updated: number }>;
  /**
   * Refreshes the planner's statistics of the credits when many rows changed since they were
   * last gathered (after bulk imports, before autovacuum would). No tenant data: table statistics.
   */
  refreshStatisticsIfStale(tx: Tx): Promise<void>;
}

/** Finds the tenant of a company the operator names (unscoped by nature: it is how the scope is found). */
export interface CompanyDirectory {
  tenantOfCompany(tx: Tx, companyId: string): Promise<TenantScope | undefined>;
}
