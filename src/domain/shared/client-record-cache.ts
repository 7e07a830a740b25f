import { LruMap } from "./lru-map.js";

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

/** How the cache remembers client ids the database did not know (the negative cache). */
export interface UnknownClientMemory {
  /** How long an unknown id is answered without reading Postgres again. */
  readonly ttlMs: number;
  /** Most unknown ids remembered; least recently seen out. */
  readonly capacity: number;
  /** Milliseconds clock. */
  readonly now: () => number;
}

/**
 * Unknown ids are remembered for 5 s: a flood of made-up client ids repeated costs one database
 * read per id and 5 s, not one per request. Safe without any announcement of creations: client
 * ids are 128 random bits generated at creation and shown only once it committed, so no instance
 * can have met a client's id before that client existed (the ttl bounds what only an operator
 * could cause: a restore or import that brings back ids already presented).
 */
export const UNKNOWN_CLIENTS: Omit<UnknownClientMemory, "now"> = { ttlMs: 5_000, capacity: 10_000 };

/**
 * Client records (API users', resource servers') kept in process so that authenticating does not
 * read Postgres. A record is used only while its credential generation is the current one, asked
 * of CredentialGenerations (one Redis round trip, Postgres whenever the cache cannot be believed):
 * rotation bumps the generation and revocation or removal removes it, and nothing else of a record
 * can change, so a record that passes the check is exactly what the database holds. Bounded,
 * least recently used out.
 */
export class ClientRecordCache<R extends GenerationalRecord> {
  private readonly records: LruMap<string, R>;
  /** Ids the database did not know, with when that answer expires. */
  private readonly unknown: LruMap<string, number>;

  constructor(
    private readonly generations: CurrentGenerations,
    capacity: number,
    private readonly unknownClients: UnknownClientMemory = { ...UNKNOWN_CLIENTS, now: () => performance.now() },
  ) {
    this.records = new LruMap(capacity);
    this.unknown = new LruMap(unknownClients.capacity);
  }

  /**
   * The client's record: the cached one if still current, otherwise `load()`'s (remembered when
   * found; when not, the id is remembered as unknown for a few seconds, see UNKNOWN_CLIENTS).
   */
  async find(clientId: string, load: () => Promise<R | undefined>): Promise<R | undefined> {
    if (this.knownUnknown(clientId)) return undefined;
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
    else this.rememberUnknown(clientId);
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

  private knownUnknown(clientId: string): boolean {
    const expiresAt = this.unknown.get(clientId);
    if (expiresAt === undefined) return false;
    if (expiresAt > this.unknownClients.now()) return true;
    this.unknown.delete(clientId);
    return false;
  }

  private rememberUnknown(clientId: string): void {
    this.unknown.set(clientId, this.unknownClients.now() + this.unknownClients.ttlMs);
  }

  private remember(record: R): void {
    this.records.set(record.clientId, record);
  }
}
