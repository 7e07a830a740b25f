// Shared by the baseline servers: each runs as its own child process (`node --import tsx
// bench/baselines/<name>.ts`), so the bench measures its CPU and memory exactly as the service's.
// Clients come from BENCH_CLIENTS (JSON [{clientId, clientSecret}], generated per run by the
// bench); the process listens on 127.0.0.1:0 and prints one line, {"listening": "http://…"},
// on stdout once it accepts connections. SIGTERM and SIGINT close it, and so does the bench's exit.
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface BenchClient {
  readonly clientId: string;
  readonly clientSecret: string;
}

export function benchClients(): BenchClient[] {
  const raw = process.env.BENCH_CLIENTS;
  if (!raw) throw new Error("BENCH_CLIENTS is not set (the bench passes the generated clients)");
  const clients = JSON.parse(raw) as BenchClient[];
  if (!Array.isArray(clients) || clients.length === 0) throw new Error("BENCH_CLIENTS holds no clients");
  return clients;
}

/** Prints the address line the bench waits for, and closes the server on SIGTERM/SIGINT. */
export function announce(
  server: Server,
  close: () => Promise<void> = () => new Promise((r) => server.close(() => r())),
): void {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ listening: `http://127.0.0.1:${port}` })}\n`);
  let closing = false;
  const stop = () => {
    if (closing) return;
    closing = true;
    server.closeAllConnections?.();
    void close().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 3_000).unref();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  // Orphaned (the bench was killed with SIGKILL): do not linger.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) stop();
  }, 1_000).unref();
}
