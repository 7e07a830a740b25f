import fs from "node:fs";
import path from "node:path";
import { makeDataDir } from "./data-dir.js";

export class DataDirBusyError extends Error {}

/** Directories this process holds: a lock file naming our own pid is stale only if we do not hold it. */
const heldByThisProcess = new Set<string>();

/**
 * Claims DATA_DIR for this process. The embedded database (PGlite) corrupts if two processes
 * open it, so the server and an offline CLI run take this lock; a stale lock whose process is
 * gone is taken over.
 */
export function ownDataDir(dataDir: string): () => void {
  makeDataDir(dataDir);
  const key = fs.realpathSync(dataDir);
  if (heldByThisProcess.has(key))
    throw new DataDirBusyError(`${dataDir} is in use by process ${process.pid} (this process)`);
  const lockFile = path.join(dataDir, "owner.pid");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lockFile, String(process.pid), { flag: "wx", mode: 0o600 });
      heldByThisProcess.add(key);
      return () => {
        heldByThisProcess.delete(key);
        try {
          if (fs.readFileSync(lockFile, "utf8") === String(process.pid)) fs.unlinkSync(lockFile);
        } catch {
          /* already gone */
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const owner = Number(fs.readFileSync(lockFile, "utf8"));
      // Our own pid in the file is a leftover of an earlier run that had the same pid (pid 1 in a container).
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && processIsAlive(owner)) {
        throw new DataDirBusyError(`${dataDir} is in use by process ${owner}`);
      }
      fs.rmSync(lockFile, { force: true });
    }
  }
  throw new DataDirBusyError(`could not claim ${dataDir}`);
}

/** The live process other than this one that holds DATA_DIR (a server, perhaps still starting, or an offline CLI run), if any. */
export function dataDirOwner(dataDir: string): number | undefined {
  let owner: number;
  try {
    owner = Number(fs.readFileSync(path.join(dataDir, "owner.pid"), "utf8"));
  } catch {
    return undefined;
  }
  return Number.isInteger(owner) && owner > 0 && owner !== process.pid && processIsAlive(owner) ? owner : undefined;
}

/** Whether process `pid` runs (EPERM: it exists but belongs to another user — still running). */
export function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
