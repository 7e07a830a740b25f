import crypto from "node:crypto";
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
  UnusedCredit,
} from "../../src/domain/air-credits/model.js";
import type { AirCreditRepository, UnusedCreditRepository } from "../../src/domain/air-credits/ports.js";
import type { ApiUser, ApiUserCredentialType, ApiUserRole, NewApiUser } from "../../src/domain/api-users/model.js";
import type { ApiUserListing, ApiUserRepository, ClientRefreshTokens } from "../../src/domain/api-users/ports.js";
import type { AuditEvent, RecordedAuditEvent } from "../../src/domain/audit/model.js";
import type { AuditFilter, AuditRepository, NumberedAuditEvent } from "../../src/domain/audit/ports.js";
import { systemClock, type Clock } from "../../src/domain/shared/clock.js";
import { tenantScope, type TenantScope } from "../../src/domain/shared/tenant-scope.js";
import type { Tx, UnitOfWork } from "../../src/domain/shared/unit-of-work.js";
import type { Company, NewUser, Tmc, User } from "../../src/domain/tenants/model.js";
import type { EmailLookupScope, TenantRepository, TmcWithUsage } from "../../src/domain/tenants/ports.js";
import type {
  BusinessInfo,
  FilterAttribute,
  ScimUser,
  ScimUserRecord,
  UserFilter,
  UserPage,
} from "../../src/domain/scim/model.js";
import type { ScimUserRepository } from "../../src/domain/scim/ports.js";
import type { ProfileChange, UserProfileRecord } from "../../src/domain/users/model.js";
import type { UserProfileRepository } from "../../src/domain/users/ports.js";
import type {
  BoundCredential,
  CredentialState,
  NewRefreshToken,
  NewSigningKey,
  RefreshTokenRecord,
  RevokedAccessToken,
  SigningKeyRecord,
  SubjectKind,
  TrustedIssuer,
} from "../../src/domain/tokens/model.js";
import type {
  CredentialChangeLog,
  NumberedChange,
  RefreshTokenRepository,
  RevokedTokenRepository,
  SigningKeyRepository,
  TrustedIssuerRepository,
} from "../../src/domain/tokens/ports.js";
import { DomainError, notFound } from "../../src/errors/domain-error.js";
import type { Repositories } from "../../src/store/postgres/repositories/index.js";
import { instrumented } from "./instrumented-repositories.js";

/*
 * An in-memory twin of the Postgres store (src/store/postgres): the same tables, the same
 * constraints the domain relies on (primary keys and unique keys → ALREADY_EXISTS, foreign keys
 * → NOT_FOUND, as KnexUnitOfWork's rethrowDbError words them), the same tenant scoping on every
 * scoped method, the same orderings, and Postgres' READ COMMITTED behaviour:
 *
 * - A transaction's writes go to its own overlay: it reads its own writes, nobody else sees them
 *   until it commits; when the work throws (or a commit failure is injected) the overlay is
 *   dropped, so nothing is half-written. `direct` statements commit at once (autocommit).
 * - Row locks: `lockTmc`, `lockActive`, `lockByHash` (SELECT ... FOR UPDATE) and every UPDATE,
 *   DELETE or INSERT take the row's lock until the transaction ends, so concurrent writers of one
 *   row queue up, and re-check their condition on the latest committed row, as Postgres does.
 * - A Tx used after its transaction ended throws, like Knex's "Transaction query already complete".
 * - Sequences (bigserial) are not transactional: a number handed out is never given back, so a
 *   rolled-back change leaves a gap, as in Postgres.
 * - Advisory locks (pg_advisory_xact_lock) are locks like the row locks: held until the
 *   transaction ends. The credential change log numbers under one, so credential changes commit
 *   one at a time, in number order.
 * - NOTIFY: a notification sent in a transaction is delivered to every listener when it commits,
 *   never when it rolls back; on `direct` at once. `listen` subscribes (the fake ChangeFeed does).
 * - Every repository call is recorded in `calls` ("apiUsers.credentialStates", ...) with its
 *   arguments in `invocations`; any of them can be made to fail with `failNext`, or held at a
 *   chosen point with `beforeNext` / `afterNext` (to land a concurrent change exactly there).
 */

// ---- rows ------------------------------------------------------------------------------------

interface TmcRow {
  readonly id: string;
  readonly name: string;
  readonly maxApiUsers: number;
}

interface CompanyRow {
  readonly id: string;
  readonly tmcId: string;
  readonly name: string;
}

interface UserRow {
  readonly id: string;
  readonly companyId: string;
  readonly tmcId: string;
  readonly email: string;
  readonly emailNormalized: string;
  readonly givenName: string;
  readonly familyName: string;
  readonly isActive: boolean;
  /** external_id (null until the IdP sets one). */
  readonly externalId?: string;
  /** display_name and name_formatted: SCIM's, as the IdP set them. */
  readonly displayName?: string;
  readonly formattedName?: string;
  /** The profile jsonb: the rest of the UserProfile document ({} when unset). */
  readonly profile?: Readonly<Record<string, unknown>>;
  readonly updatedAt?: Date;
  /** created_at (the clock at insert; SCIM pages by it). */
  readonly createdAt?: Date;
  /** scim_deleted_at: set by SCIM DELETE, the user is then invisible to SCIM. */
  readonly scimDeletedAt?: Date;
}

export interface ApiUserRow {
  readonly clientId: string;
  readonly tmcId: string;
  readonly orgId: string | undefined;
  readonly role: ApiUserRole;
  readonly credentialType: ApiUserCredentialType;
  readonly secretHash: Buffer;
  readonly credentialGeneration: number;
  readonly createdBy: string;
  /** Stands for created_at: strictly increasing, so the order is creation order. */
  readonly createdSeq: number;
  /** created_at as the clock read it at insert (listed to the operator; the order is createdSeq's). */
  readonly createdAt: Date;
  readonly rotatedAt: Date | undefined;
  readonly revokedAt: Date | undefined;
  /** change_seq: the credential_changes.seq of the last change to this credential (0 before any). */
  readonly changeSeq: number;
}

export interface AuditEventRow extends RecordedAuditEvent {
  readonly id: number;
  readonly details: Readonly<Record<string, string | number | boolean>>;
}

interface SigningKeyRow {
  readonly kid: string;
  readonly alg: string;
  readonly publicJwk: Record<string, unknown>;
  readonly privateJwkCiphertext: string;
  readonly createdSeq: number;
  readonly createdAt: Date;
  readonly activatesAt: Date;
  readonly retiredAt: Date | undefined;
  readonly notAfter: Date | undefined;
}

export interface RefreshTokenRow {
  readonly id: string;
  readonly tokenHash: Buffer;
  readonly familyId: string;
  readonly clientId: string;
  readonly tmcId: string;
  readonly subject: string;
  readonly subjectKind: SubjectKind;
  readonly scope: string;
  readonly audience: string;
  readonly boundCredentials: ReadonlyArray<[string, number]>;
  readonly act: Record<string, unknown>;
  readonly expiresAt: Date;
  readonly usedAt: Date | undefined;
  readonly revokedAt: Date | undefined;
}

interface TrustedIssuerRow {
  readonly tmcId: string;
  readonly issuer: string;
  readonly jwksUri: string | undefined;
  readonly jwks: { keys: unknown[] } | undefined;
  readonly audience: string | undefined;
  readonly companyId: string | undefined;
}

interface PaymentSourceRow extends NewPaymentSource {
  readonly id: string;
}

interface AirCreditRow extends NewAirCredit {
  readonly id: string;
  readonly status: "OPEN";
}

export interface CredentialChangeRow {
  /** bigserial: from a sequence that never goes back. */
  readonly seq: number;
  readonly clientId: string;
  /** now(): the transaction's time. */
  readonly changedAt: Date;
}

/** One table: committed rows by primary key. Writes go through MemoryDatabase, which keeps them per transaction. */
export class Table<K, V> {
  /** The committed rows (what a new statement on `direct` sees). */
  readonly rows = new Map<K, V>();
  constructor(
    readonly name: string,
    readonly keyOf: (row: V) => K,
  ) {}
  values(): V[] {
    return [...this.rows.values()];
  }
}

// ---- transactions ----------------------------------------------------------------------------

