// The service under test: `node --import tsx src/main.ts` as a child process on 127.0.0.1:0, on
// a throw-away backend (a fresh Postgres schema and Redis key prefix, or a fresh PGlite DATA_DIR),
// and everything needed to tear it down again. The child logs to a file in its temp dir, as a
// deployment logs to disk: the load generator neither parses those lines nor back-pressures them.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import knexPkg from "knex";
import { createClient } from "redis";

export const repoRoot = fileURLToPath(new URL("../", import.meta.url));

export const BENCH_DATABASE_URL = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
export const BENCH_REDIS_URL = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379";

/** Service settings the child must not inherit from the caller's environment. */
const SERVICE_SETTINGS = [
  "HOST",
  "PORT",
  "DATABASE_URL",
  "DATABASE_SCHEMA",
  "REDIS_URL",
  "REDIS_KEY_PREFIX",
  "DATA_DIR",
  "OPERATOR_TOKEN",
  "MASTER_KEY",
  "SERVER_URL",
  "LOG_LEVEL",
  "SHUTDOWN_TIMEOUT_MS",
  "BODY_LIMIT_BYTES",
  "TOKEN_ISSUER",
  "TOKEN_AUDIENCE",
  "ALLOWED_AUDIENCES",
  "TRUSTED_PROXIES",
  "TOKEN_RATE_LIMIT_PER_CLIENT",
  "TOKEN_RATE_LIMIT_PER_ADDRESS",
  "TOKEN_FAILURE_LIMIT",
  "NODE_OPTIONS",
  "NODE_TEST_CONTEXT",
];

export interface BenchServer {
  readonly backend: "postgres" | "embedded";
  readonly baseUrl: string;
  readonly pid: number;
  readonly operatorToken: string;
  /** What the "service listening" line says the instance runs on. */
  readonly databaseKind: string;
  readonly redisKind: string;
  /** Why the child exited early, or undefined while it runs. */
  exitReason(): string | undefined;
  /** Recent stderr of the child (for error messages). */
  stderr(): string;
  /** Counts warn/error/fatal lines of the log file and returns the first few distinct messages. */
  logSummary(): Promise<LogSummary>;
  /** SIGTERM (SIGKILL after a grace period), drop the schema and Redis keys, delete the temp dir. */
  teardown(): Promise<string[]>;
}

export interface LogSummary {
  readonly bytes: number;
  readonly lines: number;
  readonly warn: number;
  readonly error: number;
  readonly samples: string[];
}

