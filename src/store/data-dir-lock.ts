import fs from "node:fs";
import path from "node:path";

export class DataDirBusyError extends Error {}

/**
 * Claims DATA_DIR for this process. The embedded database (PGlite) corrupts if two processes
 * open it, so the server and an offline CLI run take this lock; a stale lock whose process is
 * gone is taken over.
 */
export function ownDataDir(dataDir: string): () => void {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const lockFile = path.join(dataDir, "owner.pid");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lockFile, String(process.pid), { flag: "wx", mode: 0o600 });
      return () => {
        try {
          if (fs.readFileSync(lockFile, "utf8") === String(process.pid)) fs.unlinkSync(lockFile);
        } catch {
          /* already gone */
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const owner = Number(fs.readFileSync(lockFile, "utf8"));
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && isAlive(owner)) {
        throw new DataDirBusyError(`${dataDir} is in use by process ${owner}`);
      }
      fs.rmSync(lockFile, { force: true });
    }
  }
  throw new DataDirBusyError(`could not claim ${dataDir}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
