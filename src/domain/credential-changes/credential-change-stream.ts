import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import type { Clock } from "../shared/clock.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { CredentialStateSource } from "../tokens/ports.js";
import { CredentialChangeReader } from "./credential-change-reader.js";
import type { CredentialChangeLog, CredentialSnapshots, RevokedTokenRepository } from "../tokens/ports.js";

/**
 * How often an open stream says it is still up to date. Receivers fail closed after their own
 * bound: the verifier package's default is 3 heartbeats (its `STREAM_HEARTBEAT_MS` must equal this;
 * a unit test of the package compares them).
 */
export const CHANGE_STREAM_HEARTBEAT_MS = 500;
/** The most credentials (and the most revoked tokens) in one snapshot page, and changes read at once. */
export const CHANGE_STREAM_PAGE_SIZE = 1000;

/** An API user's current credential generation. */
export interface ChangedCredential {
  readonly clientId: string;
  /** Undefined: revoked or removed. */
  readonly generation: number | undefined;
}

export interface RevokedToken {
  readonly jti: string;
  readonly expiresAt: Date;
}

/** One event of a change stream; `cursor` is the number of the last change it accounts for. */
export type ChangeStreamEvent =
  | ({ readonly kind: "credential_changed"; readonly cursor: number } & ChangedCredential)
  | ({ readonly kind: "token_revoked"; readonly cursor: number } & RevokedToken)
  | { readonly kind: "signing_keys_changed"; readonly cursor: number }
  | {
      readonly kind: "heartbeat";
      readonly cursor: number;
      readonly serverTime: Date;
      /** What this stream sent before the heartbeat (heartbeats aside), for the receiver's gap check. */
      readonly sent: SentSoFar;
    }
  | {
      readonly kind: "snapshot";
      readonly cursor: number;
      readonly credentials: readonly ChangedCredential[];
      readonly revokedTokens: readonly RevokedToken[];
      readonly lastPage: boolean;
    };

/** The events (heartbeats aside) one stream has sent: how many, and the last one's cursor (undefined: none). */
export interface SentSoFar {
  readonly count: number;
  readonly lastCursor: number | undefined;
}

/** Committed credential changes as this instance learns of them (implemented by CredentialGenerations). */
export interface CommittedChanges {
  /** The highest committed change this instance knows of; undefined while it cannot hear of new ones. */
  believableFrom(): number | undefined;
  onCommitted(listener: (seq: number) => void): () => void;
}

/** Changes of the published signing keys (implemented by SigningKeyRing). */
export interface SigningKeyChanges {
  onKeysChanged(listener: () => void): () => void;
}

/** What the instance's metrics learn of its streams (the Prometheus side lives outside the domain). */
export interface ChangeStreamObserver {
  streamsOpen(count: number): void;
  eventSent(kind: ChangeStreamEvent["kind"]): void;
}

export interface CredentialChangeStreamOptions {
  /** How long the log keeps changes: a cursor older than that gets a snapshot, which lists the API users revoked within it. */
  readonly logRetentionSeconds: number;
  /** Streams this instance holds open at once, in all and per watcher (resource server). */
  readonly maxOpen: number;
  readonly maxOpenPerWatcher: number;
  readonly heartbeatMs?: number;
  readonly pageSize?: number;
  readonly observer?: ChangeStreamObserver;
}

/**
 * The credential-change stream of resource servers that verify tokens themselves: every change
 * that can invalidate an access token, read from the numbered log in Postgres (the one source: a
 * cache that lost data loses no event) in number order, woken by the change feed that tells every
 * instance of every commit. An event carries the credential's state as read when it is sent, so a
 * replay never resurrects an older one. Heartbeats say "up to date" only while this instance hears
 * of every change and has sent every change it heard of.
 */
export class CredentialChangeStream {
  private stopped = false;
  /** The wake-up of every open stream (what stop() ends, and what `watching` counts), with its watcher. */
  private readonly open = new Map<() => void, string>();
  private readonly heartbeatMs: number;
  private readonly pageSize: number;
  private readonly reader: CredentialChangeReader;

  constructor(
    private readonly deps: {
      readonly uow: UnitOfWork;
      readonly changes: CredentialChangeLog;
      readonly states: CredentialStateSource;
      readonly revokedTokens: RevokedTokenRepository;
      readonly snapshots: CredentialSnapshots;
      readonly committed: CommittedChanges;
      readonly keys: SigningKeyChanges;
      readonly clock: Clock;
    },
    private readonly options: CredentialChangeStreamOptions,
  ) {
    this.heartbeatMs = options.heartbeatMs ?? CHANGE_STREAM_HEARTBEAT_MS;
    this.pageSize = options.pageSize ?? CHANGE_STREAM_PAGE_SIZE;
    this.reader = new CredentialChangeReader(deps);
  }

