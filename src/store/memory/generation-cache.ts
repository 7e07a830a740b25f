import type { CachedGeneration } from "../../domain/tokens/model.js";
import type { GenerationCache } from "../../domain/tokens/ports.js";

/**
 * The embedded default's twin of the Redis generation cache: one process owns the embedded
 * database, so an in-process map sees every change and is always trusted.
 */
export class MemoryGenerationCache implements GenerationCache {
  private readonly values = new Map<string, CachedGeneration>();
  readonly trusted = true;
  readonly reachable = true;

  markTrusted(): void {}

  async get(clientIds: readonly string[]): Promise<Array<CachedGeneration | undefined>> {
    return clientIds.map((id) => this.values.get(id));
  }

  async put(values: ReadonlyMap<string, CachedGeneration>, options: { onlyIfAbsent: boolean }): Promise<void> {
    for (const [id, generation] of values) {
      if (!options.onlyIfAbsent || !this.values.has(id)) this.values.set(id, generation);
    }
  }
}
