// Closed-loop load generators: autocannon for HTTP/1.1, a hand-rolled loop of N in-flight
// @grpc/grpc-js calls for gRPC. Both record every response's status and latency themselves, so
// the two faces are counted and timed the same way (wall-clock ms from send to full response).
import { performance } from "node:perf_hooks";
import autocannon from "autocannon";

/** What one measured run saw. Latencies only of responses with an expected status. */
export interface LoadSample {
  readonly elapsedMs: number;
  readonly statuses: Record<string, number>;
  /** Transport failures: connection errors, timeouts (never reached a status). */
  readonly transportErrors: number;
  /** Transport failures by error code or message. */
  readonly transportErrorKinds: Record<string, number>;
  readonly latenciesMs: Float64Array;
}

class Recorder {
  readonly statuses: Record<string, number> = {};
  transportErrors = 0;
  readonly transportErrorKinds: Record<string, number> = {};
  private latencies = new Float64Array(1 << 16);
  private count = 0;

  constructor(private readonly expected: ReadonlySet<string>) {}

  response(status: string, ms: number): void {
    this.statuses[status] = (this.statuses[status] ?? 0) + 1;
    if (!this.expected.has(status)) return;
    if (this.count === this.latencies.length) {
      const bigger = new Float64Array(this.latencies.length * 2);
      bigger.set(this.latencies);
      this.latencies = bigger;
    }
    this.latencies[this.count++] = ms;
  }

  error(error: unknown): void {
    this.transportErrors++;
    const e = error as { code?: unknown; message?: unknown } | undefined;
    const kind = typeof e?.code === "string" ? e.code : String(e?.message ?? error).slice(0, 80);
    this.transportErrorKinds[kind] = (this.transportErrorKinds[kind] ?? 0) + 1;
  }

  sample(elapsedMs: number): LoadSample {
    return {
      elapsedMs,
      statuses: this.statuses,
      transportErrors: this.transportErrors,
      transportErrorKinds: this.transportErrorKinds,
      latenciesMs: this.latencies.slice(0, this.count).sort(),
    };
  }
}

export interface HttpLoad {
  readonly url: string;
  readonly method: "GET" | "POST";
  readonly headers?: Record<string, string>;
  readonly body?: string;
}

export function runAutocannon(load: HttpLoad, options: { connections: number; durationS: number; expected: ReadonlySet<string> }): Promise<LoadSample> {
  const recorder = new Recorder(options.expected);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: load.url,
        method: load.method,
        headers: load.headers ?? {},
        ...(load.body === undefined ? {} : { body: load.body }),
        connections: options.connections,
        duration: options.durationS,
        pipelining: 1,
        timeout: 10,
        // autocannon checks its deadline only on these ticks: 1 s (the default) would overrun
        // fractional durations (the A-B-B-A halves) by up to a second.
        sampleInt: 100,
      },
      (error, result) => {
        if (error) return reject(error);
        // autocannon's `errors` counts connection errors and timeouts (no status to record).
        resolve({ ...recorder.sample(performance.now() - started), transportErrors: result.errors });
      },
    );
    instance.on("reqError", (error: unknown) => recorder.error(error));
    instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTimeMs: number) =>
      recorder.response(String(statusCode), responseTimeMs),
    );
  });
}

/**
 * `concurrency` callers, each sending its next call as soon as the previous one completed,
 * until `durationS` has passed; in-flight calls at the deadline are awaited and counted.
 */
export async function runClosedLoop(
  call: () => Promise<string>,
  options: { concurrency: number; durationS: number; expected: ReadonlySet<string> },
): Promise<LoadSample> {
  const recorder = new Recorder(options.expected);
  const started = performance.now();
  const deadline = started + options.durationS * 1000;
  const caller = async () => {
    while (performance.now() < deadline) {
      const t0 = performance.now();
      let status: string;
      try {
        status = await call();
      } catch (error) {
        recorder.error(error);
        continue;
      }
      recorder.response(status, performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, caller));
  return recorder.sample(performance.now() - started);
}

/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}