  /** How many streams are open on this instance. */
  get watching(): number {
    return this.open.size;
  }

  /**
   * Checks the cursor (refused when it is not a decimal number or is ahead of the latest change)
   * and that this instance has room for one more stream of `watcher` (429 TOO_MANY_OPEN_STREAMS),
   * then returns the events: a snapshot first when there is no cursor or the log no longer holds
   * every change after it, then every change after it, until `signal` aborts or stop().
   */
  async watch(sinceCursor: string, signal: AbortSignal, watcher: string): Promise<AsyncIterable<ChangeStreamEvent>> {
    const latest = await this.deps.changes.latest(this.deps.uow.direct);
    const from = parseCursor(sinceCursor, latest);
    const start = from !== undefined && (await this.retains(from, latest)) ? from : undefined;
    // Counted from here, so two streams checked at once cannot both take the last slot.
    const ring = this.admit(watcher);
    return this.events(start, signal, ring);
  }

  /** Ends every open stream (cleanly: each sends what it has and completes); new ones end at once. */
  stop(): void {
    this.stopped = true;
    for (const wake of this.open.keys()) wake();
  }

  /** Takes a slot for one more stream of `watcher`, or refuses; the slot is the stream's wake-up, freed when the events end. */
  private admit(watcher: string): Wakeup {
    let ofWatcher = 0;
    for (const holder of this.open.values()) if (holder === watcher) ofWatcher++;
    if (this.open.size >= this.options.maxOpen || ofWatcher >= this.options.maxOpenPerWatcher)
      throw new DomainError(
        "TOO_MANY_OPEN_STREAMS",
        "This instance holds as many change streams as it may; retry shortly",
        {
          params: [{ name: "retryAfterSeconds", value: "5" }],
          retryAfterSeconds: 5,
          logged: { watcher, open: String(this.open.size), ofWatcher: String(ofWatcher) },
        },
      );
    const wake = new Wakeup();
    this.open.set(wake.ring, watcher);
    this.options.observer?.streamsOpen(this.open.size);
    return wake;
  }

  private release(wake: Wakeup): void {
    if (this.open.delete(wake.ring)) this.options.observer?.streamsOpen(this.open.size);
  }

  /**
   * Whether every change after `from` is still in the log. Numbers can have gaps (a transaction
   * that rolled back used one), so an oldest entry past `from + 1` may be a gap or a pruned change:
   * either way a snapshot is the safe answer.
   */
  private async retains(from: number, latest: number): Promise<boolean> {
    if (from >= latest) return true;
    const [oldest] = await this.deps.changes.since(this.deps.uow.direct, 0, 1);
    return oldest !== undefined && oldest.seq <= from + 1;
  }

  /** The events, each counted; the slot is freed when they end, or at once if they are never read and the call ends. */
  private events(from: number | undefined, signal: AbortSignal, wake: Wakeup): AsyncIterable<ChangeStreamEvent> {
    const release = () => this.release(wake);
    signal.addEventListener("abort", release, { once: true });
    if (signal.aborted) release();
    const observer = this.options.observer;
    const counted = async function* (this: CredentialChangeStream) {
      let sent: SentSoFar = { count: 0, lastCursor: undefined };
      try {
        for await (const unstamped of this.stream(from, signal, wake)) {
          // A heartbeat tells what went before it; every other event counts.
          const event: ChangeStreamEvent = unstamped.kind === "heartbeat" ? { ...unstamped, sent } : unstamped;
          if (event.kind !== "heartbeat") sent = { count: sent.count + 1, lastCursor: event.cursor };
          observer?.eventSent(event.kind);
          yield event;
        }
      } finally {
        signal.removeEventListener("abort", release);
        release();
      }
    };
    return counted.call(this);
  }

  private async *stream(from: number | undefined, signal: AbortSignal, wake: Wakeup): AsyncGenerator<UnstampedEvent> {
    let keysChanged = false;
    const unsubscribe = [
      this.deps.committed.onCommitted(() => wake.ring()),
      this.deps.keys.onKeysChanged(() => {
        keysChanged = true;
        wake.ring();
      }),
    ];
    const ring = () => wake.ring();
    signal.addEventListener("abort", ring);
    try {
      if (this.stopped || signal.aborted) return;
      let cursor = from ?? (yield* this.snapshot());
      let lastHeartbeat = -Infinity;
      while (!this.stopped && !signal.aborted) {
        // Read before the replay: a heartbeat may vouch only for what was known before reading.
        const known = this.deps.committed.believableFrom();
        cursor = yield* this.replay(cursor);
        if (keysChanged) {
          keysChanged = false;
          yield { kind: "signing_keys_changed", cursor };
        }
        if (known !== undefined && cursor >= known && performance.now() - lastHeartbeat >= this.heartbeatMs) {
          lastHeartbeat = performance.now();
          yield { kind: "heartbeat", cursor, serverTime: this.deps.clock() };
        }
        // Until the next heartbeat is due (a full interval while none may be sent), or a change, a key change, the end.
        const due = lastHeartbeat + this.heartbeatMs - performance.now();
        await wake.wait(due > 0 ? due : this.heartbeatMs);
      }
    } finally {
      for (const off of unsubscribe) off();
      signal.removeEventListener("abort", ring);
    }
  }

