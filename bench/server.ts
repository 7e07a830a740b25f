// The processes under test and their throw-away storage. Every server is a child process on
// 127.0.0.1:0 (service: `node --import tsx src/main.ts`; baselines: `node --import tsx
// bench/baselines/<name>.ts`), so each one's CPU and memory are read from /proc the same way.
//
// Storage: a fresh Postgres schema bench_<random> and Redis key prefix bench:<random>: shared by
// the service instances of one run, dropped and deleted at the end (also on Ctrl-C or failure);
// the same-guarantees baselines get a schema and key prefix of their own beside them
// (bench_<random>_same_guarantees, bench-same-guarantees:<random>: for the REST route, …_grpc
// and bench-same-guarantees-grpc:<random>: for the gRPC one), removed the same way;
// nothing else in the database or Redis is touched (no FLUSHDB, no other prefix). `--embedded` gives each instance a fresh
// PGlite DATA_DIR instead. The service logs to a file in the run's temp dir, as a deployment
// logs to disk: the bench neither parses those lines under load nor back-pressures them.
import { execFile, spawn, type ChildProcess } from "node:child_process";
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

/** Service settings the children must not inherit from the caller's environment. */
const SERVICE_SETTINGS = [
  "HOST",
  "PORT",
  "ADMIN_PORT",
  "ADMIN_HOST",
  "ADMIN_URL",
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
  "RESOURCE_SERVER_RATE_LIMIT",
  "ADMISSION_PARTY_SHARE_PERCENT",
  "ADMISSION_UNAUTHENTICATED_SHARE_PERCENT",
  "ADMISSION_QUEUE_PER_PARTY",
  "ADMISSION_QUEUE_WAIT_MS",
  "ADMISSION_LIMIT_MAX",
  "RPC_RATE_LIMIT_PER_PRINCIPAL",
  "NODE_OPTIONS",
  "NODE_TEST_CONTEXT",
  "BENCH_CLIENTS",
  "BENCH_AUDIT_SCHEMA",
  "BENCH_REDIS_KEY_PREFIX",
];

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of SERVICE_SETTINGS) delete env[name];
  return Object.assign(env, extra);
}

// ---- storage -------------------------------------------------------------------------------

export interface Backend {
  readonly kind: "postgres" | "embedded";
  /** Postgres schema (postgres only). */
  readonly schema: string | undefined;
  readonly redisKeyPrefix: string;
  /** The same-guarantees baseline's own audit schema and Redis key prefix (postgres only). */
  readonly baseline: { readonly schema: string; readonly redisKeyPrefix: string } | undefined;
  /** The same-guarantees gRPC route's, beside it (postgres only). */
  readonly grpcBaseline: { readonly schema: string; readonly redisKeyPrefix: string } | undefined;
  readonly operatorToken: string;
  /** Temp dir of the run: DATA_DIRs and log files. */
  readonly tmpDir: string;
  /** Environment shared by every service instance of the run. */
  readonly serviceEnv: Record<string, string>;
  /** Drops the schema, deletes the Redis keys and the temp dir (idempotent). */
  teardown(): Promise<string[]>;
}

