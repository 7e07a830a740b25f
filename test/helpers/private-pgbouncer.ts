import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { freePort } from "./free-port.js";
import { stopAtExit } from "./stop-at-exit.js";

/**
 * A throwaway PgBouncer (Debian's `pgbouncer`, 1.18) in transaction mode on a private loopback
 * port, in front of one Postgres database: each transaction gets whichever server connection is
 * free, startup parameters other than the usual few are refused, and session state (SET,
 * search_path, LISTEN, session advisory locks) does not follow a client. PgBouncer refuses to run
 * as root; as root it runs as the `postgres` user (setpriv, so the process we hold is PgBouncer's
 * own and stopping it stops the pooler). Stopped by `stop()`, at the latest when this process exits.
 */
export interface PrivatePgbouncer {
  /** The pooler's URL for the target's database, with the target's user. */
  readonly url: string;
  stop(): void;
}

const PGBOUNCER = process.env.PGBOUNCER_BIN ?? "/usr/sbin/pgbouncer";

export async function startPrivatePgbouncer(targetUrl: string): Promise<PrivatePgbouncer> {
  const target = new URL(targetUrl);
  const database = decodeURIComponent(target.pathname.slice(1));
  const user = decodeURIComponent(target.username) || "postgres";
  // Not newTempDir: backend.ts starts this pooler while it loads, so this file cannot import it.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "auth-svc-pgbouncer-"));
  const port = await freePort();
  const config = path.join(dir, "pgbouncer.ini");
  const users = path.join(dir, "userlist.txt");
  fs.writeFileSync(users, `"${user}" ""\n`);
  fs.writeFileSync(
    config,
    [
      "[databases]",
      `${database} = host=${target.hostname} port=${target.port || 5432} dbname=${database}`,
      "[pgbouncer]",
      "pool_mode = transaction",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = trust",
      `auth_file = ${users}`,
      // The tests' instances each open pools of their own: many clients, few server connections.
      "max_client_conn = 2000",
      "default_pool_size = 20",
      "logfile =",
      "pidfile =",
      "",
    ].join("\n"),
  );
  fs.chmodSync(dir, 0o755);
  for (const file of [config, users]) fs.chmodSync(file, 0o644);
  const log = fs.openSync(path.join(dir, "log"), "a");
  const asRoot = process.getuid?.() === 0;
  const command = asRoot
    ? ["setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups", PGBOUNCER, config]
    : [PGBOUNCER, config];
  const child = spawn(command[0]!, command.slice(1), { stdio: ["ignore", log, log], detached: false });
  child.unref();
  fs.closeSync(log);
  const stop = stopAtExit(() => {
    try {
      child.kill("SIGINT"); // PgBouncer's immediate shutdown.
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      const output = fs.readFileSync(path.join(dir, "log"), "utf8");
      stop();
      throw new Error(`pgbouncer did not start: ${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { url: `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${encodeURIComponent(database)}`, stop };
}

/** Whether the machine has the pooler (`.ci/run` installs it). */
export function pgbouncerInstalled(): boolean {
  try {
    execFileSync(PGBOUNCER, ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
