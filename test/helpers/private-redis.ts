import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import { createClient } from "redis";
import { newTempDir, removeTempDir } from "./backend.js";

/**
 * A throwaway redis-server on a private loopback port with its own data directory, for tests
 * that kill, stall or roll back Redis. The machine's shared Redis is never touched.
 */
export interface PrivateRedis {
  readonly port: number;
  readonly url: string;
  /** Writes a snapshot (dump.rdb) of what it holds now. */
  snapshot(): Promise<void>;
  /** SIGKILL, then start again on the same port and directory: it comes back with the last snapshot. */
  crashAndRestart(): Promise<void>;
  /** SIGSTOP: the connection stays open and nothing answers. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** One command, on a fresh connection. */
  command(args: string[]): Promise<unknown>;
  stop(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  // Removed by stop(), or when the test process exits if the test never got there.
  const dir = newTempDir("auth-svc-redis-");
  const port = await freePort();
  let child: ChildProcess | undefined;

  const launch = async () => {
    child = spawn(
      "redis-server",
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        dir,
        "--save",
        "",
        "--appendonly",
        "no",
        "--logfile",
        "",
      ],
      {
        stdio: "ignore",
      },
    );
    for (let i = 0; i < 100; i++) {
      if (await answers(port)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`private redis-server on ${port} did not start`);
  };
  const kill = async (signal: NodeJS.Signals) => {
    const running = child;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise((r) => running.once("exit", r));
    running.kill(signal);
    await exited;
  };

  const command = async (args: string[]) => {
    const client = createClient({ url: `redis://127.0.0.1:${port}` });
    client.on("error", () => {});
    await client.connect();
    try {
      return await client.sendCommand(args);
    } finally {
      client.destroy();
    }
  };

  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    snapshot: async () => void (await command(["SAVE"])),
    async crashAndRestart() {
      await kill("SIGKILL");
      await launch();
    },
    pause: () => child?.kill("SIGSTOP"),
    resume: () => child?.kill("SIGCONT"),
    command,
    async stop() {
      child?.kill("SIGCONT");
      await kill("SIGKILL");
      removeTempDir(dir);
    },
  };
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.write("PING\r\n");
    });
    socket.once("data", (data) => {
      socket.destroy();
      resolve(data.toString().startsWith("+PONG"));
    });
    socket.once("error", () => resolve(false));
  });
}
