// The load-generator process: `node --import tsx bench/loadgen.ts`, forked by bench/run.ts and
// driven over IPC. It runs every scenario's load (autocannon, grpc-js), so the generator never
// shares an event loop with the orchestrator or a server, and it reads the measured server's
// CPU time and RSS from /proc right at the edges of the measured window (after the warm-up,
// when the load starts; when the last response is in).
//
// On the bench's 2-core machine this process still competes with the servers for CPU — as it
// does for every scenario alike. Server CPU per request (from /proc) does not depend on that
// competition the way req/s does.
import { dpopProof } from "./client-proofs.js";
import { request as httpRequest } from "./http.js";
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
import { machineCpu, rssBytes, treesCpuMicros } from "./procstat.js";

export type LoadJob =
  | {
      readonly kind: "http";
      /** Several: the connections are assigned to them round-robin (autocannon's url list). */
      readonly baseUrl: string | readonly string[];
      readonly variants: readonly HttpRequestSpec[];
      readonly connections: number;
    }
  | {
      readonly kind: "grpc";
      /** host:port; several: the channels are assigned to them round-robin, so calls go round-robin too. */
      readonly target: string | readonly string[];
      readonly channels: number;
      readonly concurrency: number;
      /** The AuthService RPC (FetchOauth2Token when absent). */
      readonly method?: GrpcMethod;
      /** Its requests (camelCase fields), taken round-robin. */
      readonly requests: readonly object[];
    }
  | {
      /** Several loads at once (the scaling scenario's mix), each counted and timed on its own too. */
      readonly kind: "mixed";
      readonly parts: ReadonlyArray<{ readonly label: string; readonly job: Exclude<LoadJob, { kind: "mixed" }> }>;
    };

export interface LoadRequest {
  readonly id: number;
  readonly job: LoadJob;
  readonly warmupS: number;
  readonly durationS: number;
  readonly expected: readonly string[];
  /** The server whose CPU and memory are measured. */
  readonly serverPid: number;
  /** More processes (trees) whose CPU is read at the same edges, by name. */
  readonly alsoMeasure?: Readonly<Record<string, number>>;
}

/** One part of a mixed job, measured on its own. */
export interface LoadPartResult {
  readonly label: string;
  readonly elapsedMs: number;
  readonly statuses: Record<string, number>;
  readonly transportErrors: number;
  readonly latencyMs: { p50: number; p90: number; p99: number; max: number };
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
  /** CPU of the alsoMeasure processes over the window (null: gone or unreadable). */
  readonly alsoMeasuredCpuMicros?: Record<string, number | null>;
  /** A mixed job's parts (the figures above are over all of them). */
  readonly parts?: LoadPartResult[];
}

export type LoadReply =
  { readonly id: number; readonly result: LoadResult } | { readonly id: number; readonly error: string };

const grpcClients = new Map<string, AuthClient[]>();
const repoRoot = new URL("../", import.meta.url).pathname;

type SingleJob = Exclude<LoadJob, { kind: "mixed" }>;

