import fs from "node:fs";
import path from "node:path";
import { makeDataDir } from "./data-dir.js";
import { processIsAlive } from "./data-dir-lock.js";

/**
 * Where a running server can be reached, kept in DATA_DIR while it runs, so that the CLI in
 * another terminal finds it whatever PORT it was started with (SERVER_URL and ADMIN_URL still
 * win). Written after the ports are open, removed on stop; a record whose process is gone is
 * ignored (a server killed with SIGKILL leaves one behind).
 */
export interface ServerRecord {
  /** The public listener, e.g. http://127.0.0.1:18181. */
  readonly url: string;
  /** The admin listener (ADMIN_PORT), when there is one: where OperatorService is served. */
  readonly adminUrl: string | undefined;
  readonly pid: number;
}

export function serverRecordFile(dataDir: string): string {
  return path.join(dataDir, "server.json");
}

export function writeServerRecord(dataDir: string, record: ServerRecord): void {
  makeDataDir(dataDir);
  const file = serverRecordFile(dataDir);
  // Written whole, then renamed: a reader never sees half a record.
  const temporary = `${file}.${record.pid}.tmp`;
  fs.writeFileSync(temporary, JSON.stringify(record) + "\n", { mode: 0o600 });
  fs.renameSync(temporary, file);
}

/** Removes the record if it is this process's (another server may have started on the same DATA_DIR since). */
export function removeServerRecord(dataDir: string, pid: number): void {
  if (readRecord(dataDir)?.pid === pid) fs.rmSync(serverRecordFile(dataDir), { force: true });
}

/** The record of a server that is still running, or undefined. */
export function readServerRecord(dataDir: string): ServerRecord | undefined {
  const record = readRecord(dataDir);
  return record && processIsAlive(record.pid) ? record : undefined;
}

function readRecord(dataDir: string): ServerRecord | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(serverRecordFile(dataDir), "utf8"));
  } catch {
    return undefined;
  }
  const { url, adminUrl, pid } = (parsed ?? {}) as Record<string, unknown>;
  if (
    typeof url !== "string" ||
    !/^https?:\/\//.test(url) ||
    typeof pid !== "number" ||
    !Number.isInteger(pid) ||
    pid <= 0
  )
    return undefined;
  return { url, adminUrl: typeof adminUrl === "string" && /^https?:\/\//.test(adminUrl) ? adminUrl : undefined, pid };
}
