import { after } from "node:test";
import type { Socket } from "node:net";
import pg from "pg";

/**
 * Loaded into every test process (test/run.sh: --import). Once a file's last test has ended, its
 * process should exit within seconds; a handle it leaked (a socket, a timer) would keep it alive
 * and the runner would wait for it for ever (CI once hung 17 min on one Postgres connection).
 * The timer is unref'd, so a healthy process never waits for it: it fires only in a process that
 * something else keeps alive, then names what does (for a Postgres socket, the server's view of
 * that connection) and fails the file instead of hanging the run.
 */
const GRACE_MS = Number(process.env.TEST_EXIT_GRACE_MS ?? 60_000);

after(() => {
  setTimeout(() => void reportAndExit(), GRACE_MS).unref();
});

async function reportAndExit(): Promise<void> {
  const lines = [`exit watchdog: still running ${GRACE_MS} ms after the last test ended; what keeps it alive:`];
  lines.push(`  resources: ${process.getActiveResourcesInfo().join(", ")}`);
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  for (const handle of handles) {
    const socket = handle as Partial<Socket>;
    if (typeof socket.remotePort !== "number") continue;
    lines.push(`  socket ${socket.localPort} -> ${socket.remoteAddress}:${socket.remotePort}`);
    if (socket.remotePort === 5432) lines.push(`    postgres: ${await describePostgresConnection(socket.localPort)}`);
  }
  process.stderr.write(`${lines.join("\n")}\n`);
  process.exit(1);
}

async function describePostgresConnection(clientPort: number | undefined): Promise<string> {
  const { TEST_DATABASE_URL } = await import("./backend.js");
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  try {
    await client.connect();
    const { rows } = await client.query(
      "select application_name, state, backend_start, state_change, left(query, 200) as query from pg_stat_activity where client_port = $1",
      [clientPort],
    );
    return JSON.stringify(rows[0] ?? "no such connection on the server");
  } catch (error) {
    return `could not ask the server: ${(error as Error).message}`;
  } finally {
    await client.end().catch(() => {});
  }
}
