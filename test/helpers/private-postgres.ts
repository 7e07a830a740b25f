import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { newTempDir, removeTempDir } from "./backend.js";
import { freePort } from "./free-port.js";
import { stopAtExit } from "./stop-at-exit.js";

/**
 * A throwaway Postgres server (the machine's own binaries: initdb, pg_ctl) on a private loopback
 * port with its own data directory, for tests that kill backends or need a database nobody else
 * uses (CREATE INDEX CONCURRENTLY waits for every other transaction of its database). The shared
 * server is never touched. Run as the `postgres` user when the tests run as root (initdb refuses root).
 */
export interface PrivatePostgres {
  readonly url: string;
  stop(): void;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const dir = newTempDir("auth-svc-postgres-");
  const data = path.join(dir, "data");
  const asOwner = ownerCommand(dir);
  const port = await freePort();
  execFileSync(asOwner[0], [...asOwner.slice(1), "initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync"], {
    stdio: "ignore",
  });
  const pgCtl = (...args: string[]) =>
    execFileSync(asOwner[0], [...asOwner.slice(1), "pg_ctl", "-D", data, ...args], { stdio: "ignore" });
  pgCtl(
    "-l",
    path.join(dir, "log"),
    "-o",
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=40`,
    "-w",
    "start",
  );
  const stop = stopAtExit(() => {
    try {
      pgCtl("-m", "immediate", "-w", "stop");
    } finally {
      removeTempDir(dir);
    }
  });
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, stop };
}

/** The command prefix that runs a binary as the owner of `dir`: the `postgres` user when we are root. */
function ownerCommand(dir: string): string[] {
  if (process.getuid?.() !== 0) return ["env"];
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  fs.chownSync(dir, uid, gid);
  return ["runuser", "-u", "postgres", "--"];
}
