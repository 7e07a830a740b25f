import type { CredentialState } from "../../domain/tokens/model.js";
import type { GenerationCache, WatermarkRaise } from "../../domain/tokens/ports.js";

/**
 * The embedded default's twin of the Redis cache, with the same rules (a state never replaces
 * one with a higher change number; the watermark rises only over changes it has all seen). One
 * process owns the embedded database, so it never misses a change.
 */
export class MemoryGenerationCache implements GenerationCache {
  private readonly states = new Map<string, CredentialState>();
  private watermark = 0;

  async read(clientIds: readonly string[]): Promise<{ states: Array<CredentialState | undefined>; watermark: number }> {
    return { states: clientIds.map((id) => this.states.get(id)), watermark: this.watermark };
  }

  async write(states: ReadonlyMap<string, CredentialState>, watermark?: WatermarkRaise): Promise<void> {
    for (const [id, state] of states) {
      if (state.changeSeq >= (this.states.get(id)?.changeSeq ?? -1)) this.states.set(id, state);
    }
    if (watermark && watermark.to > this.watermark && this.watermark >= watermark.ifAtLeast)
      this.watermark = watermark.to;
  }
}
