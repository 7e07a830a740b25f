import { execFile } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import { redisNodes } from "./redis-nodes.js";

const run = promisify(execFile);

/**
 * A throwaway Redis Cluster on private loopback ports: three primaries, each with one replica,
 * no persistence, failover after NODE_TIMEOUT_MS. For tests that kill or stall its nodes; the
 * machine's shared Redis is never touched.
 */
export interface PrivateRedisCluster {
  /** The seed URLs (every node), as REDIS_URL takes them in cluster mode. */
  readonly url: string;
  /** The port of the primary serving `key`'s slot now, and of its replica. */
  shardOf(key: string): Promise<{ primary: number; replica: number }>;
  /** SIGKILL the node on `port` (it stays down). */
  kill(port: number): Promise<void>;
  /** SIGSTOP / SIGCONT the node on `port`. */
  pause(port: number): void;
  resume(port: number): void;
  /** Resolves once every slot is served again (cluster_state:ok on every live node) and `port`, when given, is a primary. */
  healthy(promoted?: number): Promise<void>;
  /** One command to the node on `port`, on a fresh connection. */
  command(port: number, args: string[]): Promise<unknown>;
  stop(): Promise<void>;
}

/** Short enough that a failover fits a test, long enough that a busy machine does not fail over by mistake. */
const NODE_TIMEOUT_MS = 1_500;

export async function startPrivateRedisCluster(): Promise<PrivateRedisCluster> {
  const nodes = redisNodes("redis-cluster");
  const { dir, command, until } = nodes;
  const ports: number[] = [];
  while (ports.length < 6) ports.push(await clusterPort(ports));
  const live = () => ports.filter(nodes.running);

  try {
    for (const port of ports)
      nodes.start(port, [
        ...nodes.nodeArgs(port),
        ...["--logfile", path.join(dir, `redis-${port}.log`)],
        ...["--cluster-enabled", "yes", "--cluster-config-file", path.join(dir, `nodes-${port}.conf`)],
        ...["--cluster-node-timeout", String(NODE_TIMEOUT_MS)],
      ]);
    for (const port of ports) await nodes.answering(port);
    await run(
      "redis-cli",
      ["--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", "1", "--cluster-yes"],
      // It waits for the nodes to meet for ever; a cluster bus that cannot open must fail here.
      { timeout: 20_000 },
    );
  } catch (error) {
    await nodes.stop();
    throw error;
  }

  const shardOf = async (key: string) => {
    const slot = Number(await command(live()[0]!, ["CLUSTER", "KEYSLOT", key]));
    const lines = String(await command(live()[0]!, ["CLUSTER", "NODES"]))
      .trim()
      .split("\n");
    const entries = lines.map((line) => {
      const [id, address, flags, primaryId, , , , , ...slots] = line.split(" ");
      return { id, port: Number(address!.split(":")[1]!.split("@")[0]), flags: flags!, primaryId, slots };
    });
    const primary = entries.find(
      (e) =>
        e.flags.includes("master") &&
        !e.flags.includes("fail") &&
        e.slots.some((range) => {
          const [from, to = from] = range.split("-").map(Number);
          return slot >= from! && slot <= to!;
        }),
    );
    const replica = entries.find((e) => e.primaryId === primary?.id && !e.flags.includes("fail"));
    if (!primary || !replica) throw new Error(`no live primary and replica for slot ${slot}`);
    return { primary: primary.port, replica: replica.port };
  };
  const healthy = async (promoted?: number) => {
    await until("every slot served", async () => {
      for (const port of live())
        if (!String(await command(port, ["CLUSTER", "INFO"])).includes("cluster_state:ok")) return false;
      return promoted === undefined || String(await command(promoted, ["ROLE"])).startsWith("master");
    });
  };
  // Every replica through its first sync: cluster_state:ok does not wait for it, and a test that
  // waits for a write to reach a replica (redis-cluster.test.ts) must not also wait out the sync.
  const replicasInSync = () =>
    until("every replica linked to its primary", async () => {
      for (const port of live()) {
        const role = String(await command(port, ["ROLE"]));
        if (
          role.startsWith("slave") &&
          !String(await command(port, ["INFO", "replication"])).includes("master_link_status:up")
        )
          return false;
      }
      return true;
    });
  try {
    await healthy();
    await replicasInSync();
  } catch (error) {
    await nodes.stop();
    throw error;
  }
  return {
    url: ports.map((p) => `redis://127.0.0.1:${p}`).join(","),
    shardOf,
    kill: (port) => nodes.kill(port),
    pause: nodes.pause,
    resume: nodes.resume,
    healthy,
    command,
    stop: nodes.stop,
  };
}

/**
 * A free port P whose cluster bus port (P + 10000, fixed by Redis) is free too: an ephemeral port
 * above 55535 has no bus port, and the cluster then never forms.
 */
async function clusterPort(taken: readonly number[]): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    if (taken.includes(port)) continue;
    if ((await isFree(port)) && (await isFree(port + 10_000))) return port;
  }
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}