const DELETED = Symbol("deleted");
type AnyTable = Table<unknown, unknown>;

interface TxState {
  readonly id: number;
  readonly kind: "direct" | "transaction";
  open: boolean;
  /** Uncommitted writes, per table, by key. */
  readonly overlay: Map<AnyTable, Map<unknown, unknown>>;
  readonly writes: string[];
  readonly locks: string[];
  /** NOTIFY payloads sent in this transaction, delivered at commit. */
  readonly notifications: string[];
}

/** What one transaction did: the tables it wrote, in order, and whether it committed. */
export interface TransactionRecord {
  readonly id: number;
  readonly outcome: "committed" | "rolled back";
  readonly writes: readonly string[];
}

interface HeldLock {
  readonly owner: TxState;
  readonly released: Promise<void>;
  readonly release: () => void;
}

/** The error Postgres raises for a foreign key that points nowhere, as rethrowDbError words it. */
const foreignKeyViolation = () => new DomainError("NOT_FOUND", "A referenced resource does not exist");
/** The error Postgres raises for a duplicate primary or unique key, as rethrowDbError words it. */
const uniqueViolation = (message = "The resource already exists") => new DomainError("ALREADY_EXISTS", message);

export class MemoryDatabase {
  readonly tmcs = new Table<string, TmcRow>("tmcs", (r) => r.id);
  readonly companies = new Table<string, CompanyRow>("companies", (r) => r.id);
  readonly users = new Table<string, UserRow>("users", (r) => r.id);
  readonly apiUsers = new Table<string, ApiUserRow>("api_users", (r) => r.clientId);
  readonly auditEvents = new Table<number, AuditEventRow>("audit_events", (r) => r.id);
  readonly signingKeys = new Table<string, SigningKeyRow>("signing_keys", (r) => r.kid);
  readonly refreshTokens = new Table<string, RefreshTokenRow>("refresh_tokens", (r) => r.id);
  readonly trustedIssuers = new Table<string, TrustedIssuerRow>("trusted_issuers", (r) => issuerKey(r.tmcId, r.issuer));
  readonly paymentSources = new Table<string, PaymentSourceRow>("payment_sources", (r) => r.id);
  readonly airCredits = new Table<string, AirCreditRow>("air_credits", (r) => r.id);
  /** The v3 credits (air_credits' v3 columns), one per (company, ticket number). */
  readonly unusedCredits = new Table<string, UnusedCredit>("air_credits_v3", (r) => `${r.companyId}:${r.ticketNumber}`);
  readonly credentialChanges = new Table<number, CredentialChangeRow>("credential_changes", (r) => r.seq);
  readonly revokedAccessTokens = new Table<string, RevokedAccessTokenRow>("revoked_access_tokens", (r) => r.jti);

  /** Every transaction that ended, in order. */
  readonly transactions: TransactionRecord[] = [];
  /** Tables written through `direct` (autocommit), in order. */
  readonly directWrites: string[] = [];
  /** Every repository call, as "<repository>.<method>". */
  readonly calls: string[] = [];
  /** Every repository call with its arguments (the Tx included), in order. */
  readonly invocations: Array<{ readonly method: string; readonly args: readonly unknown[] }> = [];
  /** Every NOTIFY payload delivered to the listeners, in delivery order. */
  readonly notified: string[] = [];

  readonly direct: Tx;
  private readonly states = new WeakMap<object, TxState>();
  private readonly locks = new Map<string, HeldLock>();
  private readonly commitFailures: unknown[] = [];
  private readonly listeners = new Set<(payload: string) => void>();
  private txCounter = 0;
  private sequence = 0;
  private auditSequence = 0;
  private changeSequence = 0;

  constructor(readonly clock: Clock = systemClock) {
    this.direct = this.newTx("direct");
  }

  /** Runs `work` in one transaction: all of it commits, or none of it. */
  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    const tx = this.newTx("transaction");
    const state = this.states.get(tx as object)!;
    try {
      const result = await work(tx);
      const injected = this.commitFailures.shift();
      if (injected !== undefined) throw injected;
      this.end(state, "committed");
      return result;
    } catch (error) {
      if (state.open) this.end(state, "rolled back");
      throw error;
    }
  }

  /** The next transaction to reach its commit fails with `error` instead (and rolls back). */
  failNextCommit(error: unknown): void {
    this.commitFailures.push(error);
  }

  /** Validates a Tx: it must be this database's and still open. */
  use(tx: Tx): TxState {
    const state = this.states.get(tx as object);
    if (!state) throw new Error("in-memory store: not a Tx of this database");
    if (!state.open)
      throw new Error("in-memory store: Transaction query already complete (Tx used after its transaction ended)");
    return state;
  }

  /** The rows a statement on `tx` sees: committed ones, plus (in a transaction) its own writes. */
  read<K, V>(tx: Tx, table: Table<K, V>): V[] {
    const overlay = this.use(tx).overlay.get(table as AnyTable);
    if (!overlay) return table.values();
    const merged = new Map<K, V>(table.rows);
    for (const [key, value] of overlay) {
      if (value === DELETED) merged.delete(key as K);
      else merged.set(key as K, value as V);
    }
    return [...merged.values()];
  }

  /** One row by primary key, as `tx` sees it. */
  get<K, V>(tx: Tx, table: Table<K, V>, key: K): V | undefined {
    const overlay = this.use(tx).overlay.get(table as AnyTable);
    if (overlay?.has(key)) {
      const value = overlay.get(key);
      return value === DELETED ? undefined : (value as V);
    }
    return table.rows.get(key);
  }

  /**
   * SELECT ... FOR UPDATE (and the implicit lock of UPDATE, DELETE and INSERT): waits while another
   * transaction holds the lock, then holds it until this transaction ends. On `direct`
   * (autocommit) it only waits.
   */
  async lock(tx: Tx, lockKey: string): Promise<void> {
    const state = this.use(tx);
    for (;;) {
      const held = this.locks.get(lockKey);
      if (!held || held.owner === state) break;
      await held.released;
    }
    this.use(tx);
    if (state.kind === "transaction" && this.locks.get(lockKey)?.owner !== state) {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      this.locks.set(lockKey, { owner: state, released, release });
      state.locks.push(lockKey);
    }
  }

  /** The keys of the locks transactions hold now (row and advisory locks). */
  heldLocks(): string[] {
    return [...this.locks.keys()];
  }

  /** The lock of one row. */
  rowLock<K, V>(table: Table<K, V>, key: K): string {
    return `${table.name}:${String(key)}`;
  }

  /** Sets (or with `undefined`, deletes) a row: at once on `direct`, at commit in a transaction. Callers hold the row's lock. */
  write<K, V>(tx: Tx, table: Table<K, V>, key: K, value: V | undefined): void {
    const state = this.use(tx);
    const frozen = value === undefined ? undefined : Object.freeze(value);
    if (state.kind === "direct") {
      if (frozen === undefined) table.rows.delete(key);
      else table.rows.set(key, frozen);
      this.directWrites.push(table.name);
      return;
    }
    let overlay = state.overlay.get(table as AnyTable);
    if (!overlay) state.overlay.set(table as AnyTable, (overlay = new Map()));
    overlay.set(key, frozen === undefined ? DELETED : frozen);
    state.writes.push(table.name);
  }

  /**
   * UPDATE ... WHERE under READ COMMITTED: the rows `where` matches now are locked one by one and,
   * once locked, re-checked on their latest version; `change` applies to those still matching.
   */
  async update<K, V>(tx: Tx, table: Table<K, V>, where: (row: V) => boolean, change: (row: V) => V): Promise<number> {
    let updated = 0;
    for (const candidate of this.read(tx, table).filter(where)) {
      const key = table.keyOf(candidate);
      await this.lock(tx, this.rowLock(table, key));
      const latest = this.get(tx, table, key);
      if (latest !== undefined && where(latest)) {
        this.write(tx, table, key, change(latest));
        updated += 1;
      }
    }
    return updated;
  }

  /** INSERT: waits for any transaction inserting the same primary key, then fails if it exists. */
  async insert<K, V>(tx: Tx, table: Table<K, V>, row: V): Promise<void> {
    const key = table.keyOf(row);
    await this.lock(tx, this.rowLock(table, key));
    if (this.get(tx, table, key) !== undefined) throw uniqueViolation();
    this.write(tx, table, key, row);
  }

  /** created_at stand-in. */
  nextSequence(): number {
    return ++this.sequence;
  }

  nextAuditId(): number {
    return ++this.auditSequence;
  }

  /** nextval of credential_changes_seq_seq: not transactional, never given back. */
  nextChangeSeq(): number {
    return ++this.changeSequence;
  }

  /** pg_notify: delivered when `tx` commits (at once on `direct`), never if it rolls back. */
  notify(tx: Tx, payload: string): void {
    const state = this.use(tx);
    if (state.kind === "direct") this.deliver([payload]);
    else state.notifications.push(payload);
  }

  /** LISTEN: `listener` gets every notification delivered from now on. Returns UNLISTEN. */
  listen(listener: (payload: string) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** Transactions that committed, with the tables each wrote. */
  committed(): TransactionRecord[] {
    return this.transactions.filter((t) => t.outcome === "committed");
  }

  rolledBack(): TransactionRecord[] {
    return this.transactions.filter((t) => t.outcome === "rolled back");
  }

  private newTx(kind: TxState["kind"]): Tx {
    const id = kind === "direct" ? 0 : ++this.txCounter;
    const handle = Object.freeze({ inMemoryTx: id }) as unknown as Tx;
    this.states.set(handle as object, {
      id,
      kind,
      open: true,
      overlay: new Map(),
      writes: [],
      locks: [],
      notifications: [],
    });
    return handle;
  }

  private end(state: TxState, outcome: TransactionRecord["outcome"]): void {
    if (outcome === "committed") {
      for (const [table, overlay] of state.overlay) {
        for (const [key, value] of overlay) {
          if (value === DELETED) table.rows.delete(key);
          else table.rows.set(key, value);
        }
      }
    }
    state.overlay.clear();
    state.open = false;
    this.transactions.push({ id: state.id, outcome, writes: [...state.writes] });
    for (const key of state.locks) {
      const held = this.locks.get(key);
      if (held?.owner === state) {
        this.locks.delete(key);
        held.release();
      }
    }
    // Postgres delivers a transaction's notifications once it has committed, and drops them otherwise.
    const notifications = state.notifications.splice(0);
    if (outcome === "committed") this.deliver(notifications);
  }

  private deliver(payloads: readonly string[]): void {
    for (const payload of payloads) {
      this.notified.push(payload);
      for (const listener of [...this.listeners]) listener(payload);
    }
  }
}

