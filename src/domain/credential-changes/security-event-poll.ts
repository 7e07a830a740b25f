import type { CryptoKey } from "jose";
import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import type { Clock } from "../shared/clock.js";
import type { Tx, UnitOfWork } from "../shared/unit-of-work.js";
import type { CredentialChangeReader, LoggedChange } from "./credential-change-reader.js";
import { Wakeup, type CommittedChanges } from "./credential-change-stream.js";
import type { CredentialChangeLog, SecurityEventPositions } from "../tokens/ports.js";
import { SecurityEventFeedReads, type FeedRead } from "./security-event-feed-reads.js";
import { seqOfSetId, signSecurityEvent } from "./security-event-tokens.js";

/** The longest a poll waits for a SET when asked to (RFC 8936 long polling): under common 30 s proxy timeouts. */
export const SSF_LONG_POLL_MS = 25_000;

/**
 * The long poll's bound under a request deadline: it answers (empty) a second before the deadline
 * would refuse the call, so with the default 5 s deadline a long poll waits up to 4 s.
 */
export function longPollBoundMs(requestDeadlineMs: number): number {
  return Math.max(0, Math.min(SSF_LONG_POLL_MS, requestDeadlineMs - 1000));
}
/** SETs returned when the receiver does not say how many (RFC 8936 leaves it to the transmitter). */
export const SSF_DEFAULT_MAX_EVENTS = 100;
/** Log entries read at once while looking for SETs to deliver. */
const SCAN_PAGE_SIZE = 500;

/** An RFC 8936 poll request, as the domain takes it. */
export interface SecurityEventPollRequest {
  /** Undefined: the transmitter's default; 0: acknowledge only. */
  readonly maxEvents: number | undefined;
  readonly returnImmediately: boolean;
  readonly ack: readonly string[];
  /** jtis the receiver reports errors for (setErrs): received, so acknowledged, never redelivered. */
  readonly setErrs: readonly string[];
}

export interface SecurityEventPollResult {
  /** jti → the signed SET. */
  readonly sets: ReadonlyMap<string, string>;
  readonly moreAvailable: boolean;
}

export interface SecurityEventPollOptions {
  readonly issuer: string;
  readonly longPollMs?: number;
  /** Polls one receiver holds open on this instance at once; one more is 429 TOO_MANY_OPEN_POLLS. */
  readonly maxOpenPerReceiver?: number;
}

/** Polls one receiver may hold open on one instance when not configured (SSF_POLL_MAX_OPEN_PER_RESOURCE_SERVER). */
export const SSF_POLL_MAX_OPEN_PER_RECEIVER = 10;

/**
 * RFC 8936 poll delivery of the credential-change log as Security Event Tokens, one feed per
 * resource server. Its position lives in Postgres (every instance serves the same feed); each
 * poll records the acknowledgements first, then returns the oldest SETs not yet acknowledged —
 * an unacknowledged SET is delivered again, with the same jti, on every poll until it is. A poll
 * with nothing to deliver waits (bounded) for the change feed's next commit, unless asked not to,
 * holding no database connection while it waits (see SecurityEventFeedReads).
 */
export class SecurityEventPoll {
  private stopped = false;
  /** The wake-up of every open poll (what stop() ends), with its receiver (what the cap counts). */
  private readonly open = new Map<() => void, string>();
  private readonly longPollMs: number;
  private readonly maxOpenPerReceiver: number;
  private readonly reads: SecurityEventFeedReads;

  constructor(
    private readonly deps: {
      readonly uow: UnitOfWork;
      readonly changes: CredentialChangeLog;
      readonly reader: CredentialChangeReader;
      readonly positions: SecurityEventPositions;
      readonly committed: CommittedChanges;
      readonly keys: { readonly signingKey: { readonly kid: string; readonly key: CryptoKey } };
      readonly clock: Clock;
    },
    private readonly options: SecurityEventPollOptions,
  ) {
    this.longPollMs = options.longPollMs ?? SSF_LONG_POLL_MS;
    this.maxOpenPerReceiver = options.maxOpenPerReceiver ?? SSF_POLL_MAX_OPEN_PER_RECEIVER;
    this.reads = new SecurityEventFeedReads(deps.committed, (receiverId, acknowledged, max) =>
      this.readFeed(receiverId, acknowledged, max),
    );
  }

  /** Ends every waiting poll (each answers with what it has); new ones do not wait. */
  stop(): void {
    this.stopped = true;
    for (const wake of this.open.keys()) wake();
  }