export function createBackend(embedded: boolean): Backend {
  const tag = crypto.randomBytes(5).toString("hex");
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), "auth-svc-bench-"));
  const schema = embedded ? undefined : `bench_${tag}`;
  const redisKeyPrefix = `bench:${tag}:`;
  const baseline = schema
    ? { schema: `${schema}_same_guarantees`, redisKeyPrefix: `bench-same-guarantees:${tag}:` }
    : undefined;
  const grpcBaseline = schema
    ? { schema: `${schema}_same_guarantees_grpc`, redisKeyPrefix: `bench-same-guarantees-grpc:${tag}:` }
    : undefined;
  const operatorToken = crypto.randomBytes(24).toString("base64url");
  const serviceEnv: Record<string, string> = {
    HOST: "127.0.0.1",
    PORT: "0",
    MASTER_KEY: crypto.randomBytes(32).toString("base64"),
    OPERATOR_TOKEN: operatorToken,
    REDIS_KEY_PREFIX: redisKeyPrefix,
    // Every instance must sign and accept the same issuer/audience (PORT=0 would differ).
    TOKEN_ISSUER: "http://auth-service.bench.invalid",
    // Generous budgets: the limiter runs on every token request but never refuses one.
    TOKEN_RATE_LIMIT_PER_CLIENT: "1000000/60",
    TOKEN_RATE_LIMIT_PER_ADDRESS: "1000000/60",
    RESOURCE_SERVER_RATE_LIMIT: "1000000/60",
    // The operator's console reads (audit-volume) come from one principal.
    RPC_RATE_LIMIT_PER_PRINCIPAL: "1000000/10",
    ...(schema ? { DATABASE_URL: BENCH_DATABASE_URL, DATABASE_SCHEMA: schema, REDIS_URL: BENCH_REDIS_URL } : {}),
  };
  let done: Promise<string[]> | undefined;
  const teardown = () =>
    (done ??= (async () => {
      const problems: string[] = [];
      if (schema && baseline && grpcBaseline) {
        const db = knexPkg.knex({ client: "pg", connection: BENCH_DATABASE_URL, pool: { min: 0, max: 1 } });
        for (const name of [schema, baseline.schema, grpcBaseline.schema]) {
          try {
            await db.raw(`drop schema if exists "${name}" cascade`);
          } catch (error) {
            problems.push(`could not drop schema ${name}: ${(error as Error).message}`);
          }
        }
        await db.destroy();
        const redis = createClient({ url: BENCH_REDIS_URL });
        redis.on("error", () => {});
        try {
          await redis.connect();
          for (const prefix of [redisKeyPrefix, baseline.redisKeyPrefix, grpcBaseline.redisKeyPrefix]) {
            try {
              const keys: string[] = [];
              for await (const batch of redis.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })) keys.push(...batch);
              for (let i = 0; i < keys.length; i += 500) await redis.del(keys.slice(i, i + 500));
            } catch (error) {
              problems.push(`could not delete Redis keys ${prefix}*: ${(error as Error).message}`);
            }
          }
        } catch (error) {
          problems.push(`could not reach Redis to delete keys: ${(error as Error).message}`);
        } finally {
          if (redis.isOpen) await redis.quit();
        }
      }
      fs.rmSync(tmpDir, { recursive: true, force: true });
      return problems;
    })());
  return {
    kind: embedded ? "embedded" : "postgres",
    schema,
    redisKeyPrefix,
    baseline,
    grpcBaseline,
    operatorToken,
    tmpDir,
    serviceEnv,
    teardown,
  };
}

// ---- child processes -----------------------------------------------------------------------

export interface ServerProcess {
  readonly name: string;
  readonly pid: number;
  readonly baseUrl: string;
  /** host:port of the child's gRPC server, when it announced one beside baseUrl. */
  readonly grpcTarget?: string;
  /** Why the child exited early, or undefined while it runs. */
  exitReason(): string | undefined;
  /** Recent stderr of the child (for error messages). */
  stderr(): string;
  /** SIGTERM, SIGKILL after a grace period (idempotent). */
  stop(): Promise<void>;
}

/** Every child started, so that one handler can stop them all on Ctrl-C or failure. */
const children = new Set<ServerProcess>();
export const stopAllServers = () => Promise.all([...children].map((c) => c.stop()));

function spawnChild(
  name: string,
  script: string,
  env: NodeJS.ProcessEnv,
  stdout: "pipe" | number,
  nodeArgs: string[] = [],
): { child: ChildProcess; exitReason: () => string | undefined; stderr: () => string; stop: () => Promise<void> } {
  // A built entry point (.js) runs as production runs it; a .ts one through tsx.
  const entry = script.endsWith(".js") ? [script] : ["--import", "tsx", script];
  const child = spawn(process.execPath, [...nodeArgs, ...entry], {
    cwd: repoRoot,
    env,
    stdio: ["ignore", stdout, "pipe"],
  });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-8_000);
  });
  let exitReason: string | undefined;
  const exited = new Promise<void>((resolve) =>
    child.once("exit", (code, signal) => {
      exitReason = `${name} exited with ${signal ?? `code ${code}`}`;
      resolve();
    }),
  );
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
        await exited;
        clearTimeout(timer);
      }
    })());
  return { child, exitReason: () => exitReason, stderr: () => stderr, stop };
}

/** A baseline server (bench/baselines/<file>): waits for its {"listening": url} line on stdout. */
export function startBaseline(name: string, file: string, env: Record<string, string>): Promise<ServerProcess> {
  return startListeningChild(name, path.join("bench", "baselines", file), env);
}