/** The domain's UnitOfWork over a MemoryDatabase. */
export class InMemoryUnitOfWork implements UnitOfWork {
  constructor(private readonly db: MemoryDatabase) {}

  get direct(): Tx {
    return this.db.direct;
  }

  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }
}

// ---- repositories ----------------------------------------------------------------------------

export class InMemoryTenantRepository implements TenantRepository {
  constructor(private readonly db: MemoryDatabase) {}

  async createTmc(tx: Tx, name: string, maxApiUsers: number): Promise<Tmc> {
    checkMaxApiUsers(maxApiUsers);
    const row: TmcRow = { id: crypto.randomUUID(), name, maxApiUsers };
    await this.db.insert(tx, this.db.tmcs, row);
    return toTmc(row);
  }

  async listTmcs(tx: Tx, page: { limit: number; offset: number }): Promise<{ tmcs: TmcWithUsage[]; total: number }> {
    const apiUsers = this.db.read(tx, this.db.apiUsers);
    const all = this.db.read(tx, this.db.tmcs).sort((a, b) => compareText(a.name, b.name) || compareText(a.id, b.id));
    return {
      tmcs: all
        .slice(page.offset, page.offset + page.limit)
        .map((r) => ({ ...toTmc(r), activeApiUsers: apiUsers.filter(activeOf(tenantScope(r.id))).length })),
      total: all.length,
    };
  }

  async findTmc(tx: Tx, scope: TenantScope): Promise<Tmc | undefined> {
    const row = this.db.get(tx, this.db.tmcs, scope.tmcId);
    return row && toTmc(row);
  }

  async lockTmc(tx: Tx, scope: TenantScope): Promise<Tmc | undefined> {
    if (!this.db.get(tx, this.db.tmcs, scope.tmcId)) return undefined;
    await this.db.lock(tx, this.db.rowLock(this.db.tmcs, scope.tmcId));
    const row = this.db.get(tx, this.db.tmcs, scope.tmcId);
    return row && toTmc(row);
  }

  async setApiUserLimit(tx: Tx, scope: TenantScope, maxApiUsers: number): Promise<Tmc | undefined> {
    checkMaxApiUsers(maxApiUsers);
    await this.db.update(
      tx,
      this.db.tmcs,
      (r) => r.id === scope.tmcId,
      (r) => ({ ...r, maxApiUsers }),
    );
    const row = this.db.get(tx, this.db.tmcs, scope.tmcId);
    return row && toTmc(row);
  }

  async createCompany(tx: Tx, scope: TenantScope, name: string): Promise<Company> {
    if (!this.db.get(tx, this.db.tmcs, scope.tmcId)) throw foreignKeyViolation();
    const row: CompanyRow = { id: crypto.randomUUID(), tmcId: scope.tmcId, name };
    await this.db.insert(tx, this.db.companies, row);
    return { ...row };
  }

  async findCompany(tx: Tx, scope: TenantScope, companyId: string): Promise<Company | undefined> {
    const row = this.db.get(tx, this.db.companies, companyId);
    return row && row.tmcId === scope.tmcId ? { ...row } : undefined;
  }

  async tenantOfCompany(tx: Tx, companyId: string): Promise<TenantScope | undefined> {
    const row = this.db.get(tx, this.db.companies, companyId);
    return row && tenantScope(row.tmcId);
  }

  async createUser(tx: Tx, scope: TenantScope, companyId: string, user: NewUser): Promise<User> {
    const company = this.db.get(tx, this.db.companies, companyId);
    if (!company || company.tmcId !== scope.tmcId) throw notFound("Company", [{ name: "orgId", value: companyId }]);
    const emailNormalized = user.email.toLowerCase();
    // The unique index users_company_email_unique: a concurrent insert of the same key is waited for.
    await this.db.lock(tx, `users_company_email_unique:${companyId}:${emailNormalized}`);
    if (
      this.db
        .read(tx, this.db.users)
        .some((u) => u.companyId === companyId && u.emailNormalized === emailNormalized && !u.scimDeletedAt)
    ) {
      throw uniqueViolation("A user with this email already exists in the company");
    }
    const row: UserRow = {
      id: crypto.randomUUID(),
      companyId,
      tmcId: scope.tmcId,
      email: user.email,
      emailNormalized,
      givenName: user.givenName,
      familyName: user.familyName,
      isActive: user.isActive,
      createdAt: this.db.clock(),
      updatedAt: this.db.clock(),
    };
    await this.db.insert(tx, this.db.users, row);
    return toUser(row);
  }

  async findActiveUserByEmail(
    tx: Tx,
    scope: TenantScope,
    email: string,
    within: EmailLookupScope = {},
  ): Promise<User | undefined> {
    const normalized = email.toLowerCase();
    const rows = this.db
      .read(tx, this.db.users)
      .filter(
        (u) =>
          u.tmcId === scope.tmcId &&
          u.emailNormalized === normalized &&
          u.isActive &&
          (within.companyId === undefined || u.companyId === within.companyId),
      );
    const found = rows.length > 1 && within.subject ? rows.filter((u) => u.externalId === within.subject) : rows;
    if (found.length > 1 || (found.length === 0 && rows.length > 1)) {
      throw new DomainError(
        "INVALID_GRANT",
        "The subject_token's email names more than one active user of the TMC, and not one whose externalId is the token's subject",
        {
          params: [{ name: "subject_token", value: "ambiguous email" }],
        },
      );
    }
    return found[0] && toUser(found[0]);
  }

  async findActiveUser(tx: Tx, scope: TenantScope, userId: string): Promise<User | undefined> {
    const row = this.db.read(tx, this.db.users).find((u) => u.tmcId === scope.tmcId && u.id === userId && u.isActive);
    return row && toUser(row);
  }
}

