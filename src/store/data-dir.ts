import fs from "node:fs";
import path from "node:path";

/** DATA_DIR could not be created: the message names the path and the errno, e.g. "DATA_DIR /x is not writable (EACCES)". */
export class DataDirUnwritableError extends Error {
  constructor(
    readonly dataDir: string,
    readonly code: string,
  ) {
    super(`DATA_DIR ${dataDir} is not writable (${code})`);
  }
}

/**
 * Creates DATA_DIR (owner-only) and the directories above it that are missing, each level tried
 * once. Not fs.mkdirSync's `recursive`: Node's native walk spins at 100 % CPU forever, answering
 * no signal, when a parent exists but mkdir of the child answers ENOENT (any path under /proc).
 */
export function makeDataDir(dataDir: string): void {
  try {
    makeDirectory(path.resolve(dataDir));
  } catch (error) {
    throw new DataDirUnwritableError(dataDir, (error as NodeJS.ErrnoException).code ?? String(error));
  }
}

function makeDirectory(directory: string): void {
  try {
    fs.mkdirSync(directory, { mode: 0o700 });
    return;
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException;
    if (code === "EEXIST") {
      if (fs.statSync(directory).isDirectory()) return;
      throw Object.assign(new Error(`${directory} is not a directory`), { code: "ENOTDIR" });
    }
    if (code !== "ENOENT" || path.dirname(directory) === directory) throw error;
  }
  makeDirectory(path.dirname(directory));
  // The parent exists now: a second ENOENT is final.
  fs.mkdirSync(directory, { mode: 0o700 });
}
