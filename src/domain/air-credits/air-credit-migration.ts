import { invalidArgument } from "../../errors/domain-error.js";
import type { AuditEvent } from "../audit/model.js";
import type { AuditRepository } from "../audit/ports.js";
import type { Clock } from "../shared/clock.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { AirCreditCaller } from "./air-credit-listing.js";
import type { CreditUsageType } from "./model.js";
import type { UnusedCreditRepository } from "./ports.js";
import { isUsageTarget, migrationFailure, utcToday, type MigrationFailure } from "./transferability.js";

/** Payment source ids per request (the contract enforces it too). */
export const MAX_MIGRATION_IDS = 100;

export interface MigrationOutcome {
  readonly paymentSourceId: string;
  readonly status: "SUCCESS" | "FAILED";
  readonly failureReason: MigrationFailure | undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What AirCreditMigration is built from. */
export interface AirCreditMigrationDeps {
  readonly uow: UnitOfWork;
  readonly credits: UnusedCreditRepository;
  readonly audit: AuditRepository;
  readonly clock: Clock;
}

/**
 * Spec 4.8: moves the credits of payment sources between personal and company use. Each id is
 * its own transaction: its credits are locked (FOR UPDATE), checked, changed and audited
 * together, so concurrent migrations of one id serialise and the second finds the work done.
 * An id is answered FAILED — never failing the request — when it is unknown or not the caller's
 * (the same reason for both: PAYMENT_SOURCE_NOT_FOUND), or its credits are not OPEN, expired, or
 * of an airline that does not allow transfers. Migrating to the type a credit already has is a
 * SUCCESS that changes nothing and writes no audit event.
 */
export class AirCreditMigration {
  constructor(private readonly deps: AirCreditMigrationDeps) {}

  async migrate(
    caller: AirCreditCaller,
    paymentSourceIds: readonly string[],
    target: string,
    requestId: string,
  ): Promise<MigrationOutcome[]> {
    if (!isUsageTarget(target)) {
      throw invalidArgument("updateCreditUsageTypeTo must be COMPANY or PERSONAL", [
        { name: "updateCreditUsageTypeTo", value: target },
      ]);
    }
    const ids = [...new Set(paymentSourceIds.map((id) => id.toLowerCase()))];
    if (ids.length === 0 || ids.length > MAX_MIGRATION_IDS) {
      throw invalidArgument(`paymentSourceIds must hold 1 to ${MAX_MIGRATION_IDS} ids`, [
        { name: "paymentSourceIds", value: String(ids.length) },
      ]);
    }
    const outcomes: MigrationOutcome[] = [];
    for (const id of ids) outcomes.push(await this.migrateOne(caller, id, target, requestId));
    return outcomes;
  }

  private async migrateOne(
    caller: AirCreditCaller,
    paymentSourceId: string,
    target: CreditUsageType,
    requestId: string,
  ): Promise<MigrationOutcome> {
    const failed = (failureReason: MigrationFailure): MigrationOutcome => ({
      paymentSourceId,
      status: "FAILED",
      failureReason,
    });
    if (!UUID.test(paymentSourceId)) return failed("PAYMENT_SOURCE_NOT_FOUND");
    const scope = tenantScope(caller.tmcId);
    const today = utcToday(this.deps.clock);
    return this.deps.uow.transaction(async (tx) => {
      const credits = await this.deps.credits.lockByPaymentSource(tx, scope, paymentSourceId);
      // A company admin sees only its own company's credits: another company's are "not found".
      if (caller.role !== "TMC_ADMIN" && credits.some((c) => c.companyId !== caller.orgId))
        return failed("PAYMENT_SOURCE_NOT_FOUND");
      const failure = migrationFailure(credits, today);
      if (failure) return failed(failure);
      const from = credits.find((c) => c.creditUsageType !== target)?.creditUsageType;
      if (from === undefined) return { paymentSourceId, status: "SUCCESS", failureReason: undefined };
      await this.deps.credits.setUsageType(tx, scope, paymentSourceId, target);
      await this.deps.audit.append(tx, [
        migrated(caller, paymentSourceId, credits[0]!.companyId, from, target, credits.length, requestId),
      ]);
      return { paymentSourceId, status: "SUCCESS", failureReason: undefined };
    });
  }
}

function migrated(
  caller: AirCreditCaller,
  paymentSourceId: string,
  companyId: string,
  from: CreditUsageType,
  to: CreditUsageType,
  credits: number,
  requestId: string,
): AuditEvent {
  return {
    action: "AIR_CREDIT_MIGRATE",
    outcome: "SUCCESS",
    actor: caller.clientId,
    tmcId: caller.tmcId,
    targetClientId: null,
    debugIdentifier: requestId,
    details: { paymentSourceId, companyId, from, to, credits },
  };
}