/** users as PostgresUserRepository reads and writes them: joined with the company's and TMC's names, scoped to the TMC. */
export class InMemoryUserRepository implements UserProfileRepository {
  constructor(private readonly db: MemoryDatabase) {}

  async find(tx: Tx, scope: TenantScope, userId: string): Promise<UserProfileRecord | undefined> {
    const row = this.db.get(tx, this.db.users, userId);
    return row && row.tmcId === scope.tmcId ? this.toRecord(tx, row) : undefined;
  }

  async lock(tx: Tx, scope: TenantScope, userId: string): Promise<UserProfileRecord | undefined> {
    if (this.db.get(tx, this.db.users, userId)?.tmcId !== scope.tmcId) return undefined;
    await this.db.lock(tx, this.db.rowLock(this.db.users, userId));
    return this.find(tx, scope, userId);
  }

  async update(tx: Tx, scope: TenantScope, userId: string, change: ProfileChange): Promise<void> {
    await this.db.update(
      tx,
      this.db.users,
      (r) => r.tmcId === scope.tmcId && r.id === userId,
      (r) => ({
        ...r,
        givenName: change.givenName,
        familyName: change.familyName,
        profile: jsonCopy(change.profile),
        updatedAt: this.db.clock(),
      }),
    );
  }

  private toRecord(tx: Tx, row: UserRow): UserProfileRecord {
    return {
      id: row.id,
      tmcId: row.tmcId,
      tmcName: this.db.get(tx, this.db.tmcs, row.tmcId)!.name,
      companyId: row.companyId,
      companyName: this.db.get(tx, this.db.companies, row.companyId)!.name,
      email: row.email,
      givenName: row.givenName,
      familyName: row.familyName,
      isActive: row.isActive,
      externalId: row.externalId,
      profile: jsonCopy(row.profile ?? {}) as Record<string, unknown>,
    };
  }
}

/** users as PostgresScimUserRepository sees them: one company of one TMC, without SCIM-deleted rows; filters evaluated in memory. */
export class InMemoryScimUserRepository implements ScimUserRepository {
  constructor(private readonly db: MemoryDatabase) {}

  private visible(tx: Tx, scope: TenantScope, companyId: string): UserRow[] {
    return this.db
      .read(tx, this.db.users)
      .filter((u) => u.tmcId === scope.tmcId && u.companyId === companyId && !u.scimDeletedAt);
  }

  async list(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    filter: UserFilter | undefined,
    page: UserPage,
  ): Promise<{ users: ScimUser[]; total: number }> {
    const matching = this.visible(tx, scope, companyId)
      .filter((u) => !filter || matchesScimFilter(u, filter))
      .sort((a, b) => (a.createdAt?.getTime() ?? 0) - (b.createdAt?.getTime() ?? 0) || a.id.localeCompare(b.id));
    return {
      users: matching.slice(page.startIndex - 1, page.startIndex - 1 + page.count).map(toScimUser),
      total: matching.length,
    };
  }

  async find(tx: Tx, scope: TenantScope, companyId: string, userId: string): Promise<ScimUser | undefined> {
    const row = this.visible(tx, scope, companyId).find((u) => u.id === userId);
    return row && toScimUser(row);
  }

  async lock(tx: Tx, scope: TenantScope, companyId: string, userId: string): Promise<ScimUser | undefined> {
    if (!this.visible(tx, scope, companyId).some((u) => u.id === userId)) return undefined;
    await this.db.lock(tx, this.db.rowLock(this.db.users, userId));
    return this.find(tx, scope, companyId, userId);
  }

  async insert(tx: Tx, scope: TenantScope, companyId: string, user: ScimUserRecord): Promise<ScimUser> {
    const company = this.db.get(tx, this.db.companies, companyId);
    if (!company || company.tmcId !== scope.tmcId) throw notFound("Company", [{ name: "orgId", value: companyId }]);
    await this.checkUnique(tx, scope, companyId, undefined, user);
    const now = this.db.clock();
    const row: UserRow = {
      id: crypto.randomUUID(),
      companyId,
      tmcId: scope.tmcId,
      ...scimColumns(user, {}),
      createdAt: now,
      updatedAt: now,
    };
    await this.db.insert(tx, this.db.users, row);
    return toScimUser(row);
  }

  async update(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    userId: string,
    user: ScimUserRecord,
  ): Promise<ScimUser | undefined> {
    if (!this.visible(tx, scope, companyId).some((u) => u.id === userId)) return undefined;
    await this.checkUnique(tx, scope, companyId, userId, user);
    await this.db.update(
      tx,
      this.db.users,
      (r) => r.id === userId,
      (r) => ({ ...r, ...scimColumns(user, r.profile ?? {}), updatedAt: this.db.clock() }),
    );
    return this.find(tx, scope, companyId, userId);
  }

  async markDeleted(tx: Tx, scope: TenantScope, companyId: string, userId: string): Promise<boolean> {
    if (!this.visible(tx, scope, companyId).some((u) => u.id === userId)) return false;
    const now = this.db.clock();
    await this.db.update(
      tx,
      this.db.users,
      (r) => r.id === userId,
      (r) => ({ ...r, isActive: false, scimDeletedAt: now, updatedAt: now }),
    );
    return true;
  }

  /** The partial unique indexes users_company_email_unique and users_company_external_id_unique. */
  private async checkUnique(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    userId: string | undefined,
    user: ScimUserRecord,
  ): Promise<void> {
    const emailNormalized = user.userName.toLowerCase();
    await this.db.lock(tx, `users_company_email_unique:${companyId}:${emailNormalized}`);
    const others = this.visible(tx, scope, companyId).filter((u) => u.id !== userId);
    if (others.some((u) => u.emailNormalized === emailNormalized))
      throw uniqueViolation("A user with this userName exists in the company");
    if (user.externalId !== undefined && others.some((u) => u.externalId === user.externalId))
      throw uniqueViolation("A user with this externalId exists in the company");
  }
}

/** As PostgresScimUserRepository writes: the columns, and profile.businessInfo only when given. */
function scimColumns(user: ScimUserRecord, profile: Readonly<Record<string, unknown>>) {
  return {
    email: user.userName,
    emailNormalized: user.userName.toLowerCase(),
    givenName: user.givenName,
    familyName: user.familyName,
    displayName: user.displayName,
    formattedName: user.formattedName,
    isActive: user.active,
    externalId: user.externalId,
    profile:
      user.businessInfo !== undefined ? { ...profile, businessInfo: structuredClone(user.businessInfo) } : profile,
  };
}

function toScimUser(row: UserRow): ScimUser {
  return {
    id: row.id,
    companyId: row.companyId,
    tmcId: row.tmcId,
    userName: row.email,
    givenName: row.givenName,
    familyName: row.familyName,
    formattedName: row.formattedName,
    displayName: row.displayName,
    active: row.isActive,
    externalId: row.externalId,
    businessInfo: businessInfoOf(row.profile?.businessInfo),
    created: row.createdAt ?? new Date(0),
    lastModified: row.updatedAt ?? row.createdAt ?? new Date(0),
  };
}

function businessInfoOf(value: unknown): BusinessInfo {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? structuredClone(value as BusinessInfo)
    : {};
}

/** A UserFilter evaluated on a row, as PostgresScimUserRepository's SQL does. */
function matchesScimFilter(row: UserRow, filter: UserFilter): boolean {
  switch (filter.kind) {
    case "and":
      return filter.filters.every((f) => matchesScimFilter(row, f));
    case "or":
      return filter.filters.some((f) => matchesScimFilter(row, f));
    case "not":
      return !matchesScimFilter(row, filter.filter);
    case "constant":
      return filter.value;
    case "present": {
      const value = scimValueOf(row, filter.attribute);
      return value !== undefined && value !== "";
    }
    case "compare": {
      const actual = scimValueOf(row, filter.attribute);
      if (filter.op === "ne") return actual === undefined || !sameScimValue(actual, filter.value);
      if (actual === undefined) return false;
      const expected = filter.value;
      switch (filter.op) {
        case "eq":
          return sameScimValue(actual, expected);
        case "co":
          return String(actual).includes(String(expected));
        case "sw":
          return String(actual).startsWith(String(expected));
        case "ew":
          return String(actual).endsWith(String(expected));
        default: {
          const [a, b] = [
            actual instanceof Date ? actual.getTime() : actual,
            expected instanceof Date ? expected.getTime() : expected,
          ];
          return filter.op === "gt" ? a > b : filter.op === "ge" ? a >= b : filter.op === "lt" ? a < b : a <= b;
        }
      }
    }
  }
}

