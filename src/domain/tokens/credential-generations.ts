import type { CredentialChangePublisher } from "../api-users/ports.js";
import type { Clock } from "../shared/clock.js";
import { CoalescedReads } from "../shared/coalesced-reads.js";
import type { LabelledCounter, Logger } from "../shared/observability.js";
import { RepeatedWarnings } from "../shared/repeated-warnings.js";
import type { Tx, UnitOfWork } from "../shared/unit-of-work.js";
import { isTokenCredentialId, TOKEN_NOT_REVOKED, type CredentialState } from "./model.js";
import type {
  ChangeFeed,
  CredentialChangeLog,
  CredentialStateSource,
  GenerationCache,
  NumberedChange,
} from "./ports.js";

/** Current generation per client id; undefined for a revoked or unknown client. */
export type Generations = Map<string, number | undefined>;

/** Where the truth about credential states is read (Postgres): API users, and revoked access tokens under their token credential ids. */
export interface CredentialGenerationsOptions {
  /** Changes older than this are forgotten by the log: no cached state can be older (the cache's TTL). */
  readonly logRetentionSeconds: number;
  /** Most changes republished by one reconcile. */
  readonly reconcileBatch: number;
  /**
   * Where reconcile and prune run: the background jobs' own connections, so requests that fill
   * theirs cannot stop the repair of a missed change. Absent: the same as the requests'.
   */
  readonly backgroundUow?: UnitOfWork;
}

/**
 * The current credential generation of each API user, which every access token carries. A token
 * is valid only while its generation equals the current one: rotation bumps it and revocation
 * removes it, so every token of that credential fails at once on every instance with no token
 * list to scan.
 *
 * Postgres is the truth; the shared cache (Redis) answers the hot path in one round trip. Every
 * change is numbered by the database and announced to every instance at commit; the cache keeps a
 * watermark, the highest change number it has been told about. The cache is believed only when
 * its watermark covers every change this instance knows of — so a cache that lost writes (a
 * restart from a snapshot, a lagging replica, a write that failed) is never believed — and only
 * while the announcements can reach this instance. Otherwise the database answers; never "accept".
 */
export class CredentialGenerations implements CredentialChangePublisher {
  /** The highest committed change number this instance knows of. */
  private knownSeq = 0;
  private reconciling: Promise<number> | undefined;
  private readonly committedListeners = new Set<(seq: number) => void>();
  private readonly warnings = new RepeatedWarnings();
  /** The requests' reads of the truth, coalesced: a cache outage costs one pooled connection, not one per request. */
  private readonly requestReads = new CoalescedReads<string, CredentialState>((ids) => this.fromDatabase(ids));

  constructor(
    private readonly deps: {
      readonly uow: UnitOfWork;
      readonly source: CredentialStateSource;
      readonly changes: CredentialChangeLog;
      readonly cache: GenerationCache;
      readonly feed: ChangeFeed;
      readonly logger: Logger;
      readonly fallbacks: LabelledCounter<"operation">;
      readonly clock: Clock;
    },
    private readonly options: CredentialGenerationsOptions,
  ) {}

  /**
   * Learns the latest change, then follows the feed; after every (re)connection it learns again
   * what it may have missed before it believes the cache.
   */
  async start(): Promise<void> {
    this.learn(await this.deps.changes.latest(this.deps.uow.direct));
    this.deps.feed.start(
      (seq) => this.learn(seq),
      async () => {
        this.learn(await this.deps.changes.latest(this.deps.uow.direct));
        void this.reconcile().catch((error: unknown) => this.fallback("write", error));
      },
    );
  }

  stop(): Promise<void> {
    return this.deps.feed.stop();
  }

  async current(clientIds: readonly string[]): Promise<Generations> {
    if (!this.deps.feed.connected) return toGenerations(clientIds, await this.requestReads.get(clientIds));
    let read: { states: Array<CredentialState | undefined>; watermark: number };
    try {
      read = await this.deps.cache.read(clientIds);
    } catch (error) {
      this.fallback("read", error);
      return toGenerations(clientIds, await this.requestReads.get(clientIds));
    }
    if (read.watermark < this.knownSeq) {
      // The cache missed a committed change: believe none of it, and repair it in the background.
      this.fallback("stale", new Error(`cache watermark ${read.watermark} is behind change ${this.knownSeq}`));
      void this.reconcile().catch((error: unknown) => this.fallback("write", error));
      return toGenerations(clientIds, await this.requestReads.get(clientIds));
    }
    const result: Generations = new Map();
    const missing: string[] = [];
    clientIds.forEach((id, i) => {
      const state = read.states[i];
      // A token credential is cached only once revoked: under a watermark that covers every change,
      // its absence means "not revoked" (its revocation would have been written before the raise).
      if (state === undefined && isTokenCredentialId(id)) result.set(id, TOKEN_NOT_REVOKED);
      else if (state === undefined) missing.push(id);
      else result.set(id, state.generation);
    });
    if (missing.length > 0) {
      const read = await this.requestReads.get(missing);
      const fresh = new Map(missing.map((id) => [id, read.get(id)!]));
      for (const id of missing) result.set(id, fresh.get(id)!.generation);
      // A fill carries the change number it reflects: it can never overwrite a newer state.
      await this.deps.cache.write(fresh).catch((error: unknown) => this.fallback("write", error));
    }
    return result;
  }

