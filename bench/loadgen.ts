// The load-generator process: `node --import tsx bench/loadgen.ts`, forked by bench/run.ts and
// driven over IPC. It runs every scenario's load (autocannon, grpc-js), so the generator never
// shares an event loop with the orchestrator or a server, and it reads the measured server's
// CPU time and RSS from /proc right at the edges of the measured window (after the warm-up,
// when the load starts; when the last response is in).
//
// On the bench's 2-core machine this process still competes with the servers for CPU — as it
// does for every scenario alike. Server CPU per request (from /proc) does not depend on that
// competition the way req/s does.
import {
  grpcAuthClients,
  grpcCall,
  percentile,
  runAutocannon,
  runClosedLoop,
  type AuthClient,
  type GrpcMethod,
  type HttpRequestSpec,
  type LoadSample,
} from "./load.js";
import { machineCpu, rssBytes, treeCpuMicros } from "./procstat.js";

export type LoadJob =
  | {
      readonly kind: "http";
      readonly baseUrl: string;
      readonly variants: readonly HttpRequestSpec[];
      readonly connections: number;
    }
  | {
      readonly kind: "grpc";
      /** host:port */
      readonly target: string;
      readonly channels: number;
      readonly concurrency: number;
      /** The AuthService RPC (FetchOauth2Token when absent). */
      readonly method?: GrpcMethod;
      /** Its requests (camelCase fields), taken round-robin. */
      readonly requests: readonly object[];
    };

export interface LoadRequest {
  readonly id: number;
  readonly job: LoadJob;
  readonly warmupS: number;
  readonly durationS: number;
  readonly expected: readonly string[];
  /** The server whose CPU and memory are measured. */
  readonly serverPid: number;
}

export interface LoadResult {
  readonly elapsedMs: number;
  readonly statuses: Record<string, number>;
  readonly transportErrors: number;
  readonly transportErrorKinds: Record<string, number>;
  readonly latencyMs: { p50: number; p90: number; p99: number; max: number };
  /** Server process tree CPU over the measured window; null if /proc could not be read. */
  readonly serverCpuMicros: number | null;
  readonly serverRssBeforeBytes: number | null;
  readonly serverRssAfterBytes: number | null;
  /** This generator's own CPU over the measured window. */
  readonly loadgenCpuMicros: number;
  /** All cores busy over the measured window (servers, generator, Postgres, Redis, others). */
  readonly machineBusyPercent: number;
}

export type LoadReply =
  { readonly id: number; readonly result: LoadResult } | { readonly id: number; readonly error: string };

const grpcClients = new Map<string, AuthClient[]>();
const repoRoot = new URL("../", import.meta.url).pathname;

function loadOnce(job: LoadJob, durationS: number, expected: ReadonlySet<string>): Promise<LoadSample> {
  if (job.kind === "http")
    return runAutocannon(job.baseUrl, job.variants, { connections: job.connections, durationS, expected });
  const key = `${job.target}/${job.channels}`;
  let clients = grpcClients.get(key);
  if (!clients) grpcClients.set(key, (clients = grpcAuthClients(repoRoot, job.target, job.channels)));
  const channels = clients;
  let next = 0;
  return runClosedLoop(
    async () => {
      const n = next++;
      const request = job.requests[n % job.requests.length]!;
      return (await grpcCall(channels[n % channels.length]!, job.method ?? "fetchOauth2Token", request)).status;
    },
    { concurrency: job.concurrency, durationS, expected },
  );
}

async function handle(request: LoadRequest): Promise<LoadResult> {
  const expected = new Set(request.expected);
  const rssBefore = rssBytes(request.serverPid) ?? null;
  if (request.warmupS > 0) await loadOnce(request.job, request.warmupS, expected);
  const cpu0 = treeCpuMicros(request.serverPid);
  const own0 = process.cpuUsage();
  const machine0 = machineCpu();
  const sample = await loadOnce(request.job, request.durationS, expected);
  const cpu1 = treeCpuMicros(request.serverPid);
  const own1 = process.cpuUsage(own0);
  const machine1 = machineCpu();
  return {
    elapsedMs: sample.elapsedMs,
    statuses: sample.statuses,
    transportErrors: sample.transportErrors,
    transportErrorKinds: sample.transportErrorKinds,
    latencyMs: {
      p50: percentile(sample.latenciesMs, 50),
      p90: percentile(sample.latenciesMs, 90),
      p99: percentile(sample.latenciesMs, 99),
      max: sample.latenciesMs.length ? sample.latenciesMs[sample.latenciesMs.length - 1]! : NaN,
    },
    serverCpuMicros: cpu0 === undefined || cpu1 === undefined ? null : cpu1 - cpu0,
    serverRssBeforeBytes: rssBefore,
    serverRssAfterBytes: rssBytes(request.serverPid) ?? null,
    loadgenCpuMicros: own1.user + own1.system,
    machineBusyPercent: (100 * (machine1.busy - machine0.busy)) / Math.max(1, machine1.total - machine0.total),
  };
}

if (!process.send) {
  process.stderr.write("bench/loadgen.ts is started by bench/run.ts (it needs an IPC channel)\n");
  process.exit(2);
}
process.on("message", (message: LoadRequest | { exit: true }) => {
  if ("exit" in message) {
    for (const clients of grpcClients.values()) for (const c of clients) c.close();
    process.disconnect?.();
    return;
  }
  handle(message).then(
    (result) => process.send!({ id: message.id, result } satisfies LoadReply),
    (error: unknown) =>
      process.send!({
        id: message.id,
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      } satisfies LoadReply),
  );
});
// The orchestrator gone (Ctrl-C, crash): nothing left to do.
process.on("disconnect", () => process.exit(0));