function sameScimValue(a: string | boolean | Date, b: string | boolean | Date): boolean {
  return a instanceof Date && b instanceof Date ? a.getTime() === b.getTime() : a === b;
}

function scimValueOf(row: UserRow, attribute: FilterAttribute): string | boolean | Date | undefined {
  switch (attribute) {
    case "id":
      return row.id;
    case "userName":
      return row.emailNormalized;
    case "externalId":
      return row.externalId;
    case "givenName":
      return row.givenName.toLowerCase();
    case "familyName":
      return row.familyName.toLowerCase();
    case "displayName":
      return row.displayName?.toLowerCase();
    case "active":
      return row.isActive;
    case "created":
      return row.createdAt;
    case "lastModified":
      return row.updatedAt ?? row.createdAt;
  }
}

export class InMemoryApiUserRepository implements ApiUserRepository {
  constructor(private readonly db: MemoryDatabase) {}

  async insert(tx: Tx, scope: TenantScope, user: NewApiUser): Promise<void> {
    if (!this.db.get(tx, this.db.tmcs, scope.tmcId)) throw foreignKeyViolation();
    // The foreign key names any company; that it is the tenant's is the domain's check.
    if (user.orgId !== undefined && !this.db.get(tx, this.db.companies, user.orgId)) throw foreignKeyViolation();
    await this.db.insert(tx, this.db.apiUsers, {
      clientId: user.clientId,
      tmcId: scope.tmcId,
      orgId: user.orgId,
      role: user.role,
      credentialType: user.credentialType,
      secretHash: Buffer.from(user.secretHash),
      credentialGeneration: 1,
      createdBy: user.createdBy,
      createdSeq: this.db.nextSequence(),
      createdAt: this.db.clock(),
      rotatedAt: undefined,
      revokedAt: undefined,
      changeSeq: 0,
    });
  }

  async countActive(tx: Tx, scope: TenantScope): Promise<number> {
    return this.db.read(tx, this.db.apiUsers).filter(activeOf(scope)).length;
  }

  async listActive(tx: Tx, scope: TenantScope, page: { limit: number; offset: number }): Promise<string[]> {
    return this.db
      .read(tx, this.db.apiUsers)
      .filter(activeOf(scope))
      .sort((a, b) => a.createdSeq - b.createdSeq || compareText(a.clientId, b.clientId))
      .slice(page.offset, page.offset + page.limit)
      .map((r) => r.clientId);
  }

  async listActiveDetails(
    tx: Tx,
    scope: TenantScope,
    page: { limit: number; offset: number },
  ): Promise<ApiUserListing[]> {
    return this.db
      .read(tx, this.db.apiUsers)
      .filter(activeOf(scope))
      .sort((a, b) => a.createdSeq - b.createdSeq || compareText(a.clientId, b.clientId))
      .slice(page.offset, page.offset + page.limit)
      .map((r) => ({
        clientId: r.clientId,
        orgId: r.orgId,
        role: r.role,
        credentialType: r.credentialType,
        createdAt: new Date(r.createdAt),
        createdBy: r.createdBy,
        rotatedAt: r.rotatedAt && new Date(r.rotatedAt),
      }));
  }

  async lockActive(tx: Tx, scope: TenantScope, clientId: string): Promise<ApiUser | undefined> {
    const isActive = activeOf(scope, clientId);
    const seen = this.db.get(tx, this.db.apiUsers, clientId);
    if (!seen || !isActive(seen)) return undefined;
    await this.db.lock(tx, this.db.rowLock(this.db.apiUsers, clientId));
    // As after a lock wait in Postgres: the latest version is re-checked against the condition.
    const row = this.db.get(tx, this.db.apiUsers, clientId);
    return row && isActive(row) ? toApiUser(row) : undefined;
  }

  async setCredential(
    tx: Tx,
    scope: TenantScope,
    clientId: string,
    credential: { secretHash: Buffer; generation: number },
  ): Promise<void> {
    const now = this.db.clock();
    await this.db.update(tx, this.db.apiUsers, activeOf(scope, clientId), (r) => ({
      ...r,
      secretHash: Buffer.from(credential.secretHash),
      credentialGeneration: credential.generation,
      rotatedAt: now,
    }));
  }

  async markRevoked(tx: Tx, scope: TenantScope, clientId: string): Promise<void> {
    const now = this.db.clock();
    await this.db.update(tx, this.db.apiUsers, activeOf(scope, clientId), (r) => ({ ...r, revokedAt: now }));
  }

  async findActive(tx: Tx, clientId: string): Promise<ApiUser | undefined> {
    const row = this.db.get(tx, this.db.apiUsers, clientId);
    return row && !row.revokedAt ? toApiUser(row) : undefined;
  }

  async credentialStates(tx: Tx, clientIds: readonly string[]): Promise<Map<string, CredentialState>> {
    const wanted = new Set(clientIds);
    return new Map(
      this.db
        .read(tx, this.db.apiUsers)
        .filter((r) => wanted.has(r.clientId))
        .map((r) => [
          r.clientId,
          { generation: r.revokedAt ? undefined : r.credentialGeneration, changeSeq: r.changeSeq },
        ]),
    );
  }
}

export class InMemoryAuditRepository implements AuditRepository {
  constructor(private readonly db: MemoryDatabase) {}

  async append(tx: Tx, events: readonly AuditEvent[]): Promise<void> {
    this.db.use(tx);
    for (const e of events) {
      const id = this.db.nextAuditId();
      this.db.write(tx, this.db.auditEvents, id, {
        id,
        occurredAt: e.occurredAt ?? this.db.clock(),
        action: e.action,
        outcome: e.outcome,
        actor: e.actor,
        tmcId: e.tmcId,
        targetClientId: e.targetClientId,
        debugIdentifier: e.debugIdentifier,
        details: { ...(e.details ?? {}) },
      });
    }
  }

  async list(tx: Tx, scope: TenantScope, limit: number): Promise<RecordedAuditEvent[]> {
    return this.db
      .read(tx, this.db.auditEvents)
      .filter((r) => r.tmcId === scope.tmcId)
      .sort((a, b) => b.id - a.id)
      .slice(0, limit)
      .map(({ id: _id, ...event }) => ({ ...event, details: { ...event.details } }));
  }

  async search(tx: Tx, scope: TenantScope, filter: AuditFilter, limit: number): Promise<NumberedAuditEvent[]> {
    const time = (d: Date | undefined) => d?.getTime();
    return this.db
      .read(tx, this.db.auditEvents)
      .filter((r) => r.tmcId === scope.tmcId)
      .filter((r) => filter.actions.length === 0 || filter.actions.includes(r.action))
      .filter(
        (r) => filter.clientId === undefined || r.actor === filter.clientId || r.targetClientId === filter.clientId,
      )
      .filter((r) => filter.since === undefined || r.occurredAt.getTime() >= time(filter.since)!)
      .filter((r) => filter.until === undefined || r.occurredAt.getTime() < time(filter.until)!)
      .filter((r) => filter.beforeId === undefined || r.id < Number(filter.beforeId))
      .sort((a, b) => b.id - a.id)
      .slice(0, limit)
      .map(({ id, ...event }) => ({ ...event, id: String(id), details: { ...event.details } }));
  }

  async lastTokenIssued(tx: Tx, scope: TenantScope, clientIds: readonly string[]): Promise<Map<string, Date>> {
    const wanted = new Set(clientIds);
    const last = new Map<string, Date>();
    for (const r of this.db.read(tx, this.db.auditEvents)) {
      if (
        r.tmcId !== scope.tmcId ||
        r.action !== "TOKEN_ISSUED" ||
        r.targetClientId === null ||
        !wanted.has(r.targetClientId)
      )
        continue;
      const seen = last.get(r.targetClientId);
      if (!seen || seen.getTime() < r.occurredAt.getTime()) last.set(r.targetClientId, new Date(r.occurredAt));
    }
    return last;
  }
}

