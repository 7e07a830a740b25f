import { ReplayCacheUnavailable, type ReplayCache, type ReplayCacheBirths } from "../../domain/replay/ports.js";
import type { Tx } from "../../domain/shared/unit-of-work.js";
import { knexOf } from "./unit-of-work.js";

/** One call in so many also deletes a batch of expired ids: the table holds about what is still live. */
const SWEEP_EVERY = 500;
const SWEEP_BATCH = 1_000;
/** The most ids one statement records (3 bindings each). */
const BATCH_MAX = 500;

/** An id waiting for its statement, and its caller's answer. */
interface Pending {
  readonly namespace: string;
  readonly id: string;
  readonly expiresAt: Date;
  readonly answer: (first: boolean) => void;
  readonly fail: (error: unknown) => void;
}

/**
 * The replay cache in the database, for an instance without Redis (the embedded default): an
 * insert per id, which keeps a live id and takes the place of an expired one. It survives a
 * restart, so no id is forgotten within its lifetime: every caller is answered only once its
 * id is committed. The ids presented in one turn of the event loop, and while a statement runs,
 * go into one statement (group commit: on PGlite each statement is a commit written to disk, run
 * on this thread, most of the cost of a DPoP proof or a client assertion there — and a statement
 * started at once would finish before the next request is read, leaving nothing to group).
 */
export class PostgresReplayCache implements ReplayCache {
  private calls = 0;
  private queue: Pending[] = [];
  private running = false;

  constructor(private readonly db: Tx) {}

  useOnce(namespace: string, id: string, expiresAt: Date): Promise<boolean> {
    return new Promise((answer, fail) => {
      this.queue.push({ namespace, id, expiresAt, answer, fail });
      if (!this.running) {
        this.running = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  /** Runs the waiting ids, a statement at a time, until none waits. */
  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, BATCH_MAX);
      try {
        this.calls += batch.length;
        if (this.calls >= SWEEP_EVERY) {
          this.calls = 0;
          await this.sweep();
        }
        const recorded = await this.record(batch);
        for (const p of batch) p.answer(recorded.delete(keyOf(p.namespace, p.id)));
      } catch (error) {
        for (const p of batch) p.fail(new ReplayCacheUnavailable(error));
      }
    }
    this.running = false;
  }

  /**
   * One statement for the batch: the keys it recorded (inserted, or an expired row taken over).
   * An id presented twice in one batch is recorded once (a statement may not touch a row twice):
   * its first presentation gets the answer, the others are refused.
   */
  private async record(batch: readonly Pending[]): Promise<Set<string>> {
    const rows = new Map<string, { namespace: string; id: string; expires_at: Date }>();
    for (const p of batch)
      if (!rows.has(keyOf(p.namespace, p.id)))
        rows.set(keyOf(p.namespace, p.id), { namespace: p.namespace, id: p.id, expires_at: p.expiresAt });
    const knex = knexOf(this.db);
    const recorded = (await knex("used_once_ids")
      .insert([...rows.values()])
      .onConflict(["namespace", "id"])
      .merge({ expires_at: knex.raw("excluded.expires_at") })
      .where("used_once_ids.expires_at", "<=", knex.fn.now())
      .returning(["namespace", "id"])) as Array<{ namespace: string; id: string }>;
    return new Set(recorded.map((r) => keyOf(r.namespace, r.id)));
  }

  private async sweep(): Promise<void> {
    const knex = knexOf(this.db);
    const expired = knex("used_once_ids")
      .select("namespace", "id")
      .where("expires_at", "<=", knex.fn.now())
      .limit(SWEEP_BATCH);
    await knex("used_once_ids").whereIn(["namespace", "id"], expired).delete();
  }
}

/** A batch's key of an id (the namespace never holds a NUL: it is one of the service's names). */
const keyOf = (namespace: string, id: string) => `${namespace}\u0000${id}`;

/** The replay caches' births, in the database a Redis flush cannot reach. */
export class PostgresReplayCacheBirths implements ReplayCacheBirths {
  constructor(private readonly db: Tx) {}

  async firstStart(name: string): Promise<boolean> {
    const rows = await knexOf(this.db)("replay_cache_births")
      .insert({ name })
      .onConflict("name")
      .ignore()
      .returning("name");
    return rows.length === 1;
  }
}
