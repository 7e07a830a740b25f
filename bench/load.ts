// Closed-loop load generators, run inside the load-generator process (bench/loadgen.ts):
// autocannon for HTTP/1.1, a loop of N in-flight @grpc/grpc-js calls spread over several
// channels for gRPC. Both record every response's status and latency themselves, so the two
// faces are counted and timed the same way (wall-clock ms from send to full response). Request
// variants (one per client) are taken round-robin across all connections, request by request.
import path from "node:path";
import { performance } from "node:perf_hooks";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import autocannon from "autocannon";
import { clientAssertion, dpopProof, type AssertionSpec, type DpopSpec } from "./client-proofs.js";

/** What one measured run saw. */
export interface LoadSample {
  readonly elapsedMs: number;
  readonly statuses: Record<string, number>;
  /** Transport failures: connection errors, timeouts (never reached a status). */
  readonly transportErrors: number;
  /** Transport failures by error code or message. */
  readonly transportErrorKinds: Record<string, number>;
  /** Latencies (ms) of the responses with an expected status, ascending. */
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

/** One HTTP request variant (path relative to the target's base URL). */
export interface HttpRequestSpec {
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  /** A form body gets `&client_assertion=` a fresh private_key_jwt assertion for each request (each is usable once). */
  readonly assertion?: AssertionSpec;
  /** Each request gets a fresh DPoP proof for this request (each is usable once) in its DPoP header. */
  readonly dpop?: DpopSpec;
}

export function runAutocannon(
  baseUrl: string | readonly string[],
  variants: readonly HttpRequestSpec[],
  options: { connections: number; durationS: number; expected: ReadonlySet<string> },
): Promise<LoadSample> {
  if (variants.length === 0) throw new Error("no request variants");
  const recorder = new Recorder(options.expected);
  let next = 0;
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: typeof baseUrl === "string" ? baseUrl : [...baseUrl],
        connections: options.connections,
        duration: options.durationS,
        pipelining: 1,
        timeout: 10,
        // autocannon checks its deadline only on these ticks; 1 s (the default) overruns.
        sampleInt: 100,
        // One request entry whose setupRequest is called for every request: the next variant
        // round-robin over all connections (so each client is used in turn, no hot client).
        requests: [
          {
            setupRequest: (request) => {
              const v = variants[next++ % variants.length]!;
              return {
                ...request,
                method: v.method,
                path: v.path,
                headers: { ...request.headers, ...v.headers, ...(v.dpop ? { dpop: dpopProof(v.dpop) } : {}) },
                body: v.assertion ? `${v.body ?? ""}&client_assertion=${clientAssertion(v.assertion)}` : (v.body ?? ""),
              };
            },
          },
        ],
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

// ---- gRPC: grpc-js with the schema from proto/ (an independent client: nothing generated here)

/** The AuthService RPCs the bench loads, by their grpc-js (camelCase) names. */
export type GrpcMethod = "fetchOauth2Token" | "introspectToken" | "introspectTokens";

type GrpcCallback = (error: grpc.ServiceError | null, response?: Record<string, unknown>) => void;
export type AuthClient = grpc.Client &
  Record<
    GrpcMethod,
    (
      request: object,
      metadata: grpc.Metadata,
      options: grpc.CallOptions,
      callback: GrpcCallback,
    ) => grpc.ClientUnaryCall
  >;

/** What an answer must hold to count as the scenario's success ("OK"): a token, an active token, every token active. */
const ANSWERED: Record<GrpcMethod, (response: Record<string, unknown> | undefined) => boolean> = {
  fetchOauth2Token: (r) => typeof r?.accessToken === "string" && r.accessToken !== "",
  introspectToken: (r) => r?.active === true,
  introspectTokens: (r) =>
    Array.isArray(r?.results) && r.results.every((x) => (x as { active?: boolean }).active === true),
};

/** `channels` AuthService clients, each on its own HTTP/2 connection to `target` (host:port). */
export function grpcAuthClients(repoRoot: string, target: string, channels: number): AuthClient[] {
  const definition = protoLoader.loadSync(["travel/auth/v2/auth.proto"], {
    includeDirs: [path.join(repoRoot, "proto")],
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    travel: {
      auth: {
        v2: {
          AuthService: new (
            address: string,
            credentials: grpc.ChannelCredentials,
            options: grpc.ChannelOptions,
          ) => AuthClient;
        };
      };
    };
  };
  // A local subchannel pool per client: each channel opens its own HTTP/2 connection. Channelz
  // off, as grpc-go ships it: grpc-js's debugging registry (on by default) cost the generator 20 %
  // of its CPU per call here (166 → 131 µs against a server that does nothing), CPU the server
  // under test shares on this 2-core machine. It changes nothing on the wire.
  return Array.from(
    { length: channels },
    () =>
      new loaded.travel.auth.v2.AuthService(target, grpc.credentials.createInsecure(), {
        "grpc.use_local_subchannel_pool": 1,
        "grpc.enable_channelz": 0,
      }),
  );
}

/**
 * One call of `method`; resolves with "OK" (the answer holds what ANSWERED asks), "OK but …" (it
 * does not), or the gRPC status name; with the answer.
 */
export function grpcCall(
  client: AuthClient,
  method: GrpcMethod,
  request: object,
): Promise<{ status: string; response?: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    client[method](request, new grpc.Metadata(), { deadline: Date.now() + 10_000 }, (error, response) => {
      if (!error) return resolve({ status: ANSWERED[method](response) ? "OK" : `OK but not as expected`, response });
      if (typeof error.code === "number") return resolve({ status: grpc.status[error.code] ?? `code ${error.code}` });
      reject(error);
    });
  });
}

/** One FetchOauth2Token call; resolves with "OK" (a token came back) or the gRPC status name. */
export async function grpcIssue(
  client: AuthClient,
  request: object,
): Promise<{ status: string; accessToken?: string }> {
  const { status, response } = await grpcCall(client, "fetchOauth2Token", request);
  return status === "OK" ? { status, accessToken: response!.accessToken as string } : { status };
}