/**
 * A child process (a script under the repository) that prints {"listening": url} on stdout once
 * it serves ({"listening": url, "grpc": "host:port"} when it serves gRPC too).
 */
export async function startListeningChild(
  name: string,
  script: string,
  env: Record<string, string>,
): Promise<ServerProcess> {
  const { child, exitReason, stderr, stop } = spawnChild(name, script, childEnv(env), "pipe");
  const proc = { name, pid: child.pid!, baseUrl: "", exitReason, stderr, stop };
  children.add(proc);
  const announced = await new Promise<{ listening: string; grpc?: string }>((resolve, reject) => {
    let buffered = "";
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 60 s\n${stderr()}`)), 60_000);
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      buffered += chunk;
      const match = /^\{"listening":"[^"]+"[^\n]*\}$/m.exec(buffered);
      if (match) {
        clearTimeout(timer);
        resolve(JSON.parse(match[0]) as { listening: string; grpc?: string });
      }
    });
    child.once("exit", () => {
      clearTimeout(timer);
      reject(new Error(`${exitReason()} before listening\n${stderr()}`));
    });
  }).catch(async (error: unknown) => {
    await stop();
    throw error;
  });
  return { ...proc, baseUrl: announced.listening, ...(announced.grpc ? { grpcTarget: announced.grpc } : {}) };
}

export interface ServiceInstance extends ServerProcess {
  /** Where OperatorService answers (the admin listener if the service has one, else baseUrl). */
  readonly operatorUrl: string;
  /** What the "service listening" line says the instance runs on. */
  readonly databaseKind: string;
  readonly redisKind: string;
  /** Counts warn/error/fatal lines of the log file and returns the first few distinct messages. */
  logSummary(): Promise<LogSummary>;
}

export interface LogSummary {
  readonly bytes: number;
  readonly lines: number;
  readonly warn: number;
  readonly error: number;
  readonly samples: string[];
  /** Refused requests by "status errorCode", from the access log (a scenario's errors say only the status). */
  readonly refusals: Record<string, number>;
}

export async function startService(
  backend: Backend,
  options: { name: string; logLevel: string; cpuProfDir?: string | undefined; buildDir?: string | undefined },
): Promise<ServiceInstance> {
  const dataDir = path.join(backend.tmpDir, `data-${options.name}`);
  fs.mkdirSync(dataDir);
  const logFile = path.join(backend.tmpDir, `${options.name}.log`);
  // No balancer takes a bench instance out of rotation: it stops without the shutdown drain.
  const env = childEnv({
    ...backend.serviceEnv,
    LOG_LEVEL: options.logLevel,
    DATA_DIR: dataDir,
    SHUTDOWN_DRAIN_MS: "0",
  });
  const logFd = fs.openSync(logFile, "w");
  let spawned: ReturnType<typeof spawnChild>;
  try {
    const profile = options.cpuProfDir ? ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfDir}`] : [];
    const script = options.buildDir ? path.join(options.buildDir, "src", "main.js") : "src/main.ts";
    spawned = spawnChild(options.name, script, env, logFd, profile);
  } finally {
    fs.closeSync(logFd);
  }
  const { child, exitReason, stderr, stop } = spawned;
  children.add({ name: options.name, pid: child.pid!, baseUrl: "", exitReason, stderr, stop });

  // Wait for the "service listening" line (PORT=0: the address is only known from it).
  let listening: Record<string, unknown> | undefined;
  const startDeadline = Date.now() + 90_000;
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
    if (exitReason() || Date.now() > startDeadline) {
      const why = exitReason() ?? 'no "service listening" log line within 90 s';
      const log = fs.readFileSync(logFile, "utf8").slice(-4_000);
      await stop();
      throw new Error(`the service (${options.name}) did not start (${why})\nstderr:\n${stderr()}\nlog:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const baseUrl = String(listening.address);
  const adminAddress = [listening.adminAddress, listening.admin].find(
    (v): v is string => typeof v === "string" && v.startsWith("http"),
  );

  return {
    name: options.name,
    pid: child.pid!,
    baseUrl,
    operatorUrl: adminAddress ?? baseUrl,
    databaseKind: String(listening.database),
    redisKind: String(listening.redis),
    exitReason,
    stderr,
    stop,
    logSummary: () => summariseLog(logFile),
  };
}

/** The name of a process of this host (/proc/<pid>/comm), undefined when it is not one. */
function processName(pid: number): string | undefined {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return undefined;
  }
}

/**
 * The pids of the Postgres server (its postmaster: every backend is its child) and the Redis
 * server behind BENCH_DATABASE_URL and BENCH_REDIS_URL, when they run on this host; their CPU is
 * then read from /proc like the servers'. A server elsewhere (another host, a container's pid
 * namespace) is left out.
 */
export async function storageServerPids(): Promise<{ postgres?: number; redis?: number }> {
  const found: { postgres?: number; redis?: number } = {};
  const db = knexPkg.knex({ client: "pg", connection: BENCH_DATABASE_URL, pool: { min: 0, max: 1 } });
  try {
    const { rows } = (await db.raw("select pg_backend_pid() as pid")) as { rows: Array<{ pid: number }> };
    // Read while the backend lives: its parent is the postmaster.
    const stat = fs.readFileSync(`/proc/${rows[0]!.pid}/stat`, "utf8");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (processName(ppid)?.startsWith("postgres")) found.postgres = ppid;
  } catch {
    // not on this host
  } finally {
    await db.destroy();
  }
  const redis = createClient({ url: BENCH_REDIS_URL });
  redis.on("error", () => {});
  try {
    await redis.connect();
    const pid = Number(/^process_id:(\d+)/m.exec(await redis.info("server"))?.[1]);
    if (processName(pid)?.startsWith("redis")) found.redis = pid;
  } catch {
    // not reachable or not on this host
  } finally {
    if (redis.isOpen) await redis.quit();
  }
  return found;
}

/**
 * The service built as production runs it (`tsc -p tsconfig.build.json`, `node dist/src/main.js`)
 * into the run's temp dir, removed with it; a node_modules link beside the build resolves its
 * packages from the repository's.
 */
export async function buildService(backend: Backend): Promise<string> {
  const outDir = path.join(backend.tmpDir, "build");
  const tsc = path.join(repoRoot, "node_modules", "typescript", "bin", "tsc");
  await new Promise<void>((resolve, reject) =>
    execFile(
      process.execPath,
      [tsc, "-p", path.join(repoRoot, "tsconfig.build.json"), "--outDir", outDir],
      { cwd: repoRoot, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout) => (error ? reject(new Error(`the build failed: ${error.message}\n${stdout}`)) : resolve()),
    ),
  );
  fs.symlinkSync(path.join(repoRoot, "node_modules"), path.join(backend.tmpDir, "node_modules"));
  return outDir;
}

async function summariseLog(logFile: string): Promise<LogSummary> {
  const summary = {
    bytes: 0,
    lines: 0,
    warn: 0,
    error: 0,
    samples: [] as string[],
    refusals: {} as Record<string, number>,
  };
  if (!fs.existsSync(logFile)) return summary;
  summary.bytes = fs.statSync(logFile).size;
  const seen = new Set<string>();
  const lines = readline.createInterface({ input: fs.createReadStream(logFile, "utf8"), crlfDelay: Infinity });
  for await (const line of lines) {
    summary.lines++;
    const errorCode = line.includes('"errorCode":"') ? /"errorCode":"([A-Z_]+)"/.exec(line)?.[1] : undefined;
    if (errorCode) {
      const key = `${/"statusCode":(\d{3})/.exec(line)?.[1] ?? "?"} ${errorCode}`;
      summary.refusals[key] = (summary.refusals[key] ?? 0) + 1;
    }
    // pino levels: 40 warn, 50 error, 60 fatal. Parse only those lines.
    const match = /"level":(\d+)/.exec(line.slice(0, 40));
    const level = match ? Number(match[1]) : 0;
    if (level < 40) continue;
    if (level === 40) summary.warn++;
    else summary.error++;
    try {
      const parsed = JSON.parse(line) as { msg?: string; err?: { message?: string } };
      const text = `[${level >= 50 ? "error" : "warn"}] ${parsed.msg ?? ""}${parsed.err?.message ? `: ${parsed.err.message}` : ""}`;
      if (!seen.has(text) && summary.samples.length < 5) {
        seen.add(text);
        summary.samples.push(text);
      }
    } catch {
      // not JSON
    }
  }
  return summary;
}
