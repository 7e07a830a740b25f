import type { Service } from "./app/compose.js";
import { SchemaBehindError } from "./app/schema-wait.js";
import { DatabaseUnreachableError } from "./app/startup-retry.js";
import { ConfigError, loadConfig, type Config } from "./config/config.js";
import { removeServerRecord, serverRecordFile, writeServerRecord } from "./store/server-record.js";
import { DataDirUnwritableError } from "./store/data-dir.js";
import { DataDirBusyError, ownDataDir } from "./store/data-dir-lock.js";
import { MigrationLockTimeoutError } from "./store/postgres/migration-lock.js";

/**
 * Starts one instance. SIGTERM/SIGINT: drain (SHUTDOWN_DRAIN_MS: /readyz 503 and gRPC health
 * NOT_SERVING while everything is still served, so a load balancer takes the instance out), then
 * stop accepting, close kept-alive connections gracefully (`Connection: close`, HTTP/2 GOAWAY),
 * let in-flight requests finish (up to SHUTDOWN_TIMEOUT_MS), close pools, exit 0. A second signal
 * ends the drain at once.
 */
/** The oldest Node major this service runs on: older lines no longer get security fixes. */
const MINIMUM_NODE_MAJOR = 24;

async function main(): Promise<void> {
  const major = Number(process.versions.node.split(".")[0]);
  if (major < MINIMUM_NODE_MAJOR) {
    // npm start and npm test use the pinned runtime in node_modules/.bin; a bare `node` may be older.
    throw new ConfigError(
      `Node ${process.versions.node} is not supported: run on Node ${MINIMUM_NODE_MAJOR}+ (npm start uses the pinned node_modules/.bin/node)`,
    );
  }
  const config = loadConfig();
  // DATA_DIR is claimed before the service's modules load (seconds on a busy machine): a CLI run in
  // another terminal at the same moment sees a server starting there and waits for it.
  const dataDirClaim = config.storage.databaseUrl ? undefined : ownDataDir(config.storage.dataDir);
  const { createService } = await import("./app/compose.js");
  const service = await createService(config, { dataDirClaim });
  const address = await service.listen();
  recordServer(service, config, address);
  const stop = drainThenStop(service, config);
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  // Announced only once a signal can stop it gracefully.
  service.app.log.info(
    { address, adminAddress: service.adminAddress, ...service.about },
    "service listening (REST over HTTP/1.1; gRPC, gRPC-Web and Connect on the same port)",
  );
}

/**
 * Leaves where this server listens in DATA_DIR, for the CLI of another terminal on this host. Only
 * a convenience: an instance on Postgres whose DATA_DIR cannot be written (a read-only container
 * filesystem) warns once and serves; a CLI then reaches it through SERVER_URL/ADMIN_URL.
 */
function recordServer(service: Service, config: Config, address: string): void {
  const { dataDir } = config.storage;
  try {
    writeServerRecord(dataDir, { url: address, adminUrl: service.adminAddress, pid: process.pid });
  } catch (error) {
    const code = error instanceof DataDirUnwritableError ? error.code : (error as NodeJS.ErrnoException).code;
    service.app.log.warn(
      { file: serverRecordFile(dataDir), code },
      `DATA_DIR ${dataDir} is not writable (${code}): ${serverRecordFile(dataDir)} not written; ` +
        "a CLI on this host finds this server only through SERVER_URL/ADMIN_URL",
    );
  }
}

/**
 * The signal handler: the first signal drains (SHUTDOWN_DRAIN_MS), then closes and exits; a second
 * one ends the drain at once. The whole shutdown is bounded by SHUTDOWN_DEADLINE_MS.
 */
function drainThenStop(service: Service, config: Config): (signal: string) => void {
  let stopping = false;
  let endDrain: (() => void) | undefined;
  const stop = (signal: string) => {
    if (stopping) {
      // A second signal: the operator does not want to wait for the drain.
      if (endDrain) service.app.log.info({ signal }, "drain cut short");
      endDrain?.();
      return;
    }
    stopping = true;
    const { shutdownDrainMs } = config.http;
    service.app.log.info({ signal, drainMs: shutdownDrainMs }, "shutting down");
    const deadline = setTimeout(() => {
      service.app.log.error("shutdown timed out; exiting");
      process.exit(1);
    }, config.http.shutdownDeadlineMs);
    deadline.unref();
    removeServerRecord(config.storage.dataDir, process.pid);
    service.drain();
    const drained = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, shutdownDrainMs);
      endDrain = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    drained
      .then(() => {
        endDrain = undefined;
        service.app.log.info("drained; closing connections");
        return service.close();
      })
      .then(
        () => process.exit(0),
        (error: unknown) => {
          service.app.log.error({ err: error }, "shutdown failed");
          process.exit(1);
        },
      );
  };
  return stop;
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof DataDirBusyError || error instanceof DataDirUnwritableError) {
    process.stderr.write(`configuration error: ${error.message}\n`);
    process.exit(2);
  }
  // Expected ends of a start, said plainly (their message says what to do), not as a crash.
  if (
    error instanceof SchemaBehindError ||
    error instanceof MigrationLockTimeoutError ||
    error instanceof DatabaseUnreachableError
  ) {
    process.stderr.write(`failed to start: ${error.message}\n`);
    process.exit(1);
  }
  process.stderr.write(`failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
