import pg from "pg";
import type { Logger } from "../../domain/shared/observability.js";
import type { ChangeFeed } from "../../domain/tokens/ports.js";
import { LocalChangeFeed } from "../memory/change-feed.js";
import type { StorageConfig } from "../settings.js";
import { credentialChangeChannel } from "./repositories/credential-change-log.js";
import { signingKeyChangeChannel } from "./repositories/signing-key-repository.js";

export interface PostgresChangeFeedOptions {
  readonly connectionString: string;
  readonly channel: string;
  /** Where signing-key changes are announced (one LISTEN connection carries both). */
  readonly signingKeyChannel: string;
  readonly reconnectMaxDelayMs: number;
}

/**
 * Every instance over one Postgres hears of every credential change (LISTEN on the schema's
 * channels); the embedded database has one instance, told in process.
 */
export function openChangeFeed(storage: StorageConfig, logger: Logger): ChangeFeed {
  if (!storage.databaseUrl) return new LocalChangeFeed();
  return new PostgresChangeFeed(
    {
      // LISTEN needs a session of its own: a transaction-mode pooler cannot carry it.
      connectionString: storage.databaseDirectUrl ?? storage.databaseUrl,
      channel: credentialChangeChannel(storage.databaseSchema),
      signingKeyChannel: signingKeyChangeChannel(storage.databaseSchema),
      reconnectMaxDelayMs: storage.redisReconnectMaxDelayMs,
    },
    logger,
  );
}

/**
 * Committed credential-change numbers, pushed by Postgres (LISTEN on one dedicated connection).
 * `connected` turns true only after LISTEN is in place and the caller has caught up with what it
 * may have missed (`onConnected`); it turns false the moment the connection fails.
 */
export class PostgresChangeFeed implements ChangeFeed {
  private client: pg.Client | undefined;
  private isConnected = false;
  private stopped = false;
  private attempts = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly signingKeyListeners: Array<() => void> = [];

  constructor(
    private readonly options: PostgresChangeFeedOptions,
    private readonly logger: Logger,
  ) {}

  get connected(): boolean {
    return this.isConnected;
  }

  onSigningKeyChange(listener: () => void): void {
    this.signingKeyListeners.push(listener);
  }

  start(onChange: (seq: number) => void, onConnected: () => Promise<void>): void {
    const connect = async () => {
      if (this.stopped) return;
      const client = new pg.Client({
        connectionString: this.options.connectionString,
        keepAlive: true,
        application_name: "auth-api-user-service/feed",
      });
      this.client = client;
      const lost = (error?: Error) => {
        if (this.client !== client) return;
        this.isConnected = false;
        this.client = undefined;
        client.removeAllListeners();
        client.on("error", () => {});
        void client.end().catch(() => {});
        if (this.stopped) return;
        if (this.attempts === 0)
          this.logger.warn(
            { err: { message: error?.message ?? "connection ended" } },
            "credential change feed lost; not believing the cache until it is back",
          );
        const delay = Math.min(100 * 2 ** this.attempts++, this.options.reconnectMaxDelayMs);
        this.timer = setTimeout(() => void connect(), delay);
        this.timer.unref();
      };
      client.on("error", lost);
      client.on("end", () => lost());
      client.on("notification", (message) => {
        if (message.channel === this.options.signingKeyChannel) return this.signingKeysChanged();
        const seq = Number(message.payload);
        if (Number.isSafeInteger(seq)) onChange(seq);
      });
      try {
        await client.connect();
        await client.query(`LISTEN ${quoted(this.options.channel)}`);
        await client.query(`LISTEN ${quoted(this.options.signingKeyChannel)}`);
        await onConnected();
        // A key change announced while the connection was down would otherwise wait for the periodic reload.
        this.signingKeysChanged();
        if (this.client !== client) return;
        if (this.attempts > 0) this.logger.info({}, "credential change feed connected again");
        this.attempts = 0;
        this.isConnected = true;
      } catch (error) {
        lost(error as Error);
      }
    };
    void connect();
  }

  private signingKeysChanged(): void {
    for (const listener of this.signingKeyListeners) listener();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.isConnected = false;
    if (this.timer) clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    if (client) {
      client.removeAllListeners();
      client.on("error", () => {});
      await client.end().catch(() => {});
    }
  }
}

const quoted = (identifier: string) => `"${identifier.replace(/"/g, '""')}"`;