export class InMemorySigningKeyRepository implements SigningKeyRepository {
  /** The key of the advisory lock (PostgresSigningKeyRepository's ROTATION_LOCK_KEY). */
  static readonly ROTATION_LOCK = "pg_advisory_xact_lock:727501115";
  /** The NOTIFY payload of a signing-key change (FakeChangeFeed tells it from a change number). */
  static readonly CHANGE_PAYLOAD = "signing-keys";

  constructor(private readonly db: MemoryDatabase) {}

  async listPublished(tx: Tx, now: Date): Promise<SigningKeyRecord[]> {
    return this.db
      .read(tx, this.db.signingKeys)
      .filter((r) => r.notAfter === undefined || r.notAfter.getTime() > now.getTime())
      .sort(
        (a, b) =>
          b.activatesAt.getTime() - a.activatesAt.getTime() ||
          b.createdAt.getTime() - a.createdAt.getTime() ||
          compareText(b.kid, a.kid),
      )
      .map((r) => ({
        kid: r.kid,
        alg: r.alg,
        publicJwk: { ...r.publicJwk },
        privateJwkCiphertext: r.privateJwkCiphertext,
        createdAt: new Date(r.createdAt),
        activatesAt: new Date(r.activatesAt),
        retiredAt: r.retiredAt && new Date(r.retiredAt),
        notAfter: r.notAfter && new Date(r.notAfter),
      }));
  }

  async lockForRotation(tx: Tx): Promise<void> {
    await this.db.lock(tx, InMemorySigningKeyRepository.ROTATION_LOCK);
  }

  async insert(tx: Tx, key: NewSigningKey): Promise<void> {
    await this.db.insert(tx, this.db.signingKeys, {
      kid: key.kid,
      alg: key.alg,
      publicJwk: jsonCopy(key.publicJwk),
      privateJwkCiphertext: key.privateJwkCiphertext,
      createdSeq: this.db.nextSequence(),
      createdAt: new Date(key.createdAt),
      activatesAt: new Date(key.activatesAt),
      retiredAt: undefined,
      notAfter: undefined,
    });
  }

  async retireAll(
    tx: Tx,
    retiredAt: Date,
    notAfter: Date,
    options: { readonly except: string; readonly withdraw: boolean },
  ): Promise<void> {
    await this.db.update(
      tx,
      this.db.signingKeys,
      (r) => r.retiredAt === undefined && r.kid !== options.except,
      (r) => ({ ...r, retiredAt, notAfter }),
    );
    if (options.withdraw) {
      await this.db.update(
        tx,
        this.db.signingKeys,
        (r) => r.kid !== options.except && (r.notAfter === undefined || r.notAfter.getTime() > notAfter.getTime()),
        (r) => ({ ...r, notAfter }),
      );
    }
  }

  async announceChange(tx: Tx): Promise<void> {
    this.db.use(tx);
    this.db.notify(tx, InMemorySigningKeyRepository.CHANGE_PAYLOAD);
  }
}

interface RevokedAccessTokenRow {
  readonly jti: string;
  readonly clientId: string;
  readonly tmcId: string;
  readonly expiresAt: Date;
  readonly changeSeq: number;
}

export class InMemoryRevokedTokenRepository implements RevokedTokenRepository {
  constructor(private readonly db: MemoryDatabase) {}

  async insert(tx: Tx, scope: TenantScope, token: RevokedAccessToken): Promise<boolean> {
    if (this.db.get(tx, this.db.revokedAccessTokens, token.jti)) return false;
    await this.db.insert(tx, this.db.revokedAccessTokens, {
      jti: token.jti,
      clientId: token.clientId,
      tmcId: scope.tmcId,
      expiresAt: token.expiresAt,
      changeSeq: 0,
    });
    return true;
  }

  async revocations(tx: Tx, jtis: readonly string[]): Promise<Map<string, { changeSeq: number; expiresAt: Date }>> {
    const wanted = new Set(jtis);
    return new Map(
      this.db
        .read(tx, this.db.revokedAccessTokens)
        .filter((r) => wanted.has(r.jti))
        .map((r) => [r.jti, { changeSeq: r.changeSeq, expiresAt: r.expiresAt }]),
    );
  }
}

export class InMemoryRefreshTokenRepository implements RefreshTokenRepository, ClientRefreshTokens {
  constructor(private readonly db: MemoryDatabase) {}

  async insert(tx: Tx, scope: TenantScope, token: NewRefreshToken): Promise<void> {
    if (!this.db.get(tx, this.db.apiUsers, token.clientId)) throw foreignKeyViolation();
    // The unique index refresh_tokens_hash_unique.
    await this.db.lock(tx, `refresh_tokens_hash_unique:${token.tokenHash.toString("hex")}`);
    if (this.db.read(tx, this.db.refreshTokens).some((r) => r.tokenHash.equals(token.tokenHash)))
      throw uniqueViolation();
    await this.db.insert(tx, this.db.refreshTokens, {
      id: token.id,
      tokenHash: Buffer.from(token.tokenHash),
      familyId: token.familyId,
      clientId: token.clientId,
      tmcId: scope.tmcId,
      subject: token.subject,
      subjectKind: token.subjectKind,
      scope: token.scope,
      audience: token.audience,
      boundCredentials: jsonCopy(token.boundCredentials) as Array<[string, number]>,
      act: jsonCopy(token.act) as Record<string, unknown>,
      expiresAt: new Date(token.expiresAt),
      usedAt: undefined,
      revokedAt: undefined,
    });
  }

  async lockByHash(tx: Tx, scope: TenantScope, tokenHash: Buffer): Promise<RefreshTokenRecord | undefined> {
    const found = this.db
      .read(tx, this.db.refreshTokens)
      .find((r) => r.tmcId === scope.tmcId && r.tokenHash.equals(tokenHash));
    if (!found) return undefined;
    await this.db.lock(tx, this.db.rowLock(this.db.refreshTokens, found.id));
    const row = this.db.get(tx, this.db.refreshTokens, found.id);
    return row && row.tmcId === scope.tmcId ? toRefreshRecord(row) : undefined;
  }

  async markUsed(tx: Tx, scope: TenantScope, id: string, now: Date): Promise<void> {
    await this.db.update(
      tx,
      this.db.refreshTokens,
      (r) => r.tmcId === scope.tmcId && r.id === id,
      (r) => ({ ...r, usedAt: now }),
    );
  }

  async revokeFamily(tx: Tx, scope: TenantScope, familyId: string, now: Date): Promise<void> {
    await this.db.update(
      tx,
      this.db.refreshTokens,
      (r) => r.tmcId === scope.tmcId && r.familyId === familyId && !r.revokedAt,
      (r) => ({ ...r, revokedAt: now }),
    );
  }

  async revokeAllOfClient(tx: Tx, scope: TenantScope, clientId: string, now: Date): Promise<void> {
    await this.db.update(
      tx,
      this.db.refreshTokens,
      (r) => r.tmcId === scope.tmcId && r.clientId === clientId && !r.revokedAt,
      (r) => ({ ...r, revokedAt: now }),
    );
  }
}

export class InMemoryTrustedIssuerRepository implements TrustedIssuerRepository {
  constructor(private readonly db: MemoryDatabase) {}

  async upsert(tx: Tx, scope: TenantScope, issuer: TrustedIssuer): Promise<void> {
    if (!this.db.get(tx, this.db.tmcs, scope.tmcId)) throw foreignKeyViolation();
    const key = issuerKey(scope.tmcId, issuer.issuer);
    await this.db.lock(tx, this.db.rowLock(this.db.trustedIssuers, key));
    this.db.write(tx, this.db.trustedIssuers, key, {
      tmcId: scope.tmcId,
      issuer: issuer.issuer,
      jwksUri: issuer.jwksUri,
      jwks: issuer.jwks === undefined ? undefined : jsonCopy(issuer.jwks),
      audience: issuer.audience,
      companyId: issuer.companyId,
    });
  }

  async find(tx: Tx, scope: TenantScope, issuer: string): Promise<TrustedIssuer | undefined> {
    const row = this.db.get(tx, this.db.trustedIssuers, issuerKey(scope.tmcId, issuer));
    return row && toIssuer(row);
  }