  /** Every change after `after`, oldest first; returns the cursor past the last one (resource servers' own changes are passed over). */
  private async *replay(after: number): AsyncGenerator<ChangeStreamEvent, number> {
    let cursor = after;
    for (;;) {
      const page = await this.reader.page(this.deps.uow.direct, cursor, this.pageSize);
      for (const change of page.changes) {
        yield change.kind === "credential_changed"
          ? { kind: change.kind, cursor: change.seq, clientId: change.clientId, generation: change.generation }
          : { kind: change.kind, cursor: change.seq, jti: change.jti, expiresAt: change.expiresAt };
      }
      cursor = page.last;
      if (!page.full) return cursor;
    }
  }

  /**
   * The state as of the latest change, in pages (the last one marked); returns its cursor. Read
   * after the cursor, so a page may already show a later change: the replay that follows sends
   * that change again, with the same state.
   */
  private async *snapshot(): AsyncGenerator<ChangeStreamEvent, number> {
    const cursor = await this.deps.changes.latest(this.deps.uow.direct);
    let pending: { credentials: ChangedCredential[]; revokedTokens: RevokedToken[] } | undefined;
    for await (const page of this.snapshotPages()) {
      if (pending) yield { kind: "snapshot", cursor, ...pending, lastPage: false };
      pending = page;
    }
    yield { kind: "snapshot", cursor, credentials: [], revokedTokens: [], ...pending, lastPage: true };
    return cursor;
  }

  private async *snapshotPages(): AsyncGenerator<{ credentials: ChangedCredential[]; revokedTokens: RevokedToken[] }> {
    const now = this.deps.clock();
    const revokedSince = new Date(now.getTime() - this.options.logRetentionSeconds * 1000);
    for (let after = ""; ;) {
      const credentials = await this.deps.snapshots.apiUserGenerations(
        this.deps.uow.direct,
        after,
        this.pageSize,
        revokedSince,
      );
      if (credentials.length > 0) yield { credentials, revokedTokens: [] };
      if (credentials.length < this.pageSize) break;
      after = credentials[credentials.length - 1]!.clientId;
    }
    for (let after = ""; ;) {
      const revokedTokens = await this.deps.snapshots.unexpiredRevocations(
        this.deps.uow.direct,
        now,
        after,
        this.pageSize,
      );
      if (revokedTokens.length > 0) yield { credentials: [], revokedTokens };
      if (revokedTokens.length < this.pageSize) break;
      after = revokedTokens[revokedTokens.length - 1]!.jti;
    }
  }
}

/** An event as the stream makes it: a heartbeat without what was sent before it (events() adds that). */
type UnstampedEvent = Exclude<ChangeStreamEvent, { kind: "heartbeat" }> | Omit<HeartbeatEvent, "sent">;
type HeartbeatEvent = Extract<ChangeStreamEvent, { kind: "heartbeat" }>;

/** Undefined for an empty cursor (start with a snapshot); refused unless a decimal number no higher than `latest`. */
function parseCursor(cursor: string, latest: number): number | undefined {
  if (cursor === "") return undefined;
  const value = /^\d{1,16}$/.test(cursor) ? Number(cursor) : Number.NaN;
  if (!Number.isSafeInteger(value))
    throw invalidArgument("since_cursor must be a cursor received from this stream (a decimal number)", [
      { name: "since_cursor", value: "not a number" },
    ]);
  if (value > latest)
    throw invalidArgument("since_cursor is ahead of the latest credential change", [
      { name: "since_cursor", value: "ahead of the latest change" },
    ]);
  return value;
}

/** A latch an event rings and a loop waits on (with a time limit); a ring before the wait is not lost. */
export class Wakeup {
  private rung = false;
  private resolve: (() => void) | undefined;

  /** Bound, so it can be handed out as a listener and a key. */
  readonly ring = (): void => {
    this.rung = true;
    this.resolve?.();
  };

  async wait(ms: number): Promise<void> {
    if (!this.rung) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.resolve = resolve;
        timer = setTimeout(resolve, ms);
      });
      clearTimeout(timer);
      this.resolve = undefined;
    }
    this.rung = false;
  }
}
