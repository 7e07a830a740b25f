import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../domain/shared/observability.js";
import type { Database } from "../store/postgres/database.js";

/** Thrown when the schema is still behind the code at the end of the wait. */
export class SchemaBehindError extends Error {
  /**
   * `neverMigrated`: no migration was ever applied to the schema (a new schema, or a wrong
   * DATABASE_SCHEMA), said first and plainly instead of a list of every migration there is.
   */
  constructor(pending: readonly string[], waitedMs: number, embedded: boolean, neverMigrated = false) {
    const how = embedded
      ? "the embedded database is this process's alone: stop it and run the CLI's `migrate`, or start with MIGRATE_ON_START=true"
      : "run the migration job (the CLI's `migrate`) or start with MIGRATE_ON_START=true; MIGRATION_WAIT_TIMEOUT_MS bounds the wait";
    super(
      neverMigrated
        ? `the schema is not migrated: no migration applied after ${waitedMs} ms (${pending.length} pending); ${how}`
        : `the database schema is behind this version after ${waitedMs} ms: ${pending.length} migration(s) pending ` +
            `(${pending.join(", ")}); ${how}`,
    );
    this.name = "SchemaBehindError";
  }
}

export interface SchemaWaitOptions {
  readonly timeoutMs: number;
  readonly logger: Logger;
  readonly pollMs?: number;
  /** Least time between two "waiting" log lines (the first is logged at once). */
  readonly logEveryMs?: number;
}

/**
 * With MIGRATE_ON_START=false a separate job migrates (the fleets' `migrate` + `serve` split): a
 * start whose code is ahead of the schema waits for the job, not ready (it opens no port), and
 * says which migrations it waits for; once none is pending it starts, and if the bound passes
 * first it fails, so the orchestrator's rollout stops on a clear message. A schema AHEAD of the
 * code (a newer version migrated, expand/contract) is fine: this version runs on it. The
 * embedded database cannot be migrated by anyone else while this process owns it: no wait.
 */
export async function awaitCurrentSchema(database: Database, options: SchemaWaitOptions): Promise<void> {
  const { logger, pollMs = 1_000, logEveryMs = 5_000 } = options;
  const embedded = database.kind === "pglite";
  const timeoutMs = embedded ? 0 : options.timeoutMs;
  const started = Date.now();
  let loggedAt: number | undefined;
  for (;;) {
    const pending = await database.pendingMigrations();
    const waitedMs = Date.now() - started;
    if (pending.length === 0) {
      if (loggedAt !== undefined) logger.info({ waitedMs }, "start-up: the schema is current; starting");
      return;
    }
    if (waitedMs >= timeoutMs) {
      // Loaded here, not at the top: main.ts imports this module before the service's modules load.
      const { migrationSource } = await import("../store/postgres/migrations/index.js");
      const known = await migrationSource.getMigrations([]);
      throw new SchemaBehindError(pending, waitedMs, embedded, pending.length === known.length);
    }
    if (loggedAt === undefined || Date.now() - loggedAt >= logEveryMs) {
      loggedAt = Date.now();
      logger.warn(
        { pending, waitedMs, timeoutMs },
        `start-up: waiting for the migration job (MIGRATE_ON_START=false): ${pending.length} migration(s) pending`,
      );
    }
    await sleep(Math.min(pollMs, timeoutMs - waitedMs));
  }
}
