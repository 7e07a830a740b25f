/**
 * Resources in the order they were started; `stop` releases them in reverse, each once, even
 * when an earlier stop failed (the first failure is rethrown after all have run). A composition
 * that fails half-way stops what it had started.
 */
export class Lifecycle {
  private readonly stops: Array<{ name: string; stop: () => Promise<void> | void }> = [];
  private stopping: Promise<void> | undefined;

  /** Registers how to release a resource that has just been started. */
  started(name: string, stop: () => Promise<void> | void): void {
    this.stops.push({ name, stop });
  }

  /** Idempotent: later calls wait for the first. */
  stop(): Promise<void> {
    this.stopping ??= this.stopAll();
    return this.stopping;
  }

  private async stopAll(): Promise<void> {
    let failure: unknown;
    for (const { stop } of this.stops.reverse()) {
      try {
        await stop();
      } catch (error) {
        failure ??= error;
      }
    }
    // The first stop's failure, rethrown as it was caught.
    // eslint-disable-next-line @typescript-eslint/only-throw-error
    if (failure !== undefined) throw failure;
  }
}