export async function startBenchServer(options: { embedded: boolean; logLevel: string; cpuProfDir?: string | undefined }): Promise<BenchServer> {
  const backend = options.embedded ? "embedded" : "postgres";
  const tag = crypto.randomBytes(5).toString("hex");
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), "auth-svc-bench-"));
  const dataDir = path.join(tmpDir, "data");
  fs.mkdirSync(dataDir);
  const logFile = path.join(tmpDir, "server.log");
  const schema = options.embedded ? undefined : `bench_${tag}`;
  const redisKeyPrefix = `bench:${tag}:`;
  const operatorToken = crypto.randomBytes(24).toString("base64url");

  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of SERVICE_SETTINGS) delete env[name];
  Object.assign(env, {
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: options.logLevel,
    DATA_DIR: dataDir,
    MASTER_KEY: crypto.randomBytes(32).toString("base64"),
    OPERATOR_TOKEN: operatorToken,
    REDIS_KEY_PREFIX: redisKeyPrefix,
    // Generous budgets: the limiter runs on every token request but never refuses one.
    TOKEN_RATE_LIMIT_PER_CLIENT: "1000000/60",
    TOKEN_RATE_LIMIT_PER_ADDRESS: "1000000/60",
    ...(schema ? { DATABASE_URL: BENCH_DATABASE_URL, DATABASE_SCHEMA: schema, REDIS_URL: BENCH_REDIS_URL } : {}),
  });

  const logFd = fs.openSync(logFile, "w");
  let child: ChildProcess;
  try {
    const profile = options.cpuProfDir ? ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfDir}`] : [];
    child = spawn(process.execPath, [...profile, "--import", "tsx", "src/main.ts"], {
      cwd: repoRoot,
      env,
      stdio: ["ignore", logFd, "pipe"],
    });
  } finally {
    fs.closeSync(logFd);
  }
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-8_000);
  });
  let exitReason: string | undefined;
  const exited = new Promise<void>((resolve) =>
    child.once("exit", (code, signal) => {
      exitReason = `exited with ${signal ?? `code ${code}`}`;
      resolve();
    }),
  );

  let tornDown = false;
  const teardown = async (): Promise<string[]> => {
    if (tornDown) return [];
    tornDown = true;
    const problems: string[] = [];
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
    }
    if (schema) {
      const db = knexPkg.knex({ client: "pg", connection: BENCH_DATABASE_URL });
      try {
        await db.raw(`drop schema if exists "${schema}" cascade`);
      } catch (error) {
        problems.push(`could not drop schema ${schema}: ${(error as Error).message}`);
      } finally {
        await db.destroy();
      }
      const redis = createClient({ url: BENCH_REDIS_URL });
      redis.on("error", () => {});
      try {
        await redis.connect();
        const keys: string[] = [];
        for await (const batch of redis.scanIterator({ MATCH: `${redisKeyPrefix}*`, COUNT: 1000 })) keys.push(...batch);
        for (let i = 0; i < keys.length; i += 500) await redis.del(keys.slice(i, i + 500));
      } catch (error) {
        problems.push(`could not delete Redis keys ${redisKeyPrefix}*: ${(error as Error).message}`);
      } finally {
        if (redis.isOpen) await redis.quit();
      }
    }
    fs.rmSync(tmpDir, { recursive: true, force: true });
    return problems;
  };

  // Wait for the "service listening" line (PORT=0: the address is only known from it).
  let listening: Record<string, unknown> | undefined;
  const startDeadline = Date.now() + 60_000;
  while (!listening) {
    for (const line of fs.readFileSync(logFile, "utf8").split("\n")) {
      if (!line.startsWith("{")) continue;
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (typeof parsed.msg === "string" && parsed.msg.startsWith("service listening")) listening = parsed;
      } catch {
        // a line still being written
      }
    }
    if (listening) break;
    if (exitReason || Date.now() > startDeadline) {
      const why = exitReason ?? "no \"service listening\" log line within 60 s";
      const log = fs.readFileSync(logFile, "utf8").slice(-4_000);
      await teardown();
      throw new Error(`the service did not start (${why})\nstderr:\n${stderr}\nlog:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  return {
    backend,
    baseUrl: String(listening.address),
    pid: child.pid!,
    operatorToken,
    databaseKind: String(listening.database),
    redisKind: String(listening.redis),
    exitReason: () => exitReason,
    stderr: () => stderr,
    async logSummary() {
      const summary = { bytes: 0, lines: 0, warn: 0, error: 0, samples: [] as string[] };
      if (!fs.existsSync(logFile)) return summary;
      summary.bytes = fs.statSync(logFile).size;
      const seen = new Set<string>();
      const lines = readline.createInterface({ input: fs.createReadStream(logFile, "utf8"), crlfDelay: Infinity });
      for await (const line of lines) {
        summary.lines++;
        // pino levels: 40 warn, 50 error, 60 fatal. Parse only those lines.
        const match = /"level":(\d+)/.exec(line.slice(0, 40));
        const level = match ? Number(match[1]) : 0;
        // Also the "shutting down" line, which names the signal the service received.
        const signalled = line.includes('"signal":');
        if (level < 40 && !signalled) continue;
        if (level === 40) summary.warn++;
        else if (level > 40) summary.error++;
        try {
          const parsed = JSON.parse(line) as { msg?: string; err?: { message?: string }; signal?: string; time?: number };
          const label = level >= 50 ? "error" : level === 40 ? "warn" : "info";
          const detail = parsed.err?.message ? `: ${parsed.err.message}` : parsed.signal ? ` (${parsed.signal} at ${new Date(parsed.time ?? 0).toISOString()})` : "";
          const text = `[${label}] ${parsed.msg ?? ""}${detail}`;
          if (!seen.has(text) && summary.samples.length < 5) {
            seen.add(text);
            summary.samples.push(text);
          }
        } catch {
          // not JSON
        }
      }
      return summary;
    },
    teardown,
  };
}

/** Clock ticks per second for /proc/<pid>/stat (almost always 100). */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds (user + system) a process has used so far; undefined where /proc is missing. */
export function processCpuSeconds(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/** Busy and total CPU time of the whole machine (all cores), in ms. */
export function machineCpu(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const cpu of os.cpus()) {
    const t = cpu.times;
    const sum = t.user + t.nice + t.sys + t.irq + t.idle;
    total += sum;
    busy += sum - t.idle;
  }
  return { busy, total };
}
