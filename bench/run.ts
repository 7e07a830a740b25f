// `npm run bench`: measures the service's hot paths against one child-process instance on
// 127.0.0.1 and prints a table. Every figure is also given as a ratio to GET /healthz measured in
// the same run (twice: first and last, to show drift), because absolute numbers on a small,
// shared machine say more about the machine than about the code.
//
//   npm run -s bench -- [--duration 8] [--connections 16] [--warmup 1] [--embedded] [--json]
//                       [--only KEYS] [--grpc-channels 1] [--cpu-prof DIR] [--log-level info]
import { execFileSync } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { percentile, runAutocannon, runClosedLoop, type HttpLoad, type LoadSample } from "./load.js";
import { machineCpu, processCpuSeconds, repoRoot, startBenchServer, type BenchServer, type LogSummary } from "./server.js";

const HELP = `Usage: npm run -s bench -- [options]

Starts the service as a child process (node --import tsx src/main.ts, HOST=127.0.0.1, PORT=0),
seeds it through OperatorService.Seed and measures, one after the other, with closed-loop load:
  GET /healthz (baseline, first and last), POST /v2/auth/oauth2-token (REST) and
  AuthService.FetchOauth2Token (gRPC, grpc-js) interleaved A-B-B-A, GET /v2/api-users?limit=10
  (Bearer token), POST /v2/auth/introspect. Each scenario's answer is checked before the load
  and every response's status is counted; figures are also given as ratios to /healthz.

Options:
  --duration N      measured seconds per scenario (default 8)
  --connections N   HTTP connections / in-flight gRPC calls (default 16)
  --warmup N        unmeasured seconds before each scenario (default 1; 0 disables)
  --embedded        PGlite + in-process Redis stand-in instead of Postgres + Redis at 127.0.0.1
  --log-level L     the service's LOG_LEVEL (default info, as deployed: two log lines per request)
  --only KEYS       comma-separated scenarios to run besides the healthz baseline: rest-issuance,
                    grpc-issuance, rest-authenticated-read, rest-introspection
  --grpc-channels N grpc-js channels (one HTTP/2 connection each) sharing the in-flight calls (default 1)
  --cpu-prof DIR    run the service with node --cpu-prof, writing its .cpuprofile into DIR
                    (pick a directory outside the repository)
  --json            print the results as JSON instead of the table
  -h, --help        this text

Backend (default): BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/test) in a fresh
schema bench_<random>, BENCH_REDIS_URL (redis://127.0.0.1:6379) under a fresh key prefix; both
are removed at the end. Nothing is written into the repository.`;

interface Options {
  durationS: number;
  connections: number;
  warmupS: number;
  embedded: boolean;
  logLevel: string;
  json: boolean;
  only: ReadonlySet<string> | undefined;
  grpcChannels: number;
  cpuProfDir: string | undefined;
}

const MEASURED_SCENARIOS = ["rest-issuance", "grpc-issuance", "rest-authenticated-read", "rest-introspection"];

