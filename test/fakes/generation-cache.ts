import type { CredentialState } from "../../src/domain/tokens/model.js";
import type { GenerationCache, WatermarkRaise } from "../../src/domain/tokens/ports.js";

/** The cache's whole contents at one moment (what an RDB snapshot would hold). */
export interface CacheSnapshot {
  readonly states: ReadonlyMap<string, CredentialState>;
  readonly watermark: number;
}

/**
 * The GenerationCache port (Redis in production) with the rules of RedisGenerationCache's write
 * script and of MemoryGenerationCache (a state never replaces one with a higher change number;
 * the watermark rises to `raise.to` only when asked and only if it already covers
 * `raise.ifAtLeast`; a write without a raise — a fill — never moves it), as a store a test can
 * break:
 *
 * - `readFailure` / `writeFailure` make every read / write throw while set (Redis down, a
 *   READONLY replica: reads may keep working while writes fail);
 * - `loseWrites`: writes are acknowledged but never land (a primary that dies before its replica
 *   got them);
 * - `snapshot()` / `restore()`: Redis restarted from an earlier RDB snapshot — states and
 *   watermark roll back together;
 * - `evict()`: a key's TTL ran out;
 * - hooks run where a concurrent change would land: after a read has its answer, around a write.
 *
 * Every call is recorded (`reads`, `writes`) so tests can assert what reached the cache.
 */
export class FakeGenerationCache implements GenerationCache {
  readonly states = new Map<string, CredentialState>();
  watermark = 0;
  /** Thrown by every `read` while set. */
  readFailure: Error | undefined;
  /** Thrown by every `write` while set. */
  writeFailure: Error | undefined;
  /** While true, writes succeed but change nothing. */
  loseWrites = false;
  /** Runs after `read` has its answer and before it returns it. */
  afterRead: ((clientIds: readonly string[]) => void | Promise<void>) | undefined;
  /** Runs before `write` applies (after the failure check). */
  beforeWrite:
    | ((states: ReadonlyMap<string, CredentialState>, watermark: WatermarkRaise | undefined) => void | Promise<void>)
    | undefined;
  /** Runs after `write` applied, before it returns. */
  afterWrite:
    | ((states: ReadonlyMap<string, CredentialState>, watermark: WatermarkRaise | undefined) => void | Promise<void>)
    | undefined;

  readonly reads: Array<{ clientIds: string[]; failed: boolean }> = [];
  /**
   * Every write: its states, the raise it asked for (undefined for a fill), whether it failed or
   * was lost, and `raised`: whether the watermark actually rose (false for a fill, a refused
   * raise, a failed or a lost write).
   */
  readonly writes: Array<{
    states: Map<string, CredentialState>;
    watermark: WatermarkRaise | undefined;
    failed: boolean;
    lost: boolean;
    raised: boolean;
  }> = [];

  async read(clientIds: readonly string[]): Promise<{ states: Array<CredentialState | undefined>; watermark: number }> {
    this.reads.push({ clientIds: [...clientIds], failed: this.readFailure !== undefined });
    if (this.readFailure) throw this.readFailure;
    const answer = { states: clientIds.map((id) => copy(this.states.get(id))), watermark: this.watermark };
    await this.afterRead?.(clientIds);
    return answer;
  }

  async write(states: ReadonlyMap<string, CredentialState>, watermark?: WatermarkRaise): Promise<void> {
    const failed = this.writeFailure !== undefined;
    const lost = !failed && this.loseWrites;
    const record = {
      states: new Map([...states].map(([id, s]) => [id, { ...s }])),
      watermark: watermark && { to: watermark.to, ifAtLeast: watermark.ifAtLeast },
      failed,
      lost,
      raised: false,
    };
    this.writes.push(record);
    if (this.writeFailure) throw this.writeFailure;
    await this.beforeWrite?.(states, watermark);
    if (!lost) {
      for (const [id, state] of states) {
        if (state.changeSeq >= (this.states.get(id)?.changeSeq ?? -1)) this.states.set(id, { ...state });
      }
      // Exactly MemoryGenerationCache's rule (and the Redis script's): rise only over changes it has all seen.
      if (watermark && watermark.to > this.watermark && this.watermark >= watermark.ifAtLeast) {
        this.watermark = watermark.to;
        record.raised = true;
      }
    }
    await this.afterWrite?.(states, watermark);
  }

  /** A copy of everything the cache holds now. */
  snapshot(): CacheSnapshot {
    return { states: new Map([...this.states].map(([id, s]) => [id, { ...s }])), watermark: this.watermark };
  }

  /** Redis restarted from `snapshot`: every later write is gone, the watermark with them. */
  restore(snapshot: CacheSnapshot): void {
    this.states.clear();
    for (const [id, state] of snapshot.states) this.states.set(id, { ...state });
    this.watermark = snapshot.watermark;
  }

  /** The TTL of these keys ran out (the watermark has none). */
  evict(...clientIds: string[]): void {
    for (const id of clientIds) this.states.delete(id);
  }

  /** The generation cached for `clientId`: a number, "revoked", or undefined when absent. */
  generationOf(clientId: string): number | "revoked" | undefined {
    const state = this.states.get(clientId);
    return state === undefined ? undefined : (state.generation ?? "revoked");
  }
}

function copy(state: CredentialState | undefined): CredentialState | undefined {
  return state && { ...state };
}
