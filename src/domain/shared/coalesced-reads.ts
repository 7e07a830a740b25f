/**
 * Reads of keyed states that many concurrent callers need at once, as few reads as can answer them
 * all: calls that arrive while a read runs wait for the next one, which reads every id they asked
 * for in one go. At most one read runs at a time, whatever the number of callers.
 *
 * Why: when the shared cache cannot be used (Redis down, its breaker open for an event-loop stall),
 * every authenticated request reads its credential state from Postgres, and those reads come before
 * admission (the party is not known until the token is checked). Two hundred requests in flight
 * then queued two hundred pool acquisitions, and another tenant's reads timed out behind them.
 * Coalesced, they take one connection.
 *
 * A read answers only the calls that arrived before it started, never one that arrived while it
 * ran: a revocation committed just before a call must be seen by that call. DataLoader batches
 * per tick but starts a batch while another runs, and would let a call join a read already under
 * way through its cache; neither fits, so this is the few lines of our own.
 */
export class CoalescedReads<K, V> {
  /** The read that has not started yet: the ids it will read, and the callers waiting for it. */
  #next: { readonly ids: Set<K>; readonly answer: Promise<Map<K, V>> } | undefined;
  /** Settles when the read under way (if any) has ended. */
  #running: Promise<unknown> = Promise.resolve();

  /** `maxIds` bounds one read (a query's bind parameters); a call that would pass it waits for the read after. */
  constructor(
    private readonly read: (ids: readonly K[]) => Promise<Map<K, V>>,
    private readonly maxIds = 1_000,
  ) {}

  /** The states of `ids`, from a read that started after this call. */
  async get(ids: readonly K[]): Promise<Map<K, V>> {
    const next =
      this.#next !== undefined && this.#next.ids.size + ids.length <= this.maxIds ? this.#next : this.#schedule();
    for (const id of ids) next.ids.add(id);
    return next.answer;
  }

  #schedule(): { readonly ids: Set<K>; readonly answer: Promise<Map<K, V>> } {
    const ids = new Set<K>();
    // It starts once the read under way has ended (or at the next microtask when none runs), so
    // every call until then joins it; from the moment it starts, callers gather for the one after.
    const answer = this.#running.then(() => {
      if (this.#next?.ids === ids) this.#next = undefined;
      return this.read([...ids]);
    });
    this.#running = answer.catch(() => undefined);
    const next = { ids, answer };
    this.#next = next;
    return next;
  }
}
