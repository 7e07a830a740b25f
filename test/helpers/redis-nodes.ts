import { spawn, type ChildProcess } from "node:child_process";
import { createClient } from "redis";
import { newTempDir, removeTempDir } from "./backend.js";

/**
 * redis-server processes on private loopback ports sharing one temporary directory: what the
 * private Redis, Cluster and Sentinel helpers are built of. The machine's shared Redis is never
 * touched.
 */
export interface RedisNodes {
  /** Their directory (data, configs, logs), removed by stop(). */
  readonly dir: string;
  /** A node's arguments on `port` in the directory, loopback only, without persistence (SAVE still writes). */
  readonly nodeArgs: (port: number) => string[];
  /** Starts `redis-server args` as the node on `port` (again after a kill: same port, same directory). */
  readonly start: (port: number, args: readonly string[]) => void;
  /** True while the node on `port` has not exited. */
  readonly running: (port: number) => boolean;
  /** Sends `signal` (SIGKILL by default; SIGCONT first, so a paused node dies too) and waits for the exit. */
  readonly kill: (port: number, signal?: NodeJS.Signals) => Promise<void>;
  /** SIGSTOP: its connections stay open and nothing answers. */
  readonly pause: (port: number) => void;
  /** SIGCONT. */
  readonly resume: (port: number) => void;
  /** One command to the node on `port`, on a fresh connection. */
  readonly command: (port: number, args: string[]) => Promise<unknown>;
  /** Polls `check` (a throw counts as false) until it holds; throws naming `what` after `timeoutMs`. */
  readonly until: (what: string, check: () => Promise<boolean>, timeoutMs?: number) => Promise<void>;
  /** Resolves once the node on `port` answers PING. */
  readonly answering: (port: number) => Promise<void>;
  /** Kills every node and removes the directory. */
  readonly stop: () => Promise<void>;
}

// A test process that dies before stop() must not leave nodes running (one listener for them all).
const spawned = new Set<ChildProcess>();
process.once("exit", () => {
  for (const node of spawned) node.kill("SIGKILL");
});

/** `name` says which helper's nodes they are, in the temporary directory's name and in errors. */
export function redisNodes(name: string): RedisNodes {
  const dir = newTempDir(`auth-svc-${name}-`);
  const nodes = new Map<number, ChildProcess>();
  const running = (port: number) => nodes.get(port)?.exitCode === null && nodes.get(port)?.signalCode === null;
  const kill = async (port: number, signal: NodeJS.Signals = "SIGKILL") => {
    const node = nodes.get(port);
    if (!node || !running(port)) return;
    const exited = new Promise((r) => node.once("exit", r));
    node.kill("SIGCONT");
    node.kill(signal);
    await exited;
  };
  const command = async (port: number, args: string[]) => {
    const client = createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: false } });
    client.on("error", () => {});
    await client.connect();
    try {
      return await client.sendCommand(args);
    } finally {
      client.destroy();
    }
  };
  const until = async (what: string, check: () => Promise<boolean>, timeoutMs = 20_000) => {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (await check().catch(() => false)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`${name}: ${what} not within ${timeoutMs} ms`);
  };
  return {
    dir,
    nodeArgs: (port) => [
      "--port",
      String(port),
      "--dir",
      dir,
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
    ],
    start(port, args) {
      const node = spawn("redis-server", args, { stdio: "ignore" });
      nodes.set(port, node);
      spawned.add(node);
      node.once("exit", () => spawned.delete(node));
    },
    running,
    kill,
    pause: (port) => void nodes.get(port)?.kill("SIGSTOP"),
    resume: (port) => void nodes.get(port)?.kill("SIGCONT"),
    command,
    until,
    answering: (port) => until(`node ${port} answering`, async () => String(await command(port, ["PING"])) === "PONG"),
    async stop() {
      await Promise.all([...nodes.keys()].map((port) => kill(port)));
      removeTempDir(dir);
    },
  };
}
