import type { TenantScope } from "../shared/tenant-scope.js";
import type { Tx } from "../shared/unit-of-work.js";
import type { NewAirCredit, NewPaymentSource } from "./model.js";

export interface AirCreditRepository {
  /** Throws NOT_FOUND when the company is not the tenant's. Returns the new payment source's id. */
  insertPaymentSource(tx: Tx, scope: TenantScope, source: NewPaymentSource): Promise<string>;
  /** Throws NOT_FOUND when a company is not the tenant's. Returns how many were inserted. */
  insertCredits(tx: Tx, scope: TenantScope, credits: readonly NewAirCredit[]): Promise<number>;
}
