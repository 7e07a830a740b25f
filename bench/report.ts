// Figures per scenario (medians over rounds, spread, ratios to the baselines measured in the same
// round), the goals of the performance issue judged as met / not met, and the printed table.
import type { InvalidationSample } from "./invalidation.js";
import type { VerifierLocalRound, VerifierLocalRun } from "./protected-services.js";
import type { LoadResult } from "./loadgen.js";
import type { LogSummary } from "./server.js";

export const BASELINES = [
  "bare-fastify",
  "minimal-token-route",
  "oidc-provider",
  "same-guarantees-route",
  "same-guarantees-grpc",
] as const;
export type BaselineKey = (typeof BASELINES)[number];
export const BASELINE_LABEL: Record<BaselineKey, string> = {
  "bare-fastify": "bare",
  "minimal-token-route": "minimal",
  "oidc-provider": "oidc",
  "same-guarantees-route": "same-g",
  "same-guarantees-grpc": "same-g gRPC",
};

/** Baselines that need Postgres and Redis (not in an --embedded run), or came later: a column only when measured. */
const OPTIONAL_BASELINES: ReadonlySet<BaselineKey> = new Set(["same-guarantees-route", "same-guarantees-grpc"]);

/** The read's limit against the minimal route, for context: what the read's own guarantees cost. */
function readCeiling(read: ScenarioSummary | undefined, limit: ScenarioSummary | undefined): string {
  if (!limit?.rounds.length) return "";
  const ofMinimal = fmtRatio(limit.ratios["minimal-token-route"]);
  const served = read?.rounds.length ? `, the service's read ${fmtRatio(read.ratios["minimal-token-route"])}` : "";
  return `; ÷ the minimal token route: the same-guarantees read ${ofMinimal}${served}`;
}

/**
 * Issue 35's ceiling on this machine: client-secret issuance's server CPU per request with one bare
 * Ed25519 verification added (verifier-local's bare crypto.verify, one core: the algorithm the
 * bench's assertions and proofs are signed with) and nothing else — the best ratio any
 * implementation of either method could reach while the server's one core is what limits it.
 */
function signatureCeiling(rest: ScenarioSummary | undefined, local: VerifierLocalSummary): string {
  const secretUs = rest?.median.cpuMicrosPerRequest;
  const bare = local.perSecond?.bare;
  if (secretUs == null || !bare) return "";
  const verifyUs = 1e6 / bare;
  return (
    `; ceiling here: one bare Ed25519 verification (${verifyUs.toFixed(1)} µs, verifier-local) added to ` +
    `client-secret issuance's ${fmtRate(secretUs)} µs and nothing else: ${fmtRatio(secretUs / (secretUs + verifyUs))}`
  );
}

/** One scenario measured once (one round). */
export interface RoundFigures {
  readonly round: number;
  /** Position within the round (0 = first). */
  readonly position: number;
  readonly okPerSecond: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly responses: number;
  /** Responses with an unexpected status + transport errors (connection errors, timeouts). */
  readonly errors: number;
  readonly statuses: Record<string, number>;
  readonly transportErrorKinds: Record<string, number>;
  /** Server process-tree CPU per expected response, µs; null when /proc was not readable. */
  readonly cpuMicrosPerRequest: number | null;
  /** Server CPU as a share of one core over the window. */
  readonly serverCpuPercentOfCore: number | null;
  readonly loadgenCpuPercentOfCore: number;
  readonly machineBusyPercent: number;
  readonly rssBeforeBytes: number | null;
  readonly rssAfterBytes: number | null;
}

export function roundFigures(
  round: number,
  position: number,
  expected: readonly string[],
  r: LoadResult,
): RoundFigures {
  const responses = Object.values(r.statuses).reduce((a, b) => a + b, 0);
  const ok = Object.entries(r.statuses)
    .filter(([status]) => expected.includes(status))
    .reduce((a, [, n]) => a + n, 0);
  const seconds = r.elapsedMs / 1000;
  return {
    round,
    position,
    okPerSecond: ok / seconds,
    p50Ms: r.latencyMs.p50,
    p90Ms: r.latencyMs.p90,
    p99Ms: r.latencyMs.p99,
    maxMs: r.latencyMs.max,
    responses,
    errors: responses - ok + r.transportErrors,
    statuses: r.statuses,
    transportErrorKinds: r.transportErrorKinds,
    cpuMicrosPerRequest: r.serverCpuMicros === null || ok === 0 ? null : r.serverCpuMicros / ok,
    serverCpuPercentOfCore: r.serverCpuMicros === null ? null : r.serverCpuMicros / 1e4 / seconds,
    loadgenCpuPercentOfCore: r.loadgenCpuMicros / 1e4 / seconds,
    machineBusyPercent: r.machineBusyPercent,
    rssBeforeBytes: r.serverRssBeforeBytes,
    rssAfterBytes: r.serverRssAfterBytes,
  };
}

export interface ScenarioSummary {
  readonly key: string;
  readonly title: string;
  readonly kind: "service" | "baseline";
  readonly face: "REST" | "gRPC";
  readonly server: string;
  /** What its preflight request answered (checked before any load). */
  readonly answered: string;
  readonly expected: readonly string[];
  /** Tokens each request carries (a batch introspection's 100); 1 when absent. */
  readonly tokensPerRequest?: number;
  readonly rounds: RoundFigures[];
  readonly median: { okPerSecond: number; p50Ms: number; p99Ms: number; cpuMicrosPerRequest: number | null };
  /** (max − min) / median of req/s over the rounds, in %. */
  readonly spreadPercent: number;
  readonly errors: number;
  /** Median over rounds of (this scenario's req/s ÷ the baseline's req/s in the same round). */
  readonly ratios: Partial<Record<BaselineKey, number>>;
  /** Same for server CPU per request. */
  readonly cpuRatios: Partial<Record<BaselineKey, number>>;
  readonly rssBeforeBytes: number | null;
  readonly rssAfterBytes: number | null;
}

