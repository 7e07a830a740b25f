import type { ChangeFeed } from "../../domain/tokens/ports.js";

/**
 * The embedded default has one instance, which publishes its own changes to its own cache: there
 * is nobody to hear from, so it is always connected.
 */
export class LocalChangeFeed implements ChangeFeed {
  readonly connected = true;

  /** The one instance reloads its own keys after rotating them: there is nobody else to hear from. */
  onSigningKeyChange(_listener: () => void): void {}

  start(_onChange: (seq: number) => void, onConnected: () => Promise<void>): void {
    void onConnected().catch(() => {});
  }

  async stop(): Promise<void> {}
}