const ARGUMENTS = {
  duration: { type: "string" },
  connections: { type: "string" },
  warmup: { type: "string" },
  embedded: { type: "boolean" },
  "log-level": { type: "string" },
  only: { type: "string" },
  "grpc-channels": { type: "string" },
  "cpu-prof": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

function parseOptions(argv: string[]): Options {
  const { values } = (() => {
    try {
      return parseArgs({ args: argv, options: ARGUMENTS, strict: true, allowPositionals: false });
    } catch (error) {
      return usage((error as Error).message);
    }
  })();
  if (values.help) {
    process.stdout.write(`${HELP}\n`);
    process.exit(0);
  }
  const int = (name: string, raw: string | undefined, fallback: number, min: number, max: number) => {
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) usage(`--${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
    return Number(raw);
  };
  const logLevel = values["log-level"] ?? "info";
  if (!["trace", "debug", "info", "warn", "error", "fatal", "silent"].includes(logLevel)) usage(`--log-level must be a pino level, got "${logLevel}"`);
  const only = values.only === undefined ? undefined : new Set(values.only.split(",").map((k) => k.trim()).filter((k) => k !== ""));
  for (const key of only ?? []) if (!MEASURED_SCENARIOS.includes(key)) usage(`--only: unknown scenario "${key}" (${MEASURED_SCENARIOS.join(", ")})`);
  return {
    durationS: int("duration", values.duration, 8, 1, 600),
    connections: int("connections", values.connections, 16, 1, 1024),
    warmupS: int("warmup", values.warmup, 1, 0, 60),
    embedded: values.embedded ?? false,
    logLevel,
    json: values.json ?? false,
    only,
    grpcChannels: int("grpc-channels", values["grpc-channels"], 1, 1, 64),
    cpuProfDir: values["cpu-prof"] === undefined ? undefined : path.resolve(values["cpu-prof"]),
  };
}

function usage(message: string): never {
  process.stderr.write(`bench: ${message}\n\n${HELP}\n`);
  process.exit(2);
}

const progress = (message: string) => process.stderr.write(`bench: ${message}\n`);

// ---- scenarios -----------------------------------------------------------------------------

/** What one request of a scenario answered before the load started (checked, not assumed). */
interface Preflight {
  readonly ok: boolean;
  /** e.g. "200 access_token" or "501 NOT_IMPLEMENTED after authentication". */
  readonly answered: string;
  /** Statuses that count as the scenario's expected answer under load. */
  readonly expected: readonly string[];
}

interface Scenario {
  readonly key: string;
  readonly title: string;
  readonly face: "REST" | "gRPC";
  preflight(): Promise<Preflight>;
  run(durationS: number, expected: ReadonlySet<string>): Promise<LoadSample>;
}

interface Row {
  readonly key: string;
  readonly title: string;
  readonly face: "REST" | "gRPC";
  readonly answered: string;
  readonly expected: readonly string[];
  readonly verdict: "ok" | "UNEXPECTED STATUSES" | "FAILED: NO EXPECTED RESPONSE";
  /** Measured segments (the two issuance scenarios alternate A-B-B-A, so both see the same noise). */
  readonly segments: number;
  readonly elapsedS: number;
  readonly responses: number;
  /** Responses with an expected status per second: the throughput figure. */
  readonly okPerSecond: number;
  readonly unexpected: number;
  readonly transportErrors: number;
  readonly transportErrorKinds: Record<string, number>;
  readonly statuses: Record<string, number>;
  readonly latencyMs: { p50: number; p90: number; p99: number; max: number };
  /** Share of one core used by the service process / by this load generator; whole machine busy. */
  readonly cpu: {
    servicePercentOfCore: number | null;
    /** Service CPU time per response: steadier than req/s when other processes share the cores. */
    serviceMsPerResponse: number | null;
    benchPercentOfCore: number;
    machineBusyPercent: number;
  };
}

async function httpPreflight(load: HttpLoad, judge: (status: number, body: unknown) => Preflight): Promise<Preflight> {
  try {
    const response = await fetch(load.url, { method: load.method, headers: load.headers, body: load.body });
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: judged as text
    }
    return judge(response.status, body);
  } catch (error) {
    return { ok: false, answered: `request failed: ${(error as Error).message}`, expected: [] };
  }
}

function errorCodeOf(body: unknown): string {
  const messages = (body as { errorMessages?: Array<{ errorCode?: string }> } | null)?.errorMessages;
  return messages?.[0]?.errorCode ?? "";
}

function httpScenario(
  key: string,
  title: string,
  load: HttpLoad,
  connections: number,
  judge: (status: number, body: unknown) => Preflight,
): Scenario {
  return {
    key,
    title,
    face: "REST",
    preflight: () => httpPreflight(load, judge),
    run: (durationS, expected) => runAutocannon(load, { connections, durationS, expected }),
  };
}

// grpc-js with the schema from proto/ (an independent client: nothing generated by this repo).
type GrpcCallback = (error: grpc.ServiceError | null, response?: { accessToken?: string }) => void;
interface AuthClient extends grpc.Client {
  fetchOauth2Token(request: object, metadata: grpc.Metadata, options: grpc.CallOptions, callback: GrpcCallback): grpc.ClientUnaryCall;
}

function grpcAuthClients(baseUrl: string, channels: number): AuthClient[] {
  const definition = protoLoader.loadSync(["travel/auth/v2/auth.proto"], {
    includeDirs: [path.join(repoRoot, "proto")],
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    travel: { auth: { v2: { AuthService: new (address: string, credentials: grpc.ChannelCredentials, options: grpc.ChannelOptions) => AuthClient } } };
  };
  // A local subchannel pool per client: each channel opens its own HTTP/2 connection.
  const channelOptions = channels > 1 ? { "grpc.use_local_subchannel_pool": 1 } : {};
  return Array.from(
    { length: channels },
    () => new loaded.travel.auth.v2.AuthService(new URL(baseUrl).host, grpc.credentials.createInsecure(), channelOptions),
  );
}

/** One FetchOauth2Token call; resolves with "OK" (a token came back) or the gRPC status name. */
function grpcIssue(client: AuthClient, request: object): Promise<string> {
  return new Promise((resolve, reject) => {
    client.fetchOauth2Token(request, new grpc.Metadata(), { deadline: Date.now() + 10_000 }, (error, response) => {
      if (!error) return resolve(response?.accessToken ? "OK" : "OK without access_token");
      if (typeof error.code === "number") return resolve(grpc.status[error.code] ?? `code ${error.code}`);
      reject(error);
    });
  });
}

// ---- measuring -----------------------------------------------------------------------------

/** Everything measured for one scenario, summed over its segments. */
class Measurement {
  readonly statuses: Record<string, number> = {};
  readonly transportErrorKinds: Record<string, number> = {};
  transportErrors = 0;
  elapsedMs = 0;
  serviceCpuS: number | null = 0;
  benchCpuUs = 0;
  machineBusyMs = 0;
  machineTotalMs = 0;
  private readonly latencies: Float64Array[] = [];

  constructor(
    readonly scenario: Scenario,
    readonly preflight: Preflight,
  ) {}

  get expected(): ReadonlySet<string> {
    return new Set(this.preflight.expected);
  }

  /** Runs the scenario for `durationS` and adds what it saw. */
  async segment(durationS: number, server: BenchServer): Promise<void> {
    const service0 = processCpuSeconds(server.pid);
    const bench0 = process.cpuUsage();
    const machine0 = machineCpu();
    const sample = await this.scenario.run(durationS, this.expected);
    const service1 = processCpuSeconds(server.pid);
    const bench1 = process.cpuUsage(bench0);
    const machine1 = machineCpu();
    for (const [status, n] of Object.entries(sample.statuses)) this.statuses[status] = (this.statuses[status] ?? 0) + n;
    for (const [kind, n] of Object.entries(sample.transportErrorKinds)) this.transportErrorKinds[kind] = (this.transportErrorKinds[kind] ?? 0) + n;
    this.transportErrors += sample.transportErrors;
    this.elapsedMs += sample.elapsedMs;
    this.serviceCpuS = this.serviceCpuS === null || service0 === undefined || service1 === undefined ? null : this.serviceCpuS + service1 - service0;
    this.benchCpuUs += bench1.user + bench1.system;
    this.machineBusyMs += machine1.busy - machine0.busy;
    this.machineTotalMs += machine1.total - machine0.total;
    this.latencies.push(sample.latenciesMs);
  }

  row(): Row {
    const expected = this.expected;
    const elapsedS = this.elapsedMs / 1000;
    const responses = Object.values(this.statuses).reduce((a, b) => a + b, 0);
    const ok = Object.entries(this.statuses)
      .filter(([status]) => expected.has(status))
      .reduce((a, [, n]) => a + n, 0);
    const unexpected = responses - ok;
    const verdict: Row["verdict"] =
      ok === 0 ? "FAILED: NO EXPECTED RESPONSE" : unexpected > 0 || this.transportErrors > 0 ? "UNEXPECTED STATUSES" : "ok";
    const lat = new Float64Array(this.latencies.reduce((a, l) => a + l.length, 0));
    let offset = 0;
    for (const l of this.latencies) {
      lat.set(l, offset);
      offset += l.length;
    }
    lat.sort();
    return {
      key: this.scenario.key,
      title: this.scenario.title,
      face: this.scenario.face,
      answered: this.preflight.answered,
      expected: this.preflight.expected,
      verdict,
      segments: this.latencies.length,
      elapsedS,
      responses,
      okPerSecond: ok / elapsedS,
      unexpected,
      transportErrors: this.transportErrors,
      transportErrorKinds: this.transportErrorKinds,
      statuses: this.statuses,
      latencyMs: { p50: percentile(lat, 50), p90: percentile(lat, 90), p99: percentile(lat, 99), max: lat.length ? lat[lat.length - 1]! : NaN },
      cpu: {
        servicePercentOfCore: this.serviceCpuS === null ? null : (100 * this.serviceCpuS) / elapsedS,
        serviceMsPerResponse: this.serviceCpuS === null || responses === 0 ? null : (1000 * this.serviceCpuS) / responses,
        benchPercentOfCore: (100 * this.benchCpuUs) / 1e6 / elapsedS,
        machineBusyPercent: (100 * this.machineBusyMs) / Math.max(1, this.machineTotalMs),
      },
    };
  }
}

// ---- output --------------------------------------------------------------------------------

const fmtRate = (n: number) => (!Number.isFinite(n) ? "-" : n >= 100 ? n.toFixed(0) : n.toFixed(1));
const fmtMs = (n: number) => (!Number.isFinite(n) ? "-" : n >= 100 ? n.toFixed(0) : n.toFixed(2));
const fmtRatio = (n: number) => (!Number.isFinite(n) ? "-" : n >= 10 ? n.toFixed(1) : n.toFixed(3));
const fmtPct = (n: number | null) => (n === null || !Number.isFinite(n) ? "-" : `${n.toFixed(0)}%`);

function fmtStatuses(row: Row): string {
  const parts = Object.entries(row.statuses)
    .sort(([, a], [, b]) => b - a)
    .map(([status, n]) => `${status}×${n}${row.expected.includes(status) ? "" : "!"}`);
  if (row.transportErrors > 0) {
    const kinds = Object.entries(row.transportErrorKinds)
      .sort(([, a], [, b]) => b - a)
      .slice(0, 3)
      .map(([kind, n]) => `${kind}×${n}`);
    parts.push(`transport errors×${row.transportErrors}! (${kinds.join(", ")})`);
  }
  return parts.join(" ") || "none!";
}

function table(headers: string[], rows: string[][], rightAligned: ReadonlySet<number>): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (rightAligned.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(" | ")} |`;
  const rule = `|${widths.map((w, i) => (rightAligned.has(i) ? `${"-".repeat(w + 1)}:` : "-".repeat(w + 2))).join("|")}|`;
  return [line(headers), rule, ...rows.map(line)].join("\n");
}

interface Report {
  meta: Record<string, unknown>;
  baseline: { okPerSecond: number; p50Ms: number; cpuMsPerResponse: number | null; driftSecondVsFirst: number | null };
  rows: Row[];
  issuance: { restOkPerSecond: number; grpcOkPerSecond: number; restToGrpc: string } | null;
  serviceLog: LogSummary | null;
  problems: string[];
}

function render(report: Report): string {
  const { baseline, rows } = report;
  const out: string[] = [];
  const m = report.meta;
  out.push(
    `Benchmark of ${m.service} at commit ${m.commit} — ${m.date}`,
    `machine: ${m.cpus} × ${m.cpuModel}, load average at start ${m.loadAverage}; node ${m.node}`,
    `service: child process ${m.serviceCommand}, ${m.baseUrl}, database=${m.database}, redis=${m.redis}, LOG_LEVEL=${m.logLevel}`,
    `load: closed loop, ${m.connections} HTTP/1.1 connections (autocannon) or ${m.connections} in-flight calls on ${m.grpcChannels === 1 ? "one HTTP/2 channel" : `${m.grpcChannels} HTTP/2 channels`} (grpc-js); ` +
      `${m.warmupS} s warm-up + ${m.durationS} s measured per scenario, one after the other ` +
      `(REST and gRPC issuance interleaved A-B-B-A in ${Number(m.durationS) / 2} s segments)`,
    "",
  );
  const headers = [
    "scenario",
    "answered",
    "req/s",
    "p50 ms",
    "p99 ms",
    "statuses (! = unexpected)",
    "req/s ÷ healthz",
    "p50 × healthz",
    "svc CPU",
    "svc CPU ms/req",
    "× healthz",
    "bench CPU",
    "machine",
    "check",
  ];
  out.push(
    table(
      headers,
      rows.map((r) => [
        r.title,
        r.answered,
        fmtRate(r.okPerSecond),
        fmtMs(r.latencyMs.p50),
        fmtMs(r.latencyMs.p99),
        fmtStatuses(r),
        fmtRatio(r.okPerSecond / baseline.okPerSecond),
        fmtRatio(r.latencyMs.p50 / baseline.p50Ms),
        fmtPct(r.cpu.servicePercentOfCore),
        r.cpu.serviceMsPerResponse === null ? "-" : r.cpu.serviceMsPerResponse.toFixed(3),
        r.cpu.serviceMsPerResponse === null || baseline.cpuMsPerResponse === null ? "-" : fmtRatio(r.cpu.serviceMsPerResponse / baseline.cpuMsPerResponse),
        fmtPct(r.cpu.benchPercentOfCore),
        fmtPct(r.cpu.machineBusyPercent),
        r.verdict,
      ]),
      new Set([2, 3, 4, 6, 7, 8, 9, 10, 11, 12]),
    ),
  );
  out.push("");
  out.push(
    `baseline: GET /healthz = ${fmtRate(baseline.okPerSecond)} req/s, p50 ${fmtMs(baseline.p50Ms)} ms (mean of the first and last run; ` +
      `last ÷ first = ${baseline.driftSecondVsFirst === null ? "-" : baseline.driftSecondVsFirst.toFixed(2)}, the run's own noise)`,
  );
  if (report.issuance) out.push(`issuance REST : gRPC = ${report.issuance.restToGrpc}`);
  else if (rows.some((r) => r.key === "rest-issuance") && rows.some((r) => r.key === "grpc-issuance")) {
    out.push("issuance REST : gRPC = n/a (a token-issuance scenario failed)");
  } else out.push("issuance REST : gRPC = n/a (not both measured in this run)");
  out.push(
    "req/s counts only responses with the expected status; latencies are of those responses, send to last byte, measured by the client.",
    "svc CPU / bench CPU: share of one core used by the service process / by this load generator (can pass 100%: GC and libuv threads);",
    "svc CPU ms/req: the service's CPU time per response, steadier than req/s when other processes compete; machine: all cores busy (incl. Postgres, Redis).",
  );
  for (const r of rows) {
    if (r.verdict === "FAILED: NO EXPECTED RESPONSE") {
      out.push("", `!!! ${r.title}: NOT A THROUGHPUT FIGURE — no response had the expected status (${r.answered}). Statuses: ${fmtStatuses(r)}`);
    } else if (r.verdict !== "ok") {
      const share = (100 * (r.unexpected + r.transportErrors)) / Math.max(1, r.responses + r.transportErrors);
      out.push("", `!! ${r.title}: ${share.toFixed(2)}% of requests got an unexpected answer: ${fmtStatuses(r)}`);
    }
  }
  if (report.serviceLog) {
    const l = report.serviceLog;
    out.push("", `service log: ${l.lines} lines (${(l.bytes / 1e6).toFixed(1)} MB), ${l.warn} warn, ${l.error} error/fatal`);
    for (const s of l.samples) out.push(`  ${s}`);
  }
  if (m.cpuProfDir) out.push(`service CPU profile (node --cpu-prof, whole run): ${m.cpuProfDir}`);
  for (const p of report.problems) out.push(`problem: ${p}`);
  return out.join("\n");
}

function gitCommit(): string {
  try {
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: repoRoot, encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: repoRoot, encoding: "utf8" }).trim() !== "";
    return dirty ? `${commit} (+ uncommitted changes)` : commit;
  } catch {
    return "unknown";
  }
}

