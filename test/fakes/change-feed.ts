import type { ChangeFeed } from "../../src/domain/tokens/ports.js";

/** Where the feed hears NOTIFY payloads from: PGlite's (test/fakes/pglite-store.ts), or a LISTEN on Postgres (test/store). */
export interface NotificationSource {
  listen(listener: (payload: string) => void): () => void;
}

/** The payload a signing-key change is announced with (any other payload is a credential-change number). */
export const SIGNING_KEY_CHANGE = "signing-keys";

/**
 * The ChangeFeed port (PostgresChangeFeed: LISTEN on a dedicated connection) over the
 * database's NOTIFY (PGlite's, or Postgres' through a LISTEN), with PostgresChangeFeed's rules and a test's hands on the connection:
 *
 * - `connect()` puts LISTEN in place, runs the caller's `onConnected` (catching up), and only then
 *   turns `connected` true; `start` connects at once unless `{ autoConnect: false }`.
 * - `disconnect()` loses the connection: `connected` turns false at once and notifications sent
 *   until the next `connect()` are lost (`dropped`), as they are for a dropped LISTEN session.
 * - `withhold()` keeps arriving notifications in flight (`held`) until `deliverHeld()`: the
 *   latency between a commit and the moment an instance hears of it.
 *
 * Every notification is recorded where it went: `delivered`, `dropped` or `held`.
 */
export class FakeChangeFeed implements ChangeFeed {
  readonly delivered: number[] = [];
  readonly dropped: number[] = [];
  readonly held: number[] = [];
  /** How many times `onConnected` finished (1 after the first connection). */
  connections = 0;
  /** The connection in progress (or the last one). */
  connecting: Promise<void> = Promise.resolve();
  private isConnected = false;
  private listening = false;
  private withholding = false;
  private stopped = false;
  private onChange: ((seq: number) => void) | undefined;
  private onConnected: (() => Promise<void>) | undefined;
  private unlisten: (() => void) | undefined;
  private readonly signingKeyListeners: Array<() => void> = [];
  /** Signing-key changes handed to the instance (the rest are lost with the connection, as change numbers are). */
  signingKeyChangesDelivered = 0;

  constructor(
    private readonly db: NotificationSource,
    private readonly options: { autoConnect?: boolean } = {},
  ) {}

  get connected(): boolean {
    return this.isConnected;
  }

  onSigningKeyChange(listener: () => void): void {
    this.signingKeyListeners.push(listener);
  }

  start(onChange: (seq: number) => void, onConnected: () => Promise<void>): void {
    if (this.onChange) throw new Error("fake change feed: started twice");
    this.onChange = onChange;
    this.onConnected = onConnected;
    this.unlisten = this.db.listen((payload) =>
      payload === SIGNING_KEY_CHANGE ? this.receiveSigningKeyChange() : this.receive(Number(payload)),
    );
    if (this.options.autoConnect ?? true) void this.connect().catch(() => {});
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.isConnected = false;
    this.listening = false;
    this.unlisten?.();
  }

  /** (Re)connects: LISTEN, then the caller catches up, then `connected`. Rejects (and stays disconnected) if catching up fails. */
  connect(): Promise<void> {
    if (!this.onConnected) throw new Error("fake change feed: connect before start");
    if (this.stopped) throw new Error("fake change feed: stopped");
    const onConnected = this.onConnected;
    this.listening = true;
    this.connecting = (async () => {
      try {
        await onConnected();
      } catch (error) {
        this.listening = false;
        throw error;
      }
      if (!this.listening) return; // lost again while catching up
      this.connections += 1;
      this.isConnected = true;
      // As PostgresChangeFeed: a key change may have been missed while disconnected.
      for (const listener of this.signingKeyListeners) listener();
    })();
    return this.connecting;
  }

  /** The connection is lost: not connected, and what is sent (or was in flight) is lost. */
  disconnect(): void {
    this.isConnected = false;
    this.listening = false;
    this.dropped.push(...this.held.splice(0));
  }

  /** From now on arriving notifications wait in `held`. */
  withhold(): void {
    this.withholding = true;
  }

  /** Hands every held notification to the instance, and stops withholding. */
  deliverHeld(): void {
    this.withholding = false;
    for (const seq of this.held.splice(0)) this.hand(seq);
  }

  private receiveSigningKeyChange(): void {
    if (!this.listening) return;
    this.signingKeyChangesDelivered += 1;
    for (const listener of this.signingKeyListeners) listener();
  }

  private receive(seq: number): void {
    if (!Number.isSafeInteger(seq)) return;
    if (!this.listening) this.dropped.push(seq);
    else if (this.withholding) this.held.push(seq);
    else this.hand(seq);
  }

  private hand(seq: number): void {
    this.delivered.push(seq);
    this.onChange!(seq);
  }
}
