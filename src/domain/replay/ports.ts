/**
 * Identifiers that may be presented once only (a client assertion's or a DPoP proof's `jti`),
 * remembered until they expire. Every instance shares it: Redis where one is configured, else the
 * database (the embedded default, one instance).
 */
export interface ReplayCache {
  /**
   * True the first time `id` is presented in `namespace` before `expiresAt`; false when it was
   * presented before, or when the cache cannot rule that out (it was found emptied — a Redis
   * flush or restart — and `id` could have been used before). Throws `ReplayCacheUnavailable`
   * when it cannot answer: the caller fails closed.
   */
  useOnce(namespace: string, id: string, expiresAt: Date): Promise<boolean>;
}

/**
 * Which stores a cache was ever started on, kept where a Redis flush cannot reach (Postgres): a
 * Redis found empty of its marker is new (nothing to forget) or was emptied (refuse what it
 * could have seen) — only this record tells which.
 */
export interface ReplayCacheBirths {
  /** Records `name` as started; true when it was not recorded before (this is its first start). */
  firstStart(name: string): Promise<boolean>;
}

/** The longest lifetime an id may have in any namespace: what a cache found emptied must cover. */
export const REPLAY_WINDOW_MS = 5 * 60_000;

/** The replay cache could not answer (its store is out of reach): the presented id is refused. */
export class ReplayCacheUnavailable extends Error {
  constructor(cause: unknown) {
    super("the replay cache did not answer", { cause });
    this.name = "ReplayCacheUnavailable";
  }
}
