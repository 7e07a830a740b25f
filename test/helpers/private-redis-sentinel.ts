import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createClient } from "redis";
import { newTempDir, removeTempDir } from "./backend.js";
import { freePort } from "./private-redis.js";

/**
 * A throwaway Sentinel setup on private loopback ports: a primary, its replica and one sentinel
 * (quorum 1) watching them as SENTINEL_NAME, failing over one second after the primary stops
 * answering. The machine's shared Redis is never touched.
 */
export interface PrivateRedisSentinel {
  /** The sentinel's URL, as REDIS_URL takes it in sentinel mode. */
  readonly url: string;
  readonly primary: number;
  readonly replica: number;
  /** SIGKILL the node on `port` (it stays down). */
  kill(port: number): Promise<void>;
  /** Resolves once the sentinel names `port` as the primary and it answers as one. */
  promoted(port: number): Promise<void>;
  command(port: number, args: string[]): Promise<unknown>;
  stop(): Promise<void>;
}

export const SENTINEL_NAME = "auth-test";

export async function startPrivateRedisSentinel(): Promise<PrivateRedisSentinel> {
  const dir = newTempDir("auth-svc-redis-sentinel-");
  const [primary, replica, sentinel] = [await freePort(), await freePort(), await freePort()];
  const nodes = new Map<number, ChildProcess>();
  const start = (port: number, args: string[]) => {
    const node = spawn("redis-server", args, { stdio: "ignore" });
    nodes.set(port, node);
    // A test process that dies before stop() must not leave nodes running.
    process.once("exit", () => node.kill("SIGKILL"));
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
  const kill = async (port: number) => {
    const node = nodes.get(port);
    if (!node || node.exitCode !== null || node.signalCode !== null) return;
    const exited = new Promise((r) => node.once("exit", r));
    node.kill("SIGKILL");
    await exited;
  };
  const until = async (what: string, check: () => Promise<boolean>) => {
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      if (await check().catch(() => false)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`private Redis Sentinel: ${what} not within 20 s`);
  };
  const stop = async () => {
    await Promise.all([...nodes.keys()].map(kill));
    removeTempDir(dir);
  };
  const common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--logfile", ""];
  try {
    start(primary, ["--port", String(primary), "--dir", dir, ...common]);
    start(replica, ["--port", String(replica), "--dir", dir, ...common, "--replicaof", "127.0.0.1", String(primary)]);
    await until("the replica in sync", async () =>
      String(await command(replica, ["INFO", "replication"])).includes("master_link_status:up"),
    );
    const conf = path.join(dir, "sentinel.conf");
    fs.writeFileSync(
      conf,
      [
        `port ${sentinel}`,
        "bind 127.0.0.1",
        `sentinel monitor ${SENTINEL_NAME} 127.0.0.1 ${primary} 1`,
        `sentinel down-after-milliseconds ${SENTINEL_NAME} 1000`,
        `sentinel failover-timeout ${SENTINEL_NAME} 5000`,
        "",
      ].join("\n"),
    );
    start(sentinel, [conf, "--sentinel"]);
    await until("the sentinel knowing the replica", async () =>
      String(await command(sentinel, ["INFO", "sentinel"])).includes("slaves=1"),
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url: `redis://127.0.0.1:${sentinel}`,
    primary,
    replica,
    kill,
    promoted: (port) =>
      until(`${port} promoted`, async () => {
        const named = String(await command(sentinel, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_NAME]));
        return named.endsWith(String(port)) && String(await command(port, ["ROLE"])).startsWith("master");
      }),
    command,
    stop,
  };
}