  async list(tx: Tx, scope: TenantScope): Promise<TrustedIssuer[]> {
    return this.db
      .read(tx, this.db.trustedIssuers)
      .filter((r) => r.tmcId === scope.tmcId)
      .sort((a, b) => compareText(a.issuer, b.issuer))
      .map(toIssuer);
  }

  async remove(tx: Tx, scope: TenantScope, issuer: string): Promise<boolean> {
    const key = issuerKey(scope.tmcId, issuer);
    if (!this.db.get(tx, this.db.trustedIssuers, key)) return false;
    await this.db.lock(tx, this.db.rowLock(this.db.trustedIssuers, key));
    if (!this.db.get(tx, this.db.trustedIssuers, key)) return false;
    this.db.write(tx, this.db.trustedIssuers, key, undefined);
    return true;
  }
}

function toIssuer(row: TrustedIssuerRow): TrustedIssuer {
  return {
    issuer: row.issuer,
    jwksUri: row.jwksUri,
    jwks: row.jwks === undefined ? undefined : jsonCopy(row.jwks),
    audience: row.audience,
    companyId: row.companyId,
  };
}

export class InMemoryAirCreditRepository implements AirCreditRepository, UnusedCreditRepository {
  constructor(private readonly db: MemoryDatabase) {}

  async insertPaymentSource(tx: Tx, scope: TenantScope, source: NewPaymentSource): Promise<string> {
    this.assertCompaniesOfTenant(tx, scope, [source.companyId]);
    const id = crypto.randomUUID();
    await this.db.insert(tx, this.db.paymentSources, { ...source, id });
    return id;
  }

  async insertCredits(tx: Tx, scope: TenantScope, credits: readonly NewAirCredit[]): Promise<number> {
    if (credits.length === 0) return 0;
    this.assertCompaniesOfTenant(
      tx,
      scope,
      credits.map((c) => c.companyId),
    );
    for (const credit of credits) {
      if (!this.db.get(tx, this.db.paymentSources, credit.paymentSourceId)) throw foreignKeyViolation();
      if (credit.travelerUserId !== undefined && !this.db.get(tx, this.db.users, credit.travelerUserId))
        throw foreignKeyViolation();
    }
    // One INSERT statement: all rows or none, even on `direct` (the ids are fresh, so nothing waits).
    for (const credit of credits) {
      const id = crypto.randomUUID();
      this.db.write(tx, this.db.airCredits, id, { ...credit, id, status: "OPEN" });
    }
    return credits.length;
  }

  async companyExists(tx: Tx, scope: TenantScope, companyId: string): Promise<boolean> {
    return this.db.get(tx, this.db.companies, companyId)?.tmcId === scope.tmcId;
  }

  async listTransferable(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    on: TransferableOn,
    filter: CreditFilter,
    page: { offset: number; limit: number },
  ): Promise<CreditPage> {
    const any = (values: readonly string[], value: string | undefined) =>
      values.length === 0 || (value !== undefined && values.includes(value));
    const matching = this.transferable(tx, scope, companyId, on)
      .filter(
        (c) =>
          any(filter.suppliers, c.source) &&
          any(filter.airlineCodes, c.airlineCode) &&
          any(filter.fopLabels, c.fopLabel) &&
          any(filter.pccs, c.pcc),
      )
      .filter(
        (c) => any(filter.fopCardAccessTypes, c.fopCardAccessType) && any(filter.legalEntityNames, c.legalEntityName),
      )
      .filter(
        (c) =>
          (filter.expiryFrom === undefined || c.expiryDate >= filter.expiryFrom) &&
          (filter.expiryTo === undefined || c.expiryDate <= filter.expiryTo),
      )
      .sort((a, b) =>
        a.expiryDate === b.expiryDate
          ? a.ticketNumber < b.ticketNumber
            ? -1
            : 1
          : a.expiryDate < b.expiryDate
            ? -1
            : 1,
      );
    return { credits: matching.slice(page.offset, page.offset + page.limit), totalRecords: matching.length };
  }

  async transferableValues(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    on: TransferableOn,
  ): Promise<TransferableValues> {
    const credits = this.transferable(tx, scope, companyId, on);
    const distinct = (pick: (c: UnusedCredit) => string | undefined) =>
      [...new Set(credits.flatMap((c) => (pick(c) ? [pick(c)!] : [])))].sort();
    return {
      fopLabels: distinct((c) => c.fopLabel),
      pccs: distinct((c) => c.pcc),
      legalEntityNames: distinct((c) => c.legalEntityName),
    };
  }

  async lockByPaymentSource(tx: Tx, scope: TenantScope, paymentSourceId: string): Promise<LockedCredit[]> {
    await this.db.lock(tx, `payment_source:${paymentSourceId}`);
    return this.ofPaymentSource(tx, scope, paymentSourceId).map((c) => ({
      companyId: c.companyId,
      status: c.status,
      expiryDate: c.expiryDate,
      airlineCode: c.airlineCode,
      creditUsageType: c.creditUsageType,
    }));
  }

  async setUsageType(tx: Tx, scope: TenantScope, paymentSourceId: string, type: CreditUsageType): Promise<void> {
    for (const c of this.ofPaymentSource(tx, scope, paymentSourceId))
      this.db.write(tx, this.db.unusedCredits, `${c.companyId}:${c.ticketNumber}`, { ...c, creditUsageType: type });
  }

  async upsertCredits(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    credits: readonly ImportedCredit[],
  ): Promise<{ created: number; updated: number }> {
    this.assertCompaniesOfTenant(tx, scope, [companyId]);
    let updated = 0;
    for (const credit of credits) {
      const key = `${companyId}:${credit.ticketNumber}`;
      const existing = this.db.get(tx, this.db.unusedCredits, key);
      if (existing) updated++;
      const paymentSourceId = credit.paymentSourceId || existing?.paymentSourceId || crypto.randomUUID();
      this.db.write(tx, this.db.unusedCredits, key, { ...credit, companyId, paymentSourceId });
    }
    return { created: credits.length - updated, updated };
  }

  async refreshStatisticsIfStale(_tx: Tx): Promise<void> {}

  private transferable(tx: Tx, scope: TenantScope, companyId: string, on: TransferableOn): UnusedCredit[] {
    if (this.db.get(tx, this.db.companies, companyId)?.tmcId !== scope.tmcId) return [];
    return this.db
      .read(tx, this.db.unusedCredits)
      .filter(
        (c) =>
          c.companyId === companyId &&
          c.status === "OPEN" &&
          c.creditUsageType !== "COMPANY" &&
          c.expiryDate >= on.today &&
          on.airlineCodes.includes(c.airlineCode),
      );
  }

  private ofPaymentSource(tx: Tx, scope: TenantScope, paymentSourceId: string): UnusedCredit[] {
    return this.db
      .read(tx, this.db.unusedCredits)
      .filter(
        (c) =>
          c.paymentSourceId === paymentSourceId &&
          this.db.get(tx, this.db.companies, c.companyId)?.tmcId === scope.tmcId,
      );
  }

  private assertCompaniesOfTenant(tx: Tx, scope: TenantScope, companyIds: readonly string[]): void {
    for (const id of new Set(companyIds)) {
      if (this.db.get(tx, this.db.companies, id)?.tmcId !== scope.tmcId) throw notFound("Company");
    }
  }
}

/**
 * credential_changes, as PostgresCredentialChangeLog uses it: `record` first takes the numbering
 * lock (pg_advisory_xact_lock: waits while another transaction holds it, then holds it until its
 * own transaction commits or rolls back — on `direct`, autocommit, only for the statement), reads
 * `previous` (max(seq) of the committed log, as READ COMMITTED sees it once the lock is held),
 * takes the next number of the sequence (kept even if the transaction rolls back, as nextval is),
 * inserts the log row and stamps api_users.change_seq in the caller's transaction, and sends the
 * NOTIFY that the database delivers to every listener only when that transaction commits. So
 * changes are numbered, committed and announced one at a time, in number order.
 */
export class InMemoryCredentialChangeLog implements CredentialChangeLog {
  /** The key of the advisory lock (PostgresCredentialChangeLog's NUMBERING_LOCK_KEY). */
  static readonly NUMBERING_LOCK = "pg_advisory_xact_lock:727501114";