export function median(values: readonly number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

/** Median of per-round ratios a/b, pairing rounds by number. */
function roundRatio(
  a: readonly RoundFigures[],
  b: readonly RoundFigures[],
  pick: (f: RoundFigures) => number | null,
): number {
  const ratios: number[] = [];
  for (const fa of a) {
    const fb = b.find((f) => f.round === fa.round);
    const x = pick(fa);
    const y = fb ? pick(fb) : null;
    if (x !== null && y !== null && y > 0) ratios.push(x / y);
  }
  return median(ratios);
}

export function summarise(
  defs: ReadonlyArray<{
    key: string;
    title: string;
    kind: "service" | "baseline";
    face: "REST" | "gRPC";
    server: string;
    answered: string;
    expected: readonly string[];
    tokensPerRequest?: number;
  }>,
  figures: ReadonlyMap<string, RoundFigures[]>,
): ScenarioSummary[] {
  return defs.map((d) => {
    const rounds = figures.get(d.key) ?? [];
    const rates = rounds.map((f) => f.okPerSecond);
    const cpu = rounds.map((f) => f.cpuMicrosPerRequest).filter((x): x is number => x !== null);
    const med = median(rates);
    const ratios: Partial<Record<BaselineKey, number>> = {};
    const cpuRatios: Partial<Record<BaselineKey, number>> = {};
    for (const b of BASELINES) {
      const base = figures.get(b);
      if (!base || b === d.key) continue;
      ratios[b] = roundRatio(rounds, base, (f) => f.okPerSecond);
      cpuRatios[b] = roundRatio(rounds, base, (f) => f.cpuMicrosPerRequest);
    }
    const byRound = [...rounds].sort((x, y) => x.round - y.round);
    return {
      ...d,
      rounds,
      median: {
        okPerSecond: med,
        p50Ms: median(rounds.map((f) => f.p50Ms)),
        p99Ms: median(rounds.map((f) => f.p99Ms)),
        cpuMicrosPerRequest: cpu.length ? median(cpu) : null,
      },
      spreadPercent: rates.length > 1 ? (100 * (Math.max(...rates) - Math.min(...rates))) / med : 0,
      errors: rounds.reduce((a, f) => a + f.errors, 0),
      ratios,
      cpuRatios,
      rssBeforeBytes: byRound[0]?.rssBeforeBytes ?? null,
      rssAfterBytes: byRound.at(-1)?.rssAfterBytes ?? null,
    };
  });
}

// ---- invalidation --------------------------------------------------------------------------

export interface InvalidationSummary {
  readonly repetitions: number;
  readonly refusedWhenAnswered: number;
  /** Send time of B's first refusal relative to the rotate answer (ms; ≤ 0 = before). */
  readonly delayMs: { p50: number; max: number; min: number } | null;
  readonly rotateMs: { p50: number; max: number } | null;
  /** Largest probe send-time gap around the answer over all repetitions (the check's resolution). */
  readonly probeGapMaxMs: number | null;
  readonly acceptedAfterAnswer: number;
  readonly otherStatuses: number;
  readonly samples: InvalidationSample[];
  /** Why it was not measured, if it was not. */
  readonly skipped?: string;
}

export function summariseInvalidation(samples: InvalidationSample[], skipped?: string): InvalidationSummary {
  const delays = samples.map((s) => (s.delayMs === null ? Infinity : s.delayMs));
  const rot = samples.map((s) => s.rotateMs);
  return {
    repetitions: samples.length,
    refusedWhenAnswered: samples.filter((s) => s.refusedWhenAnswered).length,
    delayMs: samples.length ? { p50: median(delays), max: Math.max(...delays), min: Math.min(...delays) } : null,
    rotateMs: samples.length ? { p50: median(rot), max: Math.max(...rot) } : null,
    probeGapMaxMs: samples.length ? Math.max(...samples.map((s) => s.probeGapMs)) : null,
    acceptedAfterAnswer: samples.reduce((a, s) => a + s.acceptedAfterAnswer, 0),
    otherStatuses: samples.reduce((a, s) => a + s.otherStatuses, 0),
    samples,
    ...(skipped ? { skipped } : {}),
  };
}

// ---- protected services -----------------------------------------------------------

/** The propagation delay to the sample protected service: rotate answer → its first refusal answered. */
export interface PropagationSummary {
  readonly repetitions: number;
  /** ms from the rotate answer to the first refused probe's answer (an upper bound of the switch); nearest-rank percentiles. */
  readonly firstRefusalMs: { p50: number; p99: number; max: number } | null;
  /** Probes accepted after the first refusal had been answered, over all repetitions (must be 0). */
  readonly wrongAccepts: number;
  readonly neverRefused: number;
  readonly otherStatuses: number;
  readonly skipped?: string;
}

const nearestRank = (sorted: readonly number[], q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;

export function summarisePropagation(samples: readonly InvalidationSample[], skipped?: string): PropagationSummary {
  const delays = samples.map((x) => (x.delayBoundsMs === null ? Infinity : x.delayBoundsMs[1])).sort((x, y) => x - y);
  return {
    repetitions: samples.length,
    firstRefusalMs: samples.length
      ? { p50: nearestRank(delays, 0.5), p99: nearestRank(delays, 0.99), max: delays.at(-1)! }
      : null,
    wrongAccepts: samples.reduce((a, x) => a + x.acceptedAfterRefusal, 0),
    neverRefused: samples.filter((x) => x.delayBoundsMs === null).length,
    otherStatuses: samples.reduce((a, x) => a + x.otherStatuses, 0),
    ...(skipped ? { skipped } : {}),
  };
}

/** Medians over the verifier-local rounds, and the two ratios of its goals (medians of same-round ratios). */
export interface VerifierLocalSummary {
  readonly tokens: number;
  readonly rounds: number;
  readonly perSecond: { bare: number; firstSight: number; cached: number } | null;
  /** cached ÷ first sight, in verifications per second. */
  readonly cachedOverFirstSight: number | null;
  /** A first-sight verification's time ÷ a bare crypto.verify's (bare rate ÷ first-sight rate). */
  readonly firstSightOverBare: number | null;
  /** verifyRequest on a cached token: DPoP (a fresh proof each) ÷ Bearer, checks per second (null before issue 35). */
  readonly dpopOverBearerRequest?: number | null;
  readonly requestsPerSecond?: { bearer: number; dpop: number } | null;
  readonly skipped?: string;
}

export function summariseVerifierLocal(run: VerifierLocalRun | undefined, skipped?: string): VerifierLocalSummary {
  const rounds = run?.rounds ?? [];
  const med = (pick: (r: VerifierLocalRound) => number) => (rounds.length ? median(rounds.map(pick)) : NaN);
  return {
    tokens: run?.tokens ?? 0,
    rounds: rounds.length,
    perSecond: rounds.length
      ? { bare: med((r) => r.bare), firstSight: med((r) => r.firstSight), cached: med((r) => r.cached) }
      : null,
    cachedOverFirstSight: rounds.length ? med((r) => r.cached / r.firstSight) : null,
    firstSightOverBare: rounds.length ? med((r) => r.bare / r.firstSight) : null,
    ...requestChecksOf(rounds),
    ...(skipped ? { skipped } : {}),
  };
}

/** The request checks' medians and their same-round ratio, when the rounds have them. */
function requestChecksOf(rounds: readonly VerifierLocalRound[]): {
  dpopOverBearerRequest: number | null;
  requestsPerSecond: { bearer: number; dpop: number } | null;
} {
  const measured = rounds.flatMap((r) =>
    r.bearerRequest !== undefined && r.dpopRequest !== undefined
      ? [{ bearer: r.bearerRequest, dpop: r.dpopRequest }]
      : [],
  );
  if (!measured.length) return { dpopOverBearerRequest: null, requestsPerSecond: null };
  return {
    dpopOverBearerRequest: median(measured.map((r) => r.dpop / r.bearer)),
    requestsPerSecond: { bearer: median(measured.map((r) => r.bearer)), dpop: median(measured.map((r) => r.dpop)) },
  };
}

/**
 * Issue 35's three ratios in one line: the two issuance goals (median of same-round ratios) and
 * the verifier package's DPoP check of a cached token ÷ its Bearer check (reported, no goal).
 */
export function credentialRatiosLine(goals: readonly Goal[], local: VerifierLocalSummary | undefined): string {
  const goal = (key: string) => {
    const g = goals.find((x) => x.key === key);
    return g?.value == null ? "not measured" : `${fmtRatio(g.value)} (goal ${g.target}: ${g.met ? "met" : "NOT MET"})`;
  };
  const r = local?.requestsPerSecond;
  const verifier =
    local?.dpopOverBearerRequest == null || !r
      ? "not measured"
      : `${local.dpopOverBearerRequest.toFixed(3)} (${fmtRate(r.dpop)}/s ÷ ${fmtRate(r.bearer)}/s on one core, no goal)`;
  return (
    `credential ratios: issuance with private_key_jwt ÷ with a client secret ${goal("pkjwt-vs-rest-issuance")}; ` +
    `with DPoP ÷ with a client secret ${goal("dpop-vs-rest-issuance")}; ` +
    `the verifier package's DPoP check of a cached token ÷ its Bearer check ${verifier}`
  );
}

export function protectedServicesLines(propagation: PropagationSummary, local: VerifierLocalSummary): string[] {
  const p = propagation.firstRefusalMs;
  const v = local.perSecond;
  return [
    propagation.skipped
      ? `propagation: not measured (${propagation.skipped})`
      : `propagation (rotate on A, the sample protected service following B's change stream, ${propagation.repetitions} repetitions): ` +
        `first refusal p50 ${fmtSigned(p?.p50)} ms, p99 ${fmtSigned(p?.p99)} ms, max ${fmtSigned(p?.max)} ms after the rotate answer; ` +
        `accepted after its first refusal: ${propagation.wrongAccepts} times`,
    local.skipped || !v
      ? `verifier-local: not measured (${local.skipped ?? "no round completed"})`
      : `verifier-local (one core, ${local.tokens} distinct tokens, ${local.rounds} rounds): bare crypto.verify ${fmtRate(v.bare)}/s, ` +
        `first sight ${fmtRate(v.firstSight)}/s, cached ${fmtRate(v.cached)}/s`,
  ];
}

// ---- goals ---------------------------------------------------------------------------------

/**
 * The operator's reads over one tenant's million audit events, each a scenario judged p99 < 100 ms
 * at its concurrency (the connections the bench reads it on). A search with a past `until` is held
 * at 4: the scale audit found it 100 % 503 there (a backward scan of the tenant's newer events).
 */
export const AUDIT_VOLUME_READS = [
  { key: "audit-search-action", what: "audit search by action + since", connections: 2 },
  { key: "audit-search-client", what: "audit search by client id", connections: 2 },
  { key: "audit-search-until", what: "audit search with until (a past window)", connections: 4 },
  { key: "operator-api-user-list", what: "api-user list with last token times", connections: 2 },
] as const;

export interface Goal {
  readonly key: string;
  readonly goal: string;
  /** The measured figure the goal is judged on (ratio, ms, count). */
  readonly value: number | null;
  readonly target: string;
  /** null: not measured in this run. */
  readonly met: boolean | null;
  readonly detail: string;
}

type Pick = (f: RoundFigures) => number | null;

export function judgeGoals(
  scenarios: readonly ScenarioSummary[],
  invalidation: InvalidationSummary,
  memory: { rssAfterRoundBytes: number[] },
  connections: number,
  protectedServices: { propagation: PropagationSummary; verifierLocal: VerifierLocalSummary },
  scaling?: ScalingSummary,
): Goal[] {
  const s = (key: string) => scenarios.find((x) => x.key === key && x.rounds.length > 0);
  const rest = s("rest-issuance");
  const grpc = s("grpc-issuance");
  const read = s("authenticated-read");
  const goals: Goal[] = [];
  const atLeast = (key: string, goal: string, value: number | undefined, target: number, detail: string) =>
    goals.push({
      key,
      goal,
      value: finite(value),
      target: `≥ ${target}`,
      met: finite(value) === null ? null : value! >= target,
      detail,
    });
  const atMost = (key: string, goal: string, value: number | undefined, target: number, detail: string) =>
    goals.push({
      key,
      goal,
      value: finite(value),
      target: `≤ ${target}`,
      met: finite(value) === null ? null : value! <= target,
      detail,
    });

  // The ratio goals, each against the limit of its own guarantees: the same-guarantees route (REST
  // issuance and its p99), its read (the authenticated read), its gRPC twin on grpc-js's own server
  // (gRPC issuance), and node-oidc-provider. They replace goals against routes without the
  // service's guarantees (REST ≥ 2.5× node-oidc-provider, the read ≥ 0.4× the minimal route) and an
  // absolute p99 of 25 ms, which this shared machine cannot hold for any server with these guarantees.
  const sameGuarantees = s("same-guarantees-route");
  const sameGuaranteesGrpc = s("same-guarantees-grpc");
  const sameGuaranteesRead = s("same-guarantees-read");
  const perRound = (x: ScenarioSummary | undefined, y: ScenarioSummary | undefined, pick: Pick) =>
    x && y ? roundRatio(x.rounds, y.rounds, pick) : undefined;
  const p99Of: Pick = (f) => f.p99Ms;
  const rounds = Math.max(0, ...scenarios.map((x) => x.rounds.length));
  const perRoundRatios = `median of per-round ratios (${rounds} round${rounds === 1 ? "" : "s"}${rounds < 3 ? "; a full run has 3" : ""})`;
  const at = `${connections} connections${connections === 50 ? "" : " (the goal is stated at 50)"}`;
  const cpuOf: Pick = (f) => f.cpuMicrosPerRequest;
  const cpuPair = (x: ScenarioSummary | undefined, y: ScenarioSummary | undefined) =>
    x?.median.cpuMicrosPerRequest != null && y?.median.cpuMicrosPerRequest != null
      ? `; server CPU ${fmtRate(x.median.cpuMicrosPerRequest)} vs ${fmtRate(y.median.cpuMicrosPerRequest)} µs per request`
      : "";
  atLeast(
    "rest-vs-same-guarantees",
    "REST issuance ÷ same-guarantees route",
    rest?.ratios["same-guarantees-route"],
    0.8,
    `req/s, ${perRoundRatios}${cpuPair(rest, sameGuarantees)}`,
  );
  atLeast(
    "rest-vs-oidc-provider",
    "REST issuance ÷ node-oidc-provider (JWT)",
    rest?.ratios["oidc-provider"],
    1.15,
    `req/s, ${perRoundRatios}` +
      (sameGuarantees?.ratios["oidc-provider"] !== undefined
        ? `; its limit, the same-guarantees route ÷ node-oidc-provider: ${fmtRatio(sameGuarantees.ratios["oidc-provider"])}`
        : ""),
  );
  atLeast(
    "read-vs-same-guarantees-read",
    "authenticated read ÷ same-guarantees read",
    perRound(read, sameGuaranteesRead, (f) => f.okPerSecond),
    0.8,
    `req/s, ${perRoundRatios}${cpuPair(read, sameGuaranteesRead)}` + readCeiling(read, sameGuaranteesRead),
  );
  atMost(
    "p99-rest-vs-same-guarantees",
    "p99 of REST issuance ÷ same-guarantees route's p99",
    perRound(rest, sameGuarantees, p99Of),
    1.5,
    `${perRoundRatios}, ${at}`,
  );
  atLeast(
    "grpc-vs-same-guarantees-grpc",
    "gRPC issuance ÷ same-guarantees gRPC route (grpc-js server)",
    grpc?.ratios["same-guarantees-grpc"],
    1,
    `calls/s, the same grpc-js generator, ${perRoundRatios}${cpuPair(grpc, sameGuaranteesGrpc)}`,
  );
  atMost(
    "cpu-grpc-vs-rest",
    "server CPU per call, gRPC issuance ÷ REST issuance",
    perRound(grpc, rest, cpuOf),
    1,
    `process tree utime+stime (all threads) per issued token, ${perRoundRatios}${cpuPair(grpc, rest)}`,
  );
  // Issue 35: each credential method adds one signature verification to client-secret issuance.
  for (const [key, method] of [
    ["pkjwt", "private_key_jwt"],
    ["dpop", "a DPoP proof"],
  ] as const) {
    const x = s(`${key}-issuance`);
    atLeast(
      `${key}-vs-rest-issuance`,
      `token issuance with ${method} ÷ client-secret issuance (REST)`,
      perRound(x, rest, (f) => f.okPerSecond),
      0.7,
      `req/s, ${perRoundRatios}${cpuPair(x, rest)}${signatureCeiling(rest, protectedServices.verifierLocal)}`,
    );
  }
  // The goals of introspection by a resource server, single and batched.
  const rsRest = s("rs-introspection");
  const rsGrpc = s("rs-introspection-grpc");
  const rsBatch = s("rs-introspection-batch");
  const perCall = rsBatch?.tokensPerRequest ?? 1;
  atLeast(
    "rs-introspection-vs-rest-issuance",
    "introspection by a resource server (REST) ÷ REST issuance",
    perRound(rsRest, rest, (f) => f.okPerSecond),
    1,
    `req/s, ${perRoundRatios}`,
  );
  atLeast(
    "rs-introspection-grpc-vs-rest-issuance",
    "introspection by a resource server (gRPC) ÷ REST issuance",
    perRound(rsGrpc, rest, (f) => f.okPerSecond),
    1,
    `req/s, ${perRoundRatios}`,
  );
  atLeast(
    "rs-batch-vs-single",
    `batch introspection (gRPC, ${perCall} tokens per call) ÷ single introspection (gRPC), in tokens/s`,
    rsBatch && rsGrpc ? roundRatio(rsBatch.rounds, rsGrpc.rounds, (f) => f.okPerSecond) * perCall : undefined,
    10,
    `tokens/s, ${perRoundRatios}` +
      (rsBatch?.median.cpuMicrosPerRequest != null && rsGrpc?.median.cpuMicrosPerRequest != null
        ? `; server CPU per token ${fmtRate(rsBatch.median.cpuMicrosPerRequest / perCall)} µs batched, ${fmtRate(rsGrpc.median.cpuMicrosPerRequest)} µs single`
        : ""),
  );
  const service = scenarios.filter((x) => x.kind === "service" && x.rounds.length > 0);
  const scalingSteps = scaling?.steps ?? [];
  const scalingErrors = scalingSteps.reduce((a, x) => a + x.errors, 0);
  const serviceErrors = service.reduce((a, x) => a + x.errors, 0) + invalidation.otherStatuses + scalingErrors;
  const measuredService = service.length > 0 || scalingSteps.length > 0;
  goals.push({
    key: "zero-errors",
    goal: "errors on the service (all scenarios, all rounds, invalidation probes, scaling steps)",
    value: measuredService ? serviceErrors : null,
    target: "= 0",
    met: measuredService ? serviceErrors === 0 : null,
    detail:
      service.map((x) => `${x.key} ${x.errors}, `).join("") +
      `invalidation probes ${invalidation.otherStatuses}` +
      (scalingSteps.length ? `, scaling ${scalingErrors}` : ""),
  });
  goals.push({
    key: "invalidation-before-answer",
    goal: "rotation refused on instance B before the rotate call returns",
    value: invalidation.repetitions ? invalidation.refusedWhenAnswered / invalidation.repetitions : null,
    target: "= 1 (every repetition)",
    met: invalidation.repetitions ? invalidation.refusedWhenAnswered === invalidation.repetitions : null,
    detail: invalidation.skipped
      ? `not measured: ${invalidation.skipped}`
      : `${invalidation.refusedWhenAnswered}/${invalidation.repetitions} repetitions; B refusing from ${fmtSigned(invalidation.delayMs?.p50)} ms (p50), ${fmtSigned(invalidation.delayMs?.max)} ms (max) relative to the rotate answer`,
  });
  // The protected services' goals: the verifier's local rate and the invalidation delay.
  const { propagation, verifierLocal } = protectedServices;
  atMost(
    "propagation-p99",
    "propagation: rotate answer → first refusal by the sample protected service following instance B, p99",
    propagation.firstRefusalMs?.p99,
    100,
    propagation.skipped
      ? `not measured: ${propagation.skipped}`
      : `ms over ${propagation.repetitions} repetitions (p50 ${fmtSigned(propagation.firstRefusalMs?.p50)}, max ${fmtSigned(propagation.firstRefusalMs?.max)}); ` +
          `never refused ${propagation.neverRefused}; accepted after the first refusal ${propagation.wrongAccepts}`,
  );
  goals.push({
    key: "propagation-wrong-accepts",
    goal: "propagation: the old token accepted after the sample service's first refusal",
    value: propagation.repetitions ? propagation.wrongAccepts + propagation.neverRefused : null,
    target: "= 0",
    met: propagation.repetitions ? propagation.wrongAccepts + propagation.neverRefused === 0 : null,
    detail: propagation.skipped ? `not measured: ${propagation.skipped}` : `${propagation.repetitions} repetitions`,
  });
  const rates = verifierLocal.perSecond;
  const localDetail = (what: string) =>
    verifierLocal.skipped || !rates
      ? `not measured: ${verifierLocal.skipped ?? "no round"}`
      : `${what}; median of ${verifierLocal.rounds} rounds' ratios over ${verifierLocal.tokens} tokens on one core (bare ${fmtRate(rates.bare)}/s, first sight ${fmtRate(rates.firstSight)}/s, cached ${fmtRate(rates.cached)}/s)`;
  atLeast(
    "verifier-cached",
    "verifier package: cached verification ÷ first sight, verifications/s",
    verifierLocal.cachedOverFirstSight ?? undefined,
    50,
    localDetail("a token verified before is a cache hit (expiry, revocation and staleness still checked)"),
  );
  atMost(
    "verifier-first-sight",
    "verifier package: a first-sight verification's time ÷ a bare crypto.verify's",
    verifierLocal.firstSightOverBare ?? undefined,
    1.1,
    localDetail("bare: crypto.verify alone, input and key prepared beforehand"),
  );
  // The operator's reads over one tenant's million audit events (opt-in, judged
  // only when run).
  for (const { key, what, connections } of AUDIT_VOLUME_READS) {
    const x = s(key);
    if (!x) continue;
    goals.push({
      key: `${key}-p99`,
      goal: `${what}, one tenant's 1 M token events, ${connections} concurrent: p99 (ms)`,
      value: finite(x.median.p99Ms),
      target: "< 100",
      met: Number.isFinite(x.median.p99Ms) ? x.median.p99Ms < 100 : null,
      detail: `median over rounds of each round's p99 (p50 ${fmtMs(x.median.p50Ms)} ms), ${x.errors} errors`,
    });
  }
  // Round 1 includes warm-up growth (JIT code, connection pools, the V8 heap sizing itself to the
  // load), so "flat" is judged on the rounds after it: each later round may grow RSS by ≤ 5 %.
  const rss = memory.rssAfterRoundBytes;
  const growth = rss.length >= 3 ? Math.max(...rss.slice(2).map((b, i) => b / rss[i + 1]!)) : undefined;
  goals.push({
    key: "rss-flat",
    goal: "service RSS flat across repeated rounds (largest growth of a round after the second ÷ the round before)",
    value: finite(growth),
    target: "≤ 1.05",
    met: growth === undefined ? null : growth <= 1.05,
    detail:
      rss.length >= 3
        ? `RSS after each round: ${rss.map((b) => fmtMb(b)).join(", ")} MB (round 1 includes warm-up growth)`
        : `needs ≥ 3 rounds (this run: ${rss.length})`,
  });
  return goals;
}

const finite = (n: number | undefined): number | null => (n === undefined || !Number.isFinite(n) ? null : n);

// ---- output --------------------------------------------------------------------------------

export const fmtRate = (n: number) => (!Number.isFinite(n) ? "-" : n >= 100 ? n.toFixed(0) : n.toFixed(1));
export const fmtMs = (n: number) => (!Number.isFinite(n) ? "-" : n >= 100 ? n.toFixed(0) : n.toFixed(1));
export const fmtRatio = (n: number | undefined | null) =>
  n === undefined || n === null || !Number.isFinite(n) ? "-" : n >= 10 ? n.toFixed(1) : n.toFixed(2);
export const fmtMb = (b: number | null | undefined) => (b === null || b === undefined ? "-" : (b / 1048576).toFixed(0));
const fmtSigned = (n: number | undefined) =>
  n === undefined ? "-" : !Number.isFinite(n) ? "never" : `${n > 0 ? "+" : ""}${n.toFixed(1)}`;

export function table(headers: string[], rows: string[][], rightAligned: ReadonlySet<number>): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (rightAligned.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(" | ")} |`;
  const rule = `|${widths.map((w, i) => (rightAligned.has(i) ? `${"-".repeat(w + 1)}:` : "-".repeat(w + 2))).join("|")}|`;
  return [line(headers), rule, ...rows.map(line)].join("\n");
}

/**
 * The one table: medians over rounds; ratios are medians of same-round ratios. A baseline gets its
 * columns when the run measured it (the same-guarantees routes are not in an --embedded run), so
 * the columns of a run's results never change after it.
 */
export function scenarioTable(scenarios: readonly ScenarioSummary[]): string {
  const measured = scenarios.filter((s) => s.rounds.length > 0);
  const ratioTo = BASELINES.filter((b) => !OPTIONAL_BASELINES.has(b) || measured.some((s) => s.key === b));
  const cpuTo = (["minimal-token-route", "same-guarantees-route"] as const).filter((b) => ratioTo.includes(b));
  const headers = [
    "scenario",
    "req/s",
    "spread",
    "p50 ms",
    "p99 ms",
    "errors",
    "CPU µs/req",
    ...ratioTo.map((b) => `÷ ${BASELINE_LABEL[b]}`),
    ...cpuTo.map((b) => `CPU × ${BASELINE_LABEL[b]}`),
    "RSS MB before→after",
  ];
  const rows = measured.map((s) => [
    s.title,
    fmtRate(s.median.okPerSecond),
    `±${(s.spreadPercent / 2).toFixed(0)}%`,
    fmtMs(s.median.p50Ms),
    fmtMs(s.median.p99Ms),
    String(s.errors),
    s.median.cpuMicrosPerRequest === null ? "-" : s.median.cpuMicrosPerRequest.toFixed(0),
    ...ratioTo.map((b) => (b === s.key ? "1" : fmtRatio(s.ratios[b]))),
    ...cpuTo.map((b) => (b === s.key ? "1" : fmtRatio(s.cpuRatios[b]))),
    `${fmtMb(s.rssBeforeBytes)}→${fmtMb(s.rssAfterBytes)}`,
  ]);
  return table(headers, rows, new Set(headers.slice(1, -1).map((_, i) => i + 1)));
}

export function goalsTable(goals: readonly Goal[]): string {
  return table(
    ["goal", "measured", "target", "verdict", "how"],
    goals.map((g) => [
      g.goal,
      g.value === null
        ? "-"
        : Number.isInteger(g.value)
          ? String(g.value)
          : g.value >= 10
            ? g.value.toFixed(1)
            : g.value.toFixed(2),
      g.target,
      g.met === null ? "not measured" : g.met ? "met" : "NOT MET",
      g.detail,
    ]),
    new Set([1]),
  );
}

export function invalidationLine(inv: InvalidationSummary): string {
  if (inv.skipped) return `invalidation delay: not measured (${inv.skipped})`;
  if (!inv.repetitions) return "invalidation delay: no repetition completed";
  return (
    `invalidation delay (rotate on A, authenticated read polled on B, ${inv.repetitions} repetitions): ` +
    `B refused before the rotate answer arrived in ${inv.refusedWhenAnswered}/${inv.repetitions}; ` +
    `B started refusing at p50 ${fmtSigned(inv.delayMs?.p50)} ms, max ${fmtSigned(inv.delayMs?.max)} ms relative to the answer ` +
    `(rotate call p50 ${fmtMs(inv.rotateMs?.p50 ?? NaN)} ms; probes at most ${fmtMs(inv.probeGapMaxMs ?? NaN)} ms apart); ` +
    `old token accepted by B after the answer: ${inv.acceptedAfterAnswer} times`
  );
}

export function logLine(name: string, l: LogSummary): string[] {
  return [
    `${name} log: ${l.lines} lines (${(l.bytes / 1e6).toFixed(1)} MB), ${l.warn} warn, ${l.error} error/fatal`,
    ...l.samples.map((s) => `  ${s}`),
    ...(Object.keys(l.refusals ?? {}).length
      ? [
          `  refused (status errorCode, the probes' and nonce challenges' included): ${Object.entries(l.refusals)
            .sort((a, b) => b[1] - a[1])
            .map(([k, n]) => `${k} ×${n}`)
            .join(", ")}`,
        ]
      : []),
  ];
}

// ---- scaling ----------------------------------------------------------------------

/** One step of the scaling scenario: the same mixed load on `instances` service instances. */
export interface ScalingStep {
  readonly instances: number;
  readonly okPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: number;
  readonly statuses: Record<string, number>;
  /** Each face of the mix on its own. */
  readonly parts: ReadonlyArray<{
    readonly label: string;
    readonly okPerSecond: number;
    readonly p50Ms: number;
    readonly p99Ms: number;
    readonly errors: number;
  }>;
  /** Each instance's process-tree CPU as a share of one core, in %. */
  readonly instanceCpuPercentOfCore: ReadonlyArray<number | null>;
  /** All instances' CPU per answered request, µs. */
  readonly serviceCpuMicrosPerRequest: number | null;
  /** The Postgres server's process tree (postmaster and every backend) and redis-server, % of one core. */
  readonly postgresCpuPercentOfCore: number | null;
  readonly redisCpuPercentOfCore: number | null;
  readonly loadgenCpuPercentOfCore: number;
  /** The whole machine, % of one core (cores × 100 is all of it). */
  readonly machineBusyPercentOfCore: number;
  /** Busy CPU none of the above accounts for (kernel work outside the processes, other processes), % of one core. */
  readonly otherCpuPercentOfCore: number | null;
}

export interface ScalingSummary {
  readonly cores: number;
  readonly durationS: number;
  readonly warmupS: number;
  /** What one step sends, in words. */
  readonly load: string;
  readonly steps: ScalingStep[];
  readonly skipped?: string;
}

/** A step's figures from the load generator's result over `instances` instances. */
export function scalingStep(instances: number, expected: readonly string[], r: LoadResult, cores: number): ScalingStep {
  const f = roundFigures(0, 0, expected, r);
  const seconds = r.elapsedMs / 1000;
  const cpu = r.alsoMeasuredCpuMicros ?? {};
  const percent = (micros: number | null | undefined) =>
    micros === null || micros === undefined ? null : micros / 1e4 / seconds;
  const instanceCpu = Array.from({ length: instances }, (_, i) => cpu[`instance-${i + 1}`] ?? null);
  const known = instanceCpu.every((x) => x !== null);
  const serviceCpu = known ? instanceCpu.reduce((a, x) => a! + x!, 0)! : null;
  const machine = f.machineBusyPercent * cores;
  const accounted = [serviceCpu, cpu.postgres, cpu.redis].every((x) => x !== null && x !== undefined)
    ? percent(serviceCpu)! + percent(cpu.postgres)! + percent(cpu.redis)! + f.loadgenCpuPercentOfCore
    : null;
  return {
    instances,
    okPerSecond: f.okPerSecond,
    p50Ms: f.p50Ms,
    p99Ms: f.p99Ms,
    errors: f.errors,
    statuses: f.statuses,
    parts: (r.parts ?? []).map((p) => {
      const ok = Object.entries(p.statuses)
        .filter(([status]) => expected.includes(status))
        .reduce((a, [, n]) => a + n, 0);
      const all = Object.values(p.statuses).reduce((a, n) => a + n, 0);
      return {
        label: p.label,
        okPerSecond: ok / (p.elapsedMs / 1000),
        p50Ms: p.latencyMs.p50,
        p99Ms: p.latencyMs.p99,
        errors: all - ok + p.transportErrors,
      };
    }),
    instanceCpuPercentOfCore: instanceCpu.map(percent),
    serviceCpuMicrosPerRequest:
      serviceCpu === null || f.okPerSecond === 0 ? null : serviceCpu / (f.okPerSecond * seconds),
    postgresCpuPercentOfCore: percent(cpu.postgres),
    redisCpuPercentOfCore: percent(cpu.redis),
    loadgenCpuPercentOfCore: f.loadgenCpuPercentOfCore,
    machineBusyPercentOfCore: machine,
    otherCpuPercentOfCore: accounted === null ? null : Math.max(0, machine - accounted),
  };
}

/** The scaling table: one row per instance count, throughput against one instance's, and where the CPU went. */
export function scalingTable(s: ScalingSummary): string {
  const first = s.steps[0]?.okPerSecond;
  const pct = (n: number | null) => (n === null || !Number.isFinite(n) ? "-" : n.toFixed(0));
  const labels = s.steps[0]?.parts.map((p) => p.label) ?? [];
  const headers = [
    "instances",
    "req/s",
    "× 1 instance",
    "p50 ms",
    "p99 ms",
    "errors",
    ...labels.map((l) => `${l} req/s (p99 ms)`),
    "CPU % of a core, each instance",
    "service CPU µs/req",
    "Postgres %",
    "Redis %",
    "generator %",
    "other %",
    `machine % (of ${s.cores * 100})`,
  ];
  const rows = s.steps.map((x) => [
    String(x.instances),
    fmtRate(x.okPerSecond),
    first ? fmtRatio(x.okPerSecond / first) : "-",
    fmtMs(x.p50Ms),
    fmtMs(x.p99Ms),
    String(x.errors),
    ...labels.map((l) => {
      const p = x.parts.find((y) => y.label === l);
      return p ? `${fmtRate(p.okPerSecond)} (${fmtMs(p.p99Ms)})` : "-";
    }),
    x.instanceCpuPercentOfCore.map(pct).join(" + "),
    x.serviceCpuMicrosPerRequest === null ? "-" : x.serviceCpuMicrosPerRequest.toFixed(0),
    pct(x.postgresCpuPercentOfCore),
    pct(x.redisCpuPercentOfCore),
    pct(x.loadgenCpuPercentOfCore),
    pct(x.otherCpuPercentOfCore),
    pct(x.machineBusyPercentOfCore),
  ]);
  return table(headers, rows, new Set(headers.map((_, i) => i).filter((i) => i > 0)));
}

/** How a scaling run was measured, in words. */
export function scalingSetting(s: ScalingSummary): string {
  return (
    `${s.load}; ${s.warmupS} s warm-up and ${s.durationS} s measured per step, one step per instance count; ` +
    `Postgres and Redis: the whole servers' CPU, whoever caused it`
  );
}