  /**
   * One poll of `receiverId`'s feed; its SETs are addressed to it (their aud is the receiver's
   * client id). Refused with 429 TOO_MANY_OPEN_POLLS when the receiver already holds its share
   * of open polls on this instance.
   */
  async poll(
    receiverId: string,
    request: SecurityEventPollRequest,
    signal: AbortSignal,
  ): Promise<SecurityEventPollResult> {
    const acknowledged = acknowledgedSeqs([...request.ack, ...request.setErrs]);
    const max = request.maxEvents ?? SSF_DEFAULT_MAX_EVENTS;
    this.admit(receiverId);
    const deadline = performance.now() + this.longPollMs;
    const wake = new Wakeup();
    const off = this.deps.committed.onCommitted(() => wake.ring());
    const ring = () => wake.ring();
    signal.addEventListener("abort", ring);
    this.open.set(ring, receiverId);
    try {
      let pending = acknowledged;
      for (;;) {
        const found = await this.reads.read(receiverId, pending, max);
        pending = [];
        const remaining = deadline - performance.now();
        const wait = !request.returnImmediately && max > 0 && found.sets.size === 0;
        if (!wait || remaining <= 0 || this.stopped || signal.aborted)
          return { sets: found.sets, moreAvailable: found.more };
        await wake.wait(remaining);
      }
    } finally {
      off();
      signal.removeEventListener("abort", ring);
      this.open.delete(ring);
    }
  }

  /** Refuses a poll when its receiver already holds its open polls on this instance (the poll then takes its place in `open`). */
  private admit(receiverId: string): void {
    let open = 0;
    for (const holder of this.open.values()) if (holder === receiverId) open++;
    if (open >= this.maxOpenPerReceiver)
      throw new DomainError(
        "TOO_MANY_OPEN_POLLS",
        "This resource server holds as many open polls on this instance as it may; retry shortly",
        {
          params: [{ name: "retryAfterSeconds", value: "5" }],
          retryAfterSeconds: 5,
          logged: { receiver: receiverId, open: String(open) },
        },
      );
  }

  /** One read of the feed (one transaction, NOWAIT on the position), its SETs signed once for every poll that shares it. */
  private async readFeed(receiverId: string, acknowledged: readonly number[], max: number): Promise<FeedRead> {
    const found = await this.deps.uow.transaction((tx) => this.deliverable(tx, receiverId, acknowledged, max));
    const quiet = found.changes.length === 0 && !found.more;
    return {
      sets: await this.signed(found.changes, receiverId),
      more: found.more,
      quietThrough: quiet ? found.through : undefined,
    };
  }

  /**
   * In one transaction, with the receiver's position locked: records `acknowledged` (those after
   * the position and not after the latest change: a jti of a change still to come acknowledges
   * nothing), moves the position past every change up to the first unacknowledged SET, and
   * returns the first `max` unacknowledged ones. A new receiver starts at the oldest change the
   * log retains, so it hears of every credential change that can concern a token still valid.
   */
  private async deliverable(
    tx: Tx,
    receiverId: string,
    acknowledged: readonly number[],
    max: number,
  ): Promise<{ changes: LoggedChange[]; more: boolean; through: number }> {
    const latest = await this.deps.changes.latest(tx);
    const position = await this.deps.positions.lock(tx, receiverId, 0);
    const fresh = acknowledged.filter((seq) => seq > position.through && seq <= latest);
    await this.deps.positions.acknowledge(tx, receiverId, fresh);
    const done = new Set([...position.acknowledged, ...fresh]);
    const changes: LoggedChange[] = [];
    let firstPending: number | undefined;
    let more = false;
    let cursor = position.through;
    while (!more) {
      const page = await this.deps.reader.page(tx, cursor, SCAN_PAGE_SIZE);
      for (const change of page.changes) {
        if (done.has(change.seq)) continue;
        firstPending ??= change.seq;
        if (changes.length === max) {
          more = true;
          break;
        }
        changes.push(change);
      }
      cursor = page.last;
      if (!page.full) break;
    }
    const through = firstPending !== undefined ? firstPending - 1 : cursor;
    if (through > position.through) await this.deps.positions.advance(tx, receiverId, through);
    return { changes, more, through };
  }

  private async signed(changes: readonly LoggedChange[], audience: string): Promise<Map<string, string>> {
    const context = { issuer: this.options.issuer, audience, now: this.deps.clock() };
    const key = this.deps.keys.signingKey;
    const sets = new Map<string, string>();
    for (const change of changes) sets.set(String(change.seq), await signSecurityEvent(change, context, key));
    return sets;
  }
}

/** The change numbers of acknowledged jtis; a jti this feed never issues is refused (400 naming it). */
function acknowledgedSeqs(jtis: readonly string[]): number[] {
  return jtis.map((jti) => {
    const seq = seqOfSetId(jti);
    if (seq === undefined)
      throw invalidArgument("ack and setErrs take jtis of SETs this feed delivered", [
        { name: "ack", value: "not a jti of this feed" },
      ]);
    return seq;
  });
}
