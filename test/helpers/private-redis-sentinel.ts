import fs from "node:fs";
import path from "node:path";
import { freePort } from "./free-port.js";
import { redisNodes } from "./redis-nodes.js";

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
  const nodes = redisNodes("redis-sentinel");
  const { dir, command, until } = nodes;
  const [primary, replica, sentinel] = [await freePort(), await freePort(), await freePort()];
  try {
    nodes.start(primary, [...nodes.nodeArgs(primary), "--logfile", ""]);
    nodes.start(replica, [...nodes.nodeArgs(replica), "--logfile", "", "--replicaof", "127.0.0.1", String(primary)]);
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
    nodes.start(sentinel, [conf, "--sentinel"]);
    await until("the sentinel knowing the replica", async () =>
      String(await command(sentinel, ["INFO", "sentinel"])).includes("slaves=1"),
    );
  } catch (error) {
    await nodes.stop();
    throw error;
  }
  return {
    url: `redis://127.0.0.1:${sentinel}`,
    primary,
    replica,
    kill: (port) => nodes.kill(port),
    promoted: (port) =>
      until(`${port} promoted`, async () => {
        const named = String(await command(sentinel, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_NAME]));
        return named.endsWith(String(port)) && String(await command(port, ["ROLE"])).startsWith("master");
      }),
    command,
    stop: nodes.stop,
  };
}
