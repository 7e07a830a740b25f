import type { CommittedChanges } from "./credential-change-stream.js";

/** What one read of a receiver's feed found: its due SETs (jti → SET, oldest first), signed once for every poll that shares it. */
export interface FeedRead {
  readonly sets: ReadonlyMap<string, string>;
  readonly more: boolean;
  /** Set when nothing was due: every change up to this number is acknowledged (or concerns no token). */
  readonly quietThrough: number | undefined;
}

/** Reads a receiver's feed in one transaction: records `acknowledged`, returns up to `max` due SETs. */
export type ReadFeed = (receiverId: string, acknowledged: readonly number[], max: number) => Promise<FeedRead>;

interface Waiting {
  readonly acknowledged: readonly number[];
  readonly max: number;
  readonly resolve: (read: FeedRead) => void;
  readonly reject: (error: unknown) => void;
}

const NOTHING_DUE: FeedRead = { sets: new Map(), more: false, quietThrough: undefined };

/**
 * The database side of SET polling on one instance, so that polls cost connections only when
 * there can be something to say:
 *
 * - **Nothing new, no transaction.** After a read found nothing due through change N, a poll
 *   whose acknowledgements are all ≤ N is answered empty from memory for as long as this
 *   instance has heard of no change after N (the change feed tells it of every commit). Only new
 *   changes can make SETs due again (acknowledgements on other instances only remove some), so
 *   the answer is the one the database would give, as of the last change this instance heard of.
 * - **One transaction at a time per receiver.** Polls of one receiver that need the database
 *   while its read runs wait (holding nothing) and are then served together by one read that
 *   records all their acknowledgements and reads as many SETs as the largest of them asks for;
 *   each takes its own first `maxEvents`. As if they had run one after the other, which the row
 *   lock made them do anyway, but with one pooled connection instead of one each.
 */
export class SecurityEventFeedReads {
  /** Per receiver with a read running: the polls waiting for the next one. */
  private readonly queues = new Map<string, Waiting[]>();
  /** Per receiver: nothing was due through this change when last read (forgotten when something was). */
  private readonly quiet = new Map<string, number>();

  constructor(
    private readonly committed: CommittedChanges,
    private readonly readFeed: ReadFeed,
  ) {}

  /** The receiver's due SETs (at most `max`, and whether more are due) after recording `acknowledged`. */
  async read(
    receiverId: string,
    acknowledged: readonly number[],
    max: number,
  ): Promise<{ sets: ReadonlyMap<string, string>; more: boolean }> {
    if (this.nothingNew(receiverId, acknowledged)) return NOTHING_DUE;
    const read = await this.joined(receiverId, acknowledged, max);
    if (read.sets.size <= max) return read;
    return { sets: new Map([...read.sets].slice(0, max)), more: true };
  }

  private nothingNew(receiverId: string, acknowledged: readonly number[]): boolean {
    const through = this.quiet.get(receiverId);
    const known = this.committed.believableFrom();
    return (
      through !== undefined && known !== undefined && known <= through && acknowledged.every((seq) => seq <= through)
    );
  }

  /** Joins the receiver's next read, starting it now if none runs. */
  private joined(receiverId: string, acknowledged: readonly number[], max: number): Promise<FeedRead> {
    return new Promise((resolve, reject) => {
      const waiting = { acknowledged, max, resolve, reject };
      const queue = this.queues.get(receiverId);
      if (queue) queue.push(waiting);
      else {
        this.queues.set(receiverId, [waiting]);
        void this.drain(receiverId);
      }
    });
  }

  /** Runs reads for the receiver's waiting polls until none is left (every poll is settled: no rejection escapes). */
  private async drain(receiverId: string): Promise<void> {
    const queue = this.queues.get(receiverId)!;
    while (queue.length > 0) {
      const batch = queue.splice(0);
      const acknowledged = [...new Set(batch.flatMap((w) => w.acknowledged))];
      const max = Math.max(...batch.map((w) => w.max));
      try {
        const read = await this.readFeed(receiverId, acknowledged, max);
        if (read.quietThrough !== undefined) this.quiet.set(receiverId, read.quietThrough);
        else this.quiet.delete(receiverId);
        for (const w of batch) w.resolve(read);
      } catch (error) {
        for (const w of batch) w.reject(error);
      }
    }
    this.queues.delete(receiverId);
  }
}