  constructor(private readonly db: MemoryDatabase) {}

  async record(tx: Tx, clientId: string): Promise<NumberedChange> {
    this.db.use(tx);
    await this.db.lock(tx, InMemoryCredentialChangeLog.NUMBERING_LOCK);
    const previous = await this.latest(tx);
    const seq = this.db.nextChangeSeq();
    await this.db.insert(tx, this.db.credentialChanges, { seq, clientId, changedAt: this.db.clock() });
    await this.db.update(
      tx,
      this.db.apiUsers,
      (r) => r.clientId === clientId,
      (r) => ({ ...r, changeSeq: seq }),
    );
    this.db.notify(tx, String(seq));
    return { seq, previous };
  }

  /** select max(seq): 0 on an empty log (a pruned one included). */
  async latest(tx: Tx): Promise<number> {
    return this.db.read(tx, this.db.credentialChanges).reduce((max, r) => Math.max(max, r.seq), 0);
  }

  async since(tx: Tx, after: number, limit: number): Promise<Array<{ seq: number; clientId: string }>> {
    return this.db
      .read(tx, this.db.credentialChanges)
      .filter((r) => r.seq > after)
      .sort((a, b) => a.seq - b.seq)
      .slice(0, limit)
      .map((r) => ({ seq: r.seq, clientId: r.clientId }));
  }

  /** Keeps the newest change whatever its age, as the Postgres log does: latest() never goes back. */
  async prune(tx: Tx, before: Date): Promise<number> {
    let deleted = 0;
    const newest = await this.latest(tx);
    for (const row of this.db
      .read(tx, this.db.credentialChanges)
      .filter((r) => r.changedAt.getTime() < before.getTime() && r.seq < newest)) {
      await this.db.lock(tx, this.db.rowLock(this.db.credentialChanges, row.seq));
      if (this.db.get(tx, this.db.credentialChanges, row.seq) === undefined) continue;
      this.db.write(tx, this.db.credentialChanges, row.seq, undefined);
      deleted += 1;
    }
    return deleted;
  }
}

/** An active API user of the tenant (optionally: this one). */
function activeOf(scope: TenantScope, clientId?: string): (row: ApiUserRow) => boolean {
  return (row) => row.tmcId === scope.tmcId && !row.revokedAt && (clientId === undefined || row.clientId === clientId);
}

// ---- the factory -----------------------------------------------------------------------------

/** The repositories, keyed like postgresRepositories(). */
export function inMemoryRepositories(db: MemoryDatabase) {
  return {
    tenants: new InMemoryTenantRepository(db),
    apiUsers: new InMemoryApiUserRepository(db),
    audit: new InMemoryAuditRepository(db),
    signingKeys: new InMemorySigningKeyRepository(db),
    refreshTokens: new InMemoryRefreshTokenRepository(db),
    revokedTokens: new InMemoryRevokedTokenRepository(db),
    trustedIssuers: new InMemoryTrustedIssuerRepository(db),
    airCredits: new InMemoryAirCreditRepository(db),
    credentialChanges: new InMemoryCredentialChangeLog(db),
    scimUsers: new InMemoryScimUserRepository(db),
    users: new InMemoryUserRepository(db),
  };
}

export type InMemoryRepositories = ReturnType<typeof inMemoryRepositories>;

/** "<repository>.<method>" for every repository method, e.g. "audit.append". */
export type RepositoryMethod = {
  [R in keyof InMemoryRepositories]: `${R}.${Extract<keyof InMemoryRepositories[R], string>}`;
}[keyof InMemoryRepositories];

/**
 * What the domain can call on each repository of postgresRepositories(): `Repositories` itself
 * cannot be met by any class but Postgres' own, because PostgresCredentialChangeLog has a private
 * field (`channel`) and TypeScript compares classes with private members nominally. The fakes are
 * checked against this public face instead (a missing or mistyped method is still a type error).
 */
export type RepositoryShapes = { [R in keyof Repositories]: { [M in keyof Repositories[R]]: Repositories[R][M] } };

export interface InMemoryStore {
  readonly db: MemoryDatabase;
  readonly uow: InMemoryUnitOfWork;
  /** Checked below with `satisfies RepositoryShapes`. */
  readonly repositories: InMemoryRepositories;
  /** The same repositories, typed for createDomainServices (see RepositoryShapes for why a cast). */
  readonly asRepositories: Repositories;
  /** Every repository call so far, "<repository>.<method>". */
  readonly calls: string[];
  /** Every repository call so far with its arguments. */
  readonly invocations: MemoryDatabase["invocations"];
  /** The next `times` calls of `method` reject with `error` (before touching any row). */
  failNext(method: RepositoryMethod, error: unknown, times?: number): void;
  /** The next call of `method` first waits for `hook` (e.g. a concurrent change lands there), then runs. */
  beforeNext(method: RepositoryMethod, hook: (args: readonly unknown[]) => unknown): void;
  /** The next call of `method` runs, then waits for `hook` before its caller gets the result. */
  afterNext(method: RepositoryMethod, hook: (result: unknown, args: readonly unknown[]) => unknown): void;
}

/** A fresh, empty store. `clock` stands for Postgres' now() (rotated_at, revoked_at, audit occurred_at, changed_at). */
export function createInMemoryStore(options: { clock?: Clock } = {}): InMemoryStore {
  const db = new MemoryDatabase(options.clock ?? systemClock);
  const hands = instrumented(inMemoryRepositories(db), { calls: db.calls, invocations: db.invocations });
  const { repositories } = hands;
  return {
    db,
    uow: new InMemoryUnitOfWork(db),
    repositories: repositories satisfies RepositoryShapes,
    asRepositories: repositories as RepositoryShapes as unknown as Repositories,
    calls: db.calls,
    invocations: db.invocations,
    failNext: (method, error, times) => hands.failNext(method, error, times),
    beforeNext: (method, hook) => hands.beforeNext(method, hook),
    afterNext: (method, hook) => hands.afterNext(method, hook),
  };
}

// ---- mapping -----------------------------------------------------------------------------------

function toTmc(row: TmcRow): Tmc {
  return { id: row.id, name: row.name, maxApiUsers: row.maxApiUsers };
}

function toUser(row: UserRow): User {
  return {
    id: row.id,
    companyId: row.companyId,
    tmcId: row.tmcId,
    email: row.email,
    givenName: row.givenName,
    familyName: row.familyName,
    isActive: row.isActive,
  };
}

function toApiUser(row: ApiUserRow): ApiUser {
  return {
    clientId: row.clientId,
    tmcId: row.tmcId,
    orgId: row.orgId,
    role: row.role,
    credentialType: row.credentialType,
    secretHash: Buffer.from(row.secretHash),
    credentialGeneration: row.credentialGeneration,
  };
}

function toRefreshRecord(row: RefreshTokenRow): RefreshTokenRecord {
  return {
    id: row.id,
    tokenHash: Buffer.from(row.tokenHash),
    familyId: row.familyId,
    clientId: row.clientId,
    subject: row.subject,
    subjectKind: row.subjectKind,
    scope: row.scope,
    audience: row.audience,
    boundCredentials: row.boundCredentials.map(([id, generation]) => [id, generation] as BoundCredential),
    act: jsonCopy(row.act) as Record<string, unknown>,
    expiresAt: new Date(row.expiresAt),
    usedAt: row.usedAt,
    revokedAt: row.revokedAt,
  };
}

/** The check constraint tmcs_max_api_users_non_negative; Postgres' error is not a catalogue one. */
function checkMaxApiUsers(maxApiUsers: number): void {
  if (!Number.isInteger(maxApiUsers) || maxApiUsers < 0) {
    throw Object.assign(
      new Error('new row for relation "tmcs" violates check constraint "tmcs_max_api_users_non_negative"'),
      { code: "23514" },
    );
  }
}

function issuerKey(tmcId: string, issuer: string): string {
  return `${tmcId}\u0000${issuer}`;
}

/** jsonb stores a copy: later changes to the caller's object do not reach the row. */
function jsonCopy<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** Postgres text order under the C collation (client ids are lower-case base32). */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
