import type { CachedGeneration } from "../../src/domain/tokens/model.js";
import type { GenerationCache } from "../../src/domain/tokens/ports.js";

/**
 * The GenerationCache port (Redis in production) as a map a test can break: `getFailure` /
 * `putFailure` make reads / writes throw, `trusted` and `reachable` are plain switches, and the
 * hooks run at the point a concurrent change would land (after a read answered, before a write).
 * Every call is recorded so tests can assert what reached the cache.
 */
export class FailingGenerationCache implements GenerationCache {
  readonly values = new Map<string, CachedGeneration>();
  trusted = true;
  reachable = true;
  /** Thrown by every `get` while set. */
  getFailure: Error | undefined;
  /** Thrown by every `put` while set. */
  putFailure: Error | undefined;
  /** Runs after `get` has read its answer and before it returns it. */
  afterGet: ((clientIds: readonly string[]) => void | Promise<void>) | undefined;
  /** Runs before `put` writes. */
  beforePut: ((values: ReadonlyMap<string, CachedGeneration>) => void | Promise<void>) | undefined;
  /** Runs after `put` has written, before it returns (e.g. between a publication and its transaction's commit). */
  afterPut: ((values: ReadonlyMap<string, CachedGeneration>) => void | Promise<void>) | undefined;

  readonly gets: string[][] = [];
  readonly puts: Array<{ values: Map<string, CachedGeneration>; onlyIfAbsent: boolean; failed: boolean }> = [];
  markTrustedCalls = 0;

  async get(clientIds: readonly string[]): Promise<Array<CachedGeneration | undefined>> {
    this.gets.push([...clientIds]);
    if (this.getFailure) throw this.getFailure;
    const answer = clientIds.map((id) => this.values.get(id));
    await this.afterGet?.(clientIds);
    return answer;
  }

  async put(values: ReadonlyMap<string, CachedGeneration>, options: { onlyIfAbsent: boolean }): Promise<void> {
    const failed = this.putFailure !== undefined;
    this.puts.push({ values: new Map(values), onlyIfAbsent: options.onlyIfAbsent, failed });
    if (this.putFailure) throw this.putFailure;
    await this.beforePut?.(values);
    for (const [id, generation] of values) {
      if (!options.onlyIfAbsent || !this.values.has(id)) this.values.set(id, generation);
    }
    await this.afterPut?.(values);
  }

  markTrusted(): void {
    this.markTrustedCalls += 1;
    this.trusted = true;
  }
}