export function scalingLine(s: ScalingSummary): string {
  return s.skipped ? `scaling: not measured (${s.skipped})` : `scaling (${scalingSetting(s)})`;
}

/**
 * What limits the largest step, from its own figures: the CPU the whole machine spent per answered
 * request, split by process, and the rate the machine's cores would carry at that cost.
 */
export function scalingLimit(s: ScalingSummary): string {
  const last = s.steps.at(-1);
  if (!last || !(last.okPerSecond > 0)) return "";
  // % of a core → µs per request: (percent / 100) × 1e6 µs per second ÷ requests per second.
  const perRequest = (percent: number | null) => (percent === null ? null : (percent * 1e4) / last.okPerSecond);
  const fmt = (us: number | null) => (us === null ? "-" : us.toFixed(0));
  const machine = perRequest(last.machineBusyPercentOfCore)!;
  const service = perRequest(
    last.instanceCpuPercentOfCore.reduce<number | null>((a, x) => (a === null || x === null ? null : a + x), 0),
  );
  const ceiling = (s.cores * 1e6) / machine;
  const other = perRequest(last.otherCpuPercentOfCore);
  const withoutOther = other === null || machine - other <= 0 ? null : (s.cores * 1e6) / (machine - other);
  return (
    `At ${last.instances} instance${last.instances === 1 ? "" : "s"} the machine was ${last.machineBusyPercentOfCore.toFixed(0)} % busy of ` +
    `${s.cores * 100} %, ${fmt(machine)} µs of CPU per answered request: the instances ${fmt(service)}, ` +
    `Postgres ${fmt(perRequest(last.postgresCpuPercentOfCore))}, Redis ${fmt(perRequest(last.redisCpuPercentOfCore))}, ` +
    `the load generator ${fmt(perRequest(last.loadgenCpuPercentOfCore))}, other ${fmt(other)}; ` +
    `at that cost ${s.cores} cores carry at most ${fmtRate(ceiling)} req/s` +
    (withoutOther === null ? "" : ` (${fmtRate(withoutOther)} without the other CPU)`) +
    `, and the step measured ${fmtRate(last.okPerSecond)} (${((100 * last.okPerSecond) / ceiling).toFixed(0)} % of it)`
  );
}