  /**
   * The change number the shared cache's watermark must reach for its states to be believed
   * (what current() checks); undefined while the change feed is down and nothing can vouch for it.
   */
  believableFrom(): number | undefined {
    return this.deps.feed.connected ? this.knownSeq : undefined;
  }

  /**
   * `listener` runs each time this instance learns of a higher committed change number (from the
   * feed, its own changes, or a catch-up after reconnection); the returned function unsubscribes it.
   */
  onCommitted(listener: (seq: number) => void): () => void {
    this.committedListeners.add(listener);
    return () => this.committedListeners.delete(listener);
  }

  /** Numbers the change inside its transaction (the database announces it to every instance at commit). */
  recordChange(tx: Tx, clientId: string): Promise<NumberedChange> {
    return this.deps.changes.record(tx, clientId);
  }

  /**
   * After the change committed and before the caller is answered: the committed state goes into
   * the cache with its change number, and the watermark rises to it if the cache already covers
   * the change before it. If the cache cannot take it (or missed an earlier change), the change
   * is still safe: every instance hears of its number and stops believing the cache until a
   * reconcile has republished what it missed.
   */
  async publish(clientId: string, change: NumberedChange): Promise<void> {
    this.learn(change.seq);
    // The change has committed: whatever fails here must not fail the caller (a rotation's new
    // secret would be lost); every instance already refuses the old credential.
    try {
      const states = await this.fromDatabase([clientId]);
      await this.deps.cache.write(states, { to: change.seq, ifAtLeast: change.previous });
    } catch (error) {
      this.fallback("write", error);
    }
  }

  /**
   * Brings the cache up to date with every change it missed, and learns of changes whose
   * announcement did not arrive; a background job of every instance, and run at once when a
   * stale cache is met. Returns how many changes it republished.
   */
  reconcile(): Promise<number> {
    this.reconciling ??= this.reconcileOnce().finally(() => (this.reconciling = undefined));
    return this.reconciling;
  }

  /** Forgets log entries older than any state the cache can still hold. */
  async pruneLog(): Promise<number> {
    return this.deps.changes.prune(
      this.background.direct,
      new Date(this.deps.clock().getTime() - this.options.logRetentionSeconds * 1000),
    );
  }

  private get background(): UnitOfWork {
    return this.options.backgroundUow ?? this.deps.uow;
  }

  private async reconcileOnce(): Promise<number> {
    const latest = await this.deps.changes.latest(this.background.direct);
    this.learn(latest);
    const { watermark } = await this.deps.cache.read([]);
    if (watermark >= latest) return 0;
    // Changes commit in number order, so every change up to `latest` is in the log now (unless
    // pruned: older than any state the cache can still hold).
    const missed = await this.deps.changes.since(this.background.direct, watermark, this.options.reconcileBatch);
    if (missed.length === 0) {
      await this.deps.cache.write(new Map(), { to: latest, ifAtLeast: watermark });
      return 0;
    }
    const states = await this.fromDatabase([...new Set(missed.map((m) => m.clientId))], this.background);
    await this.deps.cache.write(states, { to: missed[missed.length - 1]!.seq, ifAtLeast: watermark });
    this.deps.logger.info(
      { count: missed.length, from: watermark },
      "credential state: republished changes the cache had missed",
    );
    return missed.length;
  }

  private learn(seq: number): void {
    if (seq <= this.knownSeq) return;
    this.knownSeq = seq;
    for (const listener of this.committedListeners) listener(seq);
  }

  private async fromDatabase(clientIds: readonly string[], uow = this.deps.uow): Promise<Map<string, CredentialState>> {
    const found = await this.deps.source.credentialStates(uow.direct, clientIds);
    const absent = (id: string): CredentialState =>
      isTokenCredentialId(id)
        ? { generation: TOKEN_NOT_REVOKED, changeSeq: 0 }
        : { generation: undefined, changeSeq: 0 };
    return new Map(clientIds.map((id) => [id, found.get(id) ?? absent(id)]));
  }

  /**
   * Counted always; logged at warn when Redis failed. A stale watermark is logged at debug: right
   * after another instance's change it is expected (the database announces the change before that
   * instance has written the cache), and a cache that really missed changes shows in the reconcile's
   * "republished" line and in the metric.
   */
  private fallback(operation: "read" | "write" | "stale", error: unknown): void {
    this.deps.fallbacks.inc({ operation });
    const message = (error as Error).message;
    const line = "credential state: the cache cannot be used, using Postgres";
    if (operation === "stale") this.deps.logger.debug({ err: { message }, operation }, line);
    // While Redis is down or its breaker open, every request falls back: one line per cause per interval.
    else this.warnings.warn(this.deps.logger, `${operation}: ${message}`, { err: { message }, operation }, line);
  }
}

function toGenerations(clientIds: readonly string[], states: Map<string, CredentialState>): Generations {
  return new Map(clientIds.map((id) => [id, states.get(id)?.generation]));
}