// ---- main ----------------------------------------------------------------------------------

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const scenarioCount = 2 + (options.only?.size ?? MEASURED_SCENARIOS.length);
  progress(
    `starting the service (${options.embedded ? "embedded PGlite + in-process Redis stand-in" : "Postgres + Redis at 127.0.0.1"}); ` +
      `then ${scenarioCount} scenarios × ${options.warmupS + options.durationS} s ≈ ${scenarioCount * (options.warmupS + options.durationS)} s`,
  );
  const loadAverage = os.loadavg().map((n) => n.toFixed(2)).join(" ");
  const server = await startBenchServer({ embedded: options.embedded, logLevel: options.logLevel, cpuProfDir: options.cpuProfDir });
  let interrupted = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    progress(`${signal}: stopping the service and removing its data`);
    void server.teardown().finally(() => process.exit(130));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  const problems: string[] = [];
  const rows: Row[] = [];
  let grpcClients: AuthClient[] = [];
  let serviceLog: LogSummary | null = null;
  try {
    const base = server.baseUrl;
    progress(`service at ${base} (pid ${server.pid}, database=${server.databaseKind}, redis=${server.redisKind})`);

    // Setup through the operator API (Connect JSON over HTTP/1.1).
    const seedResponse = await fetch(`${base}/travel.operator.v1.OperatorService/Seed`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.operatorToken}`, "content-type": "application/json" },
      body: "{}",
    });
    const seed = (await seedResponse.json()) as { clientId?: string; clientSecret?: string };
    if (!seedResponse.ok || !seed.clientId || !seed.clientSecret) {
      throw new Error(`OperatorService.Seed failed with ${seedResponse.status}: ${JSON.stringify(seed)}`);
    }
    const { clientId, clientSecret } = seed;
    const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
    const formHeaders = { "content-type": "application/x-www-form-urlencoded" };
    const tokenForm = form({ grant_type: "client_credentials", client_id: clientId, client_secret: clientSecret });

    const tokenResponse = await fetch(`${base}/v2/auth/oauth2-token`, { method: "POST", headers: formHeaders, body: tokenForm });
    const tokenBody = (await tokenResponse.json()) as { access_token?: string };
    const accessToken = tokenBody.access_token;
    if (!tokenResponse.ok || !accessToken) {
      problems.push(`no access token for the authenticated scenarios: POST /v2/auth/oauth2-token answered ${tokenResponse.status} ${JSON.stringify(tokenBody)}`);
    }

    const healthz = (key: string, title: string) =>
      httpScenario(key, title, { url: `${base}/healthz`, method: "GET" }, options.connections, (status, body) => {
        const ok = status === 200 && (body as { status?: string } | null)?.status === "ok";
        return { ok, answered: ok ? `200 {"status":"ok"}` : `${status} ${JSON.stringify(body).slice(0, 120)}`, expected: ["200"] };
      });
    const issuanceJudge = (status: number, body: unknown): Preflight => {
      const ok = status === 200 && typeof (body as { access_token?: unknown } | null)?.access_token === "string";
      return { ok, answered: ok ? "200 access_token" : `${status} ${errorCodeOf(body) || JSON.stringify(body).slice(0, 120)}`, expected: ["200"] };
    };
    grpcClients = grpcAuthClients(base, options.grpcChannels);
    const clients = grpcClients;
    let nextClient = 0;
    const pickClient = () => clients[nextClient++ % clients.length]!;
    const grpcRequest = { grantType: "client_credentials", clientId, clientSecret };

    const scenarios: Scenario[] = [
      healthz("healthz-first", "GET /healthz (baseline, first)"),
      httpScenario(
        "rest-issuance",
        "REST token issuance POST /v2/auth/oauth2-token",
        { url: `${base}/v2/auth/oauth2-token`, method: "POST", headers: formHeaders, body: tokenForm },
        options.connections,
        issuanceJudge,
      ),
      {
        key: "grpc-issuance",
        title: "gRPC token issuance AuthService.FetchOauth2Token",
        face: "gRPC",
        async preflight() {
          try {
            const status = await grpcIssue(clients[0]!, grpcRequest);
            return { ok: status === "OK", answered: status === "OK" ? "OK accessToken" : status, expected: ["OK"] };
          } catch (error) {
            return { ok: false, answered: `call failed: ${(error as Error).message}`, expected: ["OK"] };
          }
        },
        run: (durationS, expected) => runClosedLoop(() => grpcIssue(pickClient(), grpcRequest), { concurrency: options.connections, durationS, expected }),
      },
      httpScenario(
        "rest-authenticated-read",
        "authenticated read GET /v2/api-users?limit=10",
        { url: `${base}/v2/api-users?limit=10`, method: "GET", headers: { authorization: `Bearer ${accessToken ?? "none"}` } },
        options.connections,
        (status, body) => {
          if (status === 200) return { ok: true, answered: "200 list of API users", expected: ["200"] };
          // The access-token interceptor runs before the handler: NOT_IMPLEMENTED means the token
          // was verified (signature, expiry, audience, credential generation) and then refused.
          if (status === 501 && errorCodeOf(body) === "NOT_IMPLEMENTED") {
            return { ok: true, answered: "501 NOT_IMPLEMENTED after authentication (auth path only)", expected: ["501"] };
          }
          return { ok: false, answered: `${status} ${errorCodeOf(body) || JSON.stringify(body).slice(0, 120)}`, expected: ["200"] };
        },
      ),
      httpScenario(
        "rest-introspection",
        "introspection POST /v2/auth/introspect",
        {
          url: `${base}/v2/auth/introspect`,
          method: "POST",
          headers: formHeaders,
          body: form({ token: accessToken ?? "none", client_id: clientId, client_secret: clientSecret }),
        },
        options.connections,
        (status, body) => {
          const active = (body as { active?: unknown } | null)?.active;
          if (status === 200 && active === true) return { ok: true, answered: "200 active=true", expected: ["200"] };
          return { ok: false, answered: status === 200 ? `200 active=${String(active)} (token not recognised)` : `${status} ${errorCodeOf(body)}`, expected: ["200"] };
        },
      ),
      healthz("healthz-last", "GET /healthz (baseline, last)"),
    ];

    const selected = scenarios.filter((s) => s.key.startsWith("healthz") || !options.only || options.only.has(s.key));
    // The two issuance scenarios form one group measured A-B-B-A in half-length segments, so
    // their ratio sees the same background load; every other scenario runs alone.
    const groups: Scenario[][] = [];
    for (const scenario of selected) {
      const previous = groups.at(-1);
      if (scenario.key === "grpc-issuance" && previous?.length === 1 && previous[0]!.key === "rest-issuance") previous.push(scenario);
      else groups.push([scenario]);
    }
    const serviceDied = (when: string): boolean => {
      const died = server.exitReason();
      if (died) problems.push(`the service ${died} ${when} (at ${new Date().toISOString()}); remaining scenarios skipped.\n${server.stderr()}`);
      return died !== undefined;
    };
    let step = 0;
    measuring: for (const group of groups) {
      const measurements: Measurement[] = [];
      for (const scenario of group) {
        if (serviceDied(`before "${scenario.title}"`)) break measuring;
        const preflight = await scenario.preflight();
        progress(`[${++step}/${selected.length}] ${scenario.title}: preflight ${preflight.ok ? "answered" : "FAILED,"} ${preflight.answered}`);
        if (!preflight.ok) problems.push(`${scenario.title}: preflight answered ${preflight.answered}`);
        measurements.push(new Measurement(scenario, preflight));
      }
      if (options.warmupS > 0) for (const m of measurements) await m.scenario.run(options.warmupS, m.expected);
      const [a, b] = measurements;
      const segments: Array<[Measurement, number]> = b
        ? [[a!, options.durationS / 2], [b, options.durationS / 2], [b, options.durationS / 2], [a!, options.durationS / 2]]
        : [[a!, options.durationS]];
      let died = false;
      for (const [m, durationS] of segments) {
        if (group.length > 1) progress(`      ${m.scenario.title}: ${durationS} s segment`);
        await m.segment(durationS, server);
        if ((died = serviceDied(`during "${m.scenario.title}"`))) break;
      }
      for (const m of measurements) {
        const row = m.row();
        rows.push(row);
        progress(`      ${row.title}: ${fmtRate(row.okPerSecond)} req/s, p50 ${fmtMs(row.latencyMs.p50)} ms, p99 ${fmtMs(row.latencyMs.p99)} ms, ${fmtStatuses(row)}`);
      }
      if (died) break;
    }
  } catch (error) {
    problems.push(`bench aborted: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    for (const c of grpcClients) c.close();
    // Read the log before teardown deletes it (the service is still running: the last lines are in).
    serviceLog = await server.logSummary().catch(() => null);
    problems.push(...(await server.teardown()));
  }

  const first = rows.find((r) => r.key === "healthz-first");
  const last = rows.find((r) => r.key === "healthz-last");
  const baselines = [first, last].filter((r): r is Row => r !== undefined && r.verdict !== "FAILED: NO EXPECTED RESPONSE");
  const baseline = {
    okPerSecond: baselines.length ? baselines.reduce((a, r) => a + r.okPerSecond, 0) / baselines.length : NaN,
    p50Ms: baselines.length ? baselines.reduce((a, r) => a + r.latencyMs.p50, 0) / baselines.length : NaN,
    cpuMsPerResponse:
      baselines.length && baselines.every((r) => r.cpu.serviceMsPerResponse !== null)
        ? baselines.reduce((a, r) => a + r.cpu.serviceMsPerResponse!, 0) / baselines.length
        : null,
    driftSecondVsFirst: first && last ? last.okPerSecond / first.okPerSecond : null,
  };
  const rest = rows.find((r) => r.key === "rest-issuance");
  const grpcRow = rows.find((r) => r.key === "grpc-issuance");
  const issuanceOk = rest && grpcRow && rest.verdict !== "FAILED: NO EXPECTED RESPONSE" && grpcRow.verdict !== "FAILED: NO EXPECTED RESPONSE";
  const issuance = issuanceOk
    ? {
        restOkPerSecond: rest.okPerSecond,
        grpcOkPerSecond: grpcRow.okPerSecond,
        restToGrpc:
          `1.00 : ${(grpcRow.okPerSecond / rest.okPerSecond).toFixed(2)} by req/s (${fmtRate(rest.okPerSecond)} vs ${fmtRate(grpcRow.okPerSecond)}); ` +
          `p50 1.00 : ${(grpcRow.latencyMs.p50 / rest.latencyMs.p50).toFixed(2)} (${fmtMs(rest.latencyMs.p50)} ms vs ${fmtMs(grpcRow.latencyMs.p50)} ms)`,
      }
    : null;

  const report: Report = {
    meta: {
      service: "auth-api-user-service",
      commit: gitCommit(),
      date: new Date().toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model.trim() ?? "unknown",
      loadAverage,
      serviceCommand: "node --import tsx src/main.ts",
      baseUrl: server.baseUrl,
      backend: server.backend,
      database: server.databaseKind,
      redis: server.redisKind,
      logLevel: options.logLevel,
      connections: options.connections,
      durationS: options.durationS,
      warmupS: options.warmupS,
      grpcChannels: options.grpcChannels,
      cpuProfDir: options.cpuProfDir ?? null,
    },
    baseline,
    rows,
    issuance,
    serviceLog,
    problems,
  };
  process.stdout.write(options.json ? `${JSON.stringify(report, null, 2)}\n` : `${render(report)}\n`);
  const failed = problems.length > 0 || rows.length < 2 + (options.only?.size ?? MEASURED_SCENARIOS.length) || rows.some((r) => r.verdict === "FAILED: NO EXPECTED RESPONSE");
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
