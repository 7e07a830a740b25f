import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The repository root: child processes run there so `--import tsx` and relative paths resolve. */
export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Settings a test's child must not inherit from the runner's own environment: each child gets
 * exactly the storage, keys and server address the test chose (serviceEnv + extras).
 */
const INHERITED_SETTINGS = [
  "HOST",
  "PORT",
  "DATABASE_URL",
  "DATABASE_DIRECT_URL",
  "DATABASE_POOL_MODE",
  "MIGRATE_ON_START",
  "REDIS_URL",
  "DATA_DIR",
  "DATABASE_SCHEMA",
  "OPERATOR_TOKEN",
  "MASTER_KEY",
  "SERVER_URL",
  "ADMIN_HOST",
  "ADMIN_PORT",
  "ADMIN_URL",
  "LOG_LEVEL",
  "SHUTDOWN_TIMEOUT_MS",
  "SHUTDOWN_DRAIN_MS",
  "READINESS_INTERVAL_MS",
  "DATABASE_POOL_MIN",
  "BODY_LIMIT_BYTES",
  "NODE_TEST_CONTEXT",
];

/** process.env without the service's settings, merged with the given ones. */
export function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of INHERITED_SETTINGS) delete base[name];
  return { ...base, ...env };
}

/**
 * The arguments that make a child node run one of the service's entry points: the build test/run.sh
 * makes once per run (TEST_BUILD_DIR, `tsc -p tsconfig.build.json`: the form production runs,
 * `node dist/src/main.js`), or through tsx when a test file is run alone. A child through tsx
 * spends twice the CPU starting (2.9 s against 1.3 s for `cli --help` here), and the suite starts
 * hundreds.
 */
/** V8 flags a test process passes on to the children it starts, when test/run.sh gave it them (see there why). */
const V8_FLAGS_FOR_CHILDREN = ["--liftoff-only"];

export function entryPoint(entry: "src/main.ts" | "src/cli/main.ts"): string[] {
  const built = process.env.TEST_BUILD_DIR;
  const flags = process.execArgv.filter((flag) => V8_FLAGS_FOR_CHILDREN.includes(flag));
  return [...flags, ...(built ? [`${built}/${entry.replace(/\.ts$/, ".js")}`] : ["--import", "tsx", entry])];
}

export interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** `src/main.ts` running as a child process. */
export interface ServerProcess {
  readonly child: ChildProcess;
  /** The address from the "service listening" log line, e.g. http://127.0.0.1:43543. */
  readonly address: string;
  readonly port: number;
  /** Everything the child has written so far. */
  stdout(): string;
  stderr(): string;
  /** Parsed JSON log lines written so far (non-JSON lines skipped). */
  logLines(): Array<Record<string, unknown>>;
  /** Resolves when a log line matching `predicate` has been written. */
  waitForLog(
    predicate: (line: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  /** Resolves when the child has exited. */
  readonly exited: Promise<ExitStatus>;
  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`; resolves with the exit status. */
  stop(graceMs?: number): Promise<ExitStatus>;
}

/**
 * How long a test waits for a child (a server to listen, a CLI command to finish) before calling it
 * hung. Not a start-up budget: the service bounds its own start (database retries, migrations) and
 * exits non-zero when it cannot start, and the wait ends at that exit. This is only the backstop for
 * a child that neither finishes nor fails, far above any start seen on a saturated machine (41–50 s),
 * and below the runner's per-test timeout (600 s, test/run.sh) so the failure names the child.
 */
export const CHILD_HUNG_MS = 240_000;

export interface SpawnOptions {
  /** Called with everything the child has written to stdout so far, on every write, before it listens too. */
  readonly onStdout?: (stdout: string) => void;
  /**
   * What runs the server instead of this Node on `src/main.ts`: e.g. `podman run` of the image
   * (test/helpers/container.ts), in the foreground, so SIGTERM and the exit status pass through it.
   */
  readonly command?: { readonly file: string; readonly args: readonly string[] };
}

/**
 * Spawns the server (`src/main.ts`, see entryPoint) with the given environment and waits for its
 * "service listening" log line. Rejects (after killing the child) if it exits or stays silent.
 */
export async function spawnServer(env: Record<string, string>, options: SpawnOptions = {}): Promise<ServerProcess> {
  const command = options.command ?? { file: process.execPath, args: entryPoint("src/main.ts") };
  const child = spawn(command.file, command.args, {
    cwd: repoRoot,
    env: childEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  const listeners = new Set<() => void>();
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
    options.onStdout?.(out);
    for (const listener of listeners) listener();
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    err += chunk;
  });
  const exited = new Promise<ExitStatus>((resolve) => {
    child.once("exit", (code, signal) => {
      resolve({ code, signal });
      for (const listener of listeners) listener();
    });
  });
  let status: ExitStatus | undefined;
  void exited.then((s) => (status = s));

  const logLines = () =>
    out
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, unknown>];
        } catch {
          return [];
        }
      });

  const waitForLog = (predicate: (line: Record<string, unknown>) => boolean, timeoutMs = 60_000) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const check = () => {
        const found = logLines().find(predicate);
        if (found) {
          done();
          resolve(found);
        } else if (status !== undefined || child.exitCode !== null || child.signalCode !== null) {
          done();
          reject(
            new Error(
              `server exited (${child.exitCode ?? child.signalCode}) before the expected log line\nstdout:\n${out}\nstderr:\n${err}`,
            ),
          );
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no matching server log line within ${timeoutMs} ms\nstdout:\n${out}\nstderr:\n${err}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        listeners.delete(check);
      };
      listeners.add(check);
      check();
    });

  const stop = async (graceMs = 10_000): Promise<ExitStatus> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    }
    return exited;
  };

  let listening: Record<string, unknown>;
  try {
    listening = await waitForLog(
      (line) => typeof line.msg === "string" && line.msg.startsWith("service listening"),
      CHILD_HUNG_MS,
    );
  } catch (error) {
    await stop(2_000);
    throw error;
  }
  const address = String(listening.address);
  return {
    child,
    address,
    port: Number(new URL(address).port),
    stdout: () => out,
    stderr: () => err,
    logLines,
    waitForLog,
    exited,
    stop,
  };
}

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `src/cli/main.ts ...args` (see entryPoint) with exactly the given service settings. */
export function runCli(
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs = CHILD_HUNG_MS,
): Promise<CliResult> {
  return runToExit("src/cli/main.ts", args, env, timeoutMs);
}

/** Runs an entry point (see entryPoint) with exactly the given service settings until it exits: a server that fails to start, a CLI command. */
export function runToExit(
  entry: "src/main.ts" | "src/cli/main.ts",
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs = CHILD_HUNG_MS,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...entryPoint(entry), ...args], {
      cwd: repoRoot,
      env: childEnv(env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(
        new Error(
          `${entry} ${args.join(" ")} did not finish within ${timeoutMs} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`,
        ),
      );
    }, timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
