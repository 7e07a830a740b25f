import type { TenantScope } from "../shared/tenant-scope.js";
import type { Tx } from "../shared/unit-of-work.js";
import type { AuditEvent, RecordedAuditEvent } from "./model.js";

/**
 * Thrown by `append` when the database refused the events themselves (a value it cannot store),
 * as opposed to being unreachable: retrying the same events can never succeed.
 */
export class AuditRecordRejected extends Error {
  constructor(cause: unknown) {
    super("the database refused an audit record", { cause });
    this.name = "AuditRecordRejected";
  }
}

/** What the operator's `audit list` narrows the trail to; every part is optional. */
export interface AuditFilter {
  /** Any of these actions (none: every action). */
  readonly actions: readonly string[];
  /** Events whose actor or target is this client. */
  readonly clientId: string | undefined;
  /** occurred_at >= since. */
  readonly since: Date | undefined;
  /** occurred_at < until. */
  readonly until: Date | undefined;
  /** Keyset paging: only events with an id below this one (the last id of the previous page). */
  readonly beforeId: string | undefined;
}

/** An event with its position in the trail (a bigserial, as text). */
export interface NumberedAuditEvent extends RecordedAuditEvent {
  readonly id: string;
}

export interface AuditRepository {
  /**
   * Appends events; each carries its own tenant (or none, for unattributable requests). In the
   * same statement, each API user named as the target of a TOKEN_ISSUED event of its own tenant
   * gets its last-token-issued time raised to the newest such event (never lowered).
   */
  append(tx: Tx, events: readonly AuditEvent[]): Promise<void>;
  /** A tenant's trail, newest first. */
  list(tx: Tx, scope: TenantScope, limit: number): Promise<RecordedAuditEvent[]>;
  /** A tenant's trail narrowed by `filter`, newest first (highest id; in a time window, latest occurred_at, then id), at most `limit` events. */
  search(tx: Tx, scope: TenantScope, filter: AuditFilter, limit: number): Promise<NumberedAuditEvent[]>;
  /**
   * The platform's own trail (events of no tenant: resource servers, refusals no tenant can be
   * named for) narrowed by `filter`, newest first, at most `limit` events. It reads no tenant's rows.
   */
  searchPlatform(tx: Tx, filter: AuditFilter, limit: number): Promise<NumberedAuditEvent[]>;
}