async function loadOnce(job: SingleJob, durationS: number, expected: ReadonlySet<string>): Promise<LoadSample> {
  if (job.kind === "http") {
    const variants = await withDpopNonces(job.baseUrl, job.variants);
    return runAutocannon(job.baseUrl, variants, { connections: job.connections, durationS, expected });
  }
  const targets = typeof job.target === "string" ? [job.target] : job.target;
  const key = `${targets.join(",")}/${job.channels}`;
  let clients = grpcClients.get(key);
  if (!clients) {
    // Channel i on target i mod n: round-robin over the channels is round-robin over the targets.
    const perTarget = targets.map((t, i) =>
      grpcAuthClients(repoRoot, t, Math.ceil((job.channels - i) / targets.length)),
    );
    clients = Array.from(
      { length: job.channels },
      (_, i) => perTarget[i % targets.length]![Math.floor(i / targets.length)]!,
    );
    grpcClients.set(key, clients);
  }
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

/**
 * DPoP variants with the server's current nonce, asked for as a client does (a proof without one
 * is answered use_dpop_nonce with the DPoP-Nonce header): a nonce is accepted for a minute at
 * least, longer than any measured run.
 */
async function withDpopNonces(
  baseUrl: string | readonly string[],
  variants: readonly HttpRequestSpec[],
): Promise<readonly HttpRequestSpec[]> {
  const probe = variants.find((v) => v.dpop);
  if (!probe?.dpop) return variants;
  const answer = await httpRequest(`${typeof baseUrl === "string" ? baseUrl : baseUrl[0]}${probe.path}`, {
    method: probe.method,
    headers: { ...probe.headers, dpop: dpopProof({ ...probe.dpop, nonce: undefined }) },
    body: probe.body,
  });
  const nonce = answer.headers["dpop-nonce"];
  if (typeof nonce !== "string") throw new Error(`no DPoP-Nonce from ${probe.path} (status ${answer.status})`);
  return variants.map((v) => (v.dpop ? { ...v, dpop: { ...v.dpop, nonce } } : v));
}

/** Every part of the job at once; a single job is one part. */
async function loadParts(
  job: LoadJob,
  durationS: number,
  expected: ReadonlySet<string>,
): Promise<Array<{ label: string; sample: LoadSample }>> {
  const parts = job.kind === "mixed" ? job.parts : [{ label: "", job }];
  const samples = await Promise.all(parts.map((p) => loadOnce(p.job, durationS, expected)));
  return parts.map((p, i) => ({ label: p.label, sample: samples[i]! }));
}

const latencyOf = (sorted: Float64Array) => ({
  p50: percentile(sorted, 50),
  p90: percentile(sorted, 90),
  p99: percentile(sorted, 99),
  max: sorted.length ? sorted[sorted.length - 1]! : NaN,
});

/** The parts' samples as one: statuses summed, latencies pooled, the longest part's time. */
function merged(parts: ReadonlyArray<{ sample: LoadSample }>): LoadSample {
  const statuses: Record<string, number> = {};
  const transportErrorKinds: Record<string, number> = {};
  for (const { sample } of parts) {
    for (const [k, n] of Object.entries(sample.statuses)) statuses[k] = (statuses[k] ?? 0) + n;
    for (const [k, n] of Object.entries(sample.transportErrorKinds))
      transportErrorKinds[k] = (transportErrorKinds[k] ?? 0) + n;
  }
  const latenciesMs = new Float64Array(parts.reduce((a, p) => a + p.sample.latenciesMs.length, 0));
  let at = 0;
  for (const { sample } of parts) {
    latenciesMs.set(sample.latenciesMs, at);
    at += sample.latenciesMs.length;
  }
  return {
    elapsedMs: Math.max(...parts.map((p) => p.sample.elapsedMs)),
    statuses,
    transportErrors: parts.reduce((a, p) => a + p.sample.transportErrors, 0),
    transportErrorKinds,
    latenciesMs: latenciesMs.sort(),
  };
}

/** Longer than any in-flight request of a warm-up takes to be answered (p99 of every scenario is well under it). */
const IN_FLIGHT_DRAIN_MS = 500;

async function handle(request: LoadRequest): Promise<LoadResult> {
  const expected = new Set(request.expected);
  const rssBefore = rssBytes(request.serverPid) ?? null;
  if (request.warmupS > 0) {
    await loadParts(request.job, request.warmupS, expected);
    // autocannon closes its connections at the deadline with requests still in flight, which the
    // server goes on serving: the measured run starting at once met up to twice its connections
    // (one TMC's introspections queued 69 deep: 429 TOO_MANY_CONCURRENT_REQUESTS in the measured
    // window, and the warm-up's tail in its CPU). They drain first.
    await new Promise((resolve) => setTimeout(resolve, IN_FLIGHT_DRAIN_MS));
  }
  const measured = [request.serverPid, ...Object.values(request.alsoMeasure ?? {})];
  const cpu0 = treesCpuMicros(measured);
  const own0 = process.cpuUsage();
  const machine0 = machineCpu();
  const parts = await loadParts(request.job, request.durationS, expected);
  const cpu1 = treesCpuMicros(measured);
  const own1 = process.cpuUsage(own0);
  const machine1 = machineCpu();
  const used = (i: number) => (cpu0[i] === undefined || cpu1[i] === undefined ? null : cpu1[i]! - cpu0[i]!);
  const sample = merged(parts);
  return {
    elapsedMs: sample.elapsedMs,
    statuses: sample.statuses,
    transportErrors: sample.transportErrors,
    transportErrorKinds: sample.transportErrorKinds,
    latencyMs: latencyOf(sample.latenciesMs),
    serverCpuMicros: used(0),
    serverRssBeforeBytes: rssBefore,
    serverRssAfterBytes: rssBytes(request.serverPid) ?? null,
    loadgenCpuMicros: own1.user + own1.system,
    machineBusyPercent: (100 * (machine1.busy - machine0.busy)) / Math.max(1, machine1.total - machine0.total),
    ...(request.alsoMeasure
      ? {
          alsoMeasuredCpuMicros: Object.fromEntries(
            Object.keys(request.alsoMeasure).map((name, i) => [name, used(i + 1)]),
          ),
        }
      : {}),
    ...(request.job.kind === "mixed"
      ? {
          parts: parts.map(({ label, sample: s }) => ({
            label,
            elapsedMs: s.elapsedMs,
            statuses: s.statuses,
            transportErrors: s.transportErrors,
            latencyMs: latencyOf(s.latenciesMs),
          })),
        }
      : {}),
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
