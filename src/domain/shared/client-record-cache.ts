/** What the cache validates against: the current generation of each client (undefined: revoked or unknown). */
export interface CurrentGenerations {
  current(clientIds: readonly string[]): Promise<Map<string, number | undefined>>;
  /** The change number a shared cache must have seen to be believed; undefined while it cannot be. */
  believableFrom(): number | undefined;
}

/** What a held record must carry: whose it is, and the generation it was read at. */
export interface GenerationalRecord {
  readonly clientId: string;
  readonly credentialGeneration: number;
}

/**
 * Client records (API users', resource servers') kept in process so that authenticating does not
 * read Postgres. A record is used only while its credential generation is the current one, asked
 * of CredentialGenerations (one Redis round trip, Postgres whenever the cache cannot be believed):
 * rotation bumps the generation and revocation or removal removes it, and nothing else of a record
 * can change, so a record that passes the check is exactly what the database holds. Bounded,
 * least recently used out.
 */
export class ClientRecordCache<R extends GenerationalRecord> {
  private readonly records = new Map<string, R>();

  constructor(
    private readonly generations: CurrentGenerations,
    private readonly capacity: number,
  ) {}

  /** The client's record: the cached one if still current, otherwise `load()`'s (remembered when found). */
  async find(clientId: string, load: () => Promise<R | undefined>): Promise<R | undefined> {
    const cached = this.records.get(clientId);
    if (cached) {
      this.records.delete(clientId);
      const current = (await this.generations.current([clientId])).get(clientId);
      if (current === cached.credentialGeneration) {
        this.remember(cached);
        return cached;
      }
    }
    const loaded = await load();
    if (loaded) this.remember(loaded);
    return loaded;
  }

  /**
   * The record held for `clientId`, not yet checked: the caller has it checked against the
   * current generation, with `knownChange` (see CurrentGenerations.believableFrom), in the same
   * round trip as its rate limits. Undefined when none is held or the shared cache cannot be believed.
   */
  held(clientId: string): { record: R; knownChange: number } | undefined {
    const record = this.records.get(clientId);
    const knownChange = this.generations.believableFrom();
    if (!record || knownChange === undefined) return undefined;
    this.remember(record);
    return { record, knownChange };
  }

  get size(): number {
    return this.records.size;
  }

  private remember(record: R): void {
    this.records.delete(record.clientId);
    this.records.set(record.clientId, record);
    if (this.records.size > this.capacity) this.records.delete(this.records.keys().next().value!);
  }
}
