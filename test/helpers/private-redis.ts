import { freePort } from "./free-port.js";
import { redisNodes } from "./redis-nodes.js";

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
  const nodes = redisNodes("redis");
  const port = await freePort();
  const launch = async () => {
    nodes.start(port, [...nodes.nodeArgs(port), "--logfile", ""]);
    await nodes.answering(port);
  };
  const command = (args: string[]) => nodes.command(port, args);

  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    snapshot: async () => void (await command(["SAVE"])),
    async crashAndRestart() {
      await nodes.kill(port);
      await launch();
    },
    pause: () => nodes.pause(port),
    resume: () => nodes.resume(port),
    command,
    stop: () => nodes.stop(),
  };
}
