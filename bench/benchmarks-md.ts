// The "Latest full run" section of BENCHMARKS.md, rendered from a run's results (bench/results.json):
// a full `npm run bench` rewrites that section and nothing else, so benchmark figures live in one
// file of their own instead of the README, and the prose around them stays as written.
import fs from "node:fs";
import {
  credentialRatiosLine,
  fmtMs,
  fmtRate,
  goalsTable,
  invalidationLine,
  scalingLimit,
  scalingSetting,
  scalingTable,
  scenarioTable,
  table,
  type Goal,
  type InvalidationSummary,
  type ScalingSummary,
  type ScenarioSummary,
  type VerifierLocalSummary,
} from "./report.js";

export const BEGIN_MARKER = "<!-- bench:latest-run:begin -->";
export const END_MARKER = "<!-- bench:latest-run:end -->";

/** What the section needs of bench/results.json (NaN and Infinity come back from JSON as null). */
export interface RunResults {
  readonly date: string;
  readonly commit: string;
  readonly wallClockSeconds: number;
  readonly machine: {
    readonly cpus: number;
    readonly cpuModel: string;
    readonly memoryGiB: number;
    readonly node: string;
    readonly loadAverageAtStart: string;
    readonly loadAverageAtEnd: string;
  };
  readonly options: {
    readonly durationS: number;
    readonly warmupS: number;
    readonly rounds: number;
    readonly connections: number;
    readonly grpcChannels: number;
    readonly clients: number;
    readonly backend: string;
    readonly quick?: boolean;
  };
  readonly scenarios: readonly ScenarioSummary[];
  readonly invalidation: InvalidationSummary;
  readonly goals: readonly Goal[];
  /** Absent in runs before the scaling scenario. */
  readonly scaling?: ScalingSummary;
  readonly verifierLocal?: VerifierLocalSummary;
}

/** The section's body (without the markers): the run's setting, the scenario table, invalidation, goals. */
export function renderLatestRun(r: RunResults): string {
  const when = `${r.date.slice(0, 10)} ${r.date.slice(11, 16)} UTC`;
  const firstLoad = (loadAverage: string) => loadAverage.split(" ")[0] ?? loadAverage;
  const o = r.options;
  return [
    `Run of ${when}, commit ${r.commit}, ${r.wallClockSeconds} s: ${r.machine.cpus} × ${r.machine.cpuModel}, ` +
      `${r.machine.memoryGiB} GiB, node ${r.machine.node}; load average ${firstLoad(r.machine.loadAverageAtStart)} ` +
      `at the start, ${firstLoad(r.machine.loadAverageAtEnd)} at the end. ${o.rounds} round${o.rounds === 1 ? "" : "s"} ` +
      `of ${o.durationS} s per scenario (${o.warmupS} s warm-up${o.quick ? "" : `, ${3 * o.warmupS} s in round 1`}), ` +
      `${o.connections} connections (gRPC: calls in ` +
      `flight on ${o.grpcChannels} HTTP/2 connections), ${o.clients} clients round-robin; ${o.backend}.`,
    "",
    scenarioTable(r.scenarios),
    "",
    `${invalidationLine(r.invalidation)}.`,
    "",
    `${credentialRatiosLine(r.goals, r.verifierLocal)}.`,
    "",
    ...(r.scaling?.steps.length ? [`Scaling: ${scalingSetting(r.scaling)}.`, "", scalingTable(r.scaling), ""] : []),
    "Goals:",
    "",
    goalsTable(r.goals),
  ].join("\n");
}

/** `markdown` with the text between two markers replaced by `body`; throws when the markers are missing. */
function replaceBetween(markdown: string, begin: string, end: string, body: string, file: string): string {
  const from = markdown.indexOf(begin);
  const to = markdown.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${file} has no "${begin}" … "${end}" section to write the run into`);
  return `${markdown.slice(0, from + begin.length)}\n${body}\n${markdown.slice(to)}`;
}

/** The text between two markers, or undefined when they are missing. */
function textBetween(markdown: string, begin: string, end: string): string | undefined {
  const from = markdown.indexOf(begin);
  const to = markdown.indexOf(end);
  return from < 0 || to < from ? undefined : markdown.slice(from + begin.length, to).trim();
}

/** `markdown` with the text between the markers replaced by `body`; throws when the markers are missing. */
export function replaceLatestRun(markdown: string, body: string): string {
  return replaceBetween(markdown, BEGIN_MARKER, END_MARKER, body, "BENCHMARKS.md");
}

/** The text between the markers, or undefined when they are missing. */
export function latestRunIn(markdown: string): string | undefined {
  return textBetween(markdown, BEGIN_MARKER, END_MARKER);
}

/** Rewrites the section of the file at `file` with the run `results`. */
export function writeLatestRun(file: string, results: RunResults): void {
  fs.writeFileSync(file, replaceLatestRun(fs.readFileSync(file, "utf8"), renderLatestRun(results)));
}

// ---- docs/scaling.md's measured figures: the scaling scenario of the same full run

export const SCALING_BEGIN_MARKER = "<!-- bench:scaling:begin -->";
export const SCALING_END_MARKER = "<!-- bench:scaling:end -->";

/** The service's own scenarios that size one instance, in the scaling guide's order. */
const ONE_INSTANCE = [
  "rest-issuance",
  "grpc-issuance",
  "introspection",
  "rs-introspection",
  "rs-introspection-grpc",
  "rs-introspection-batch",
  "authenticated-read",
];

/** One instance under each load of the run, with what a core of the service's own CPU carries at its cost. */
function oneInstanceTable(r: RunResults): string {
  const rows = ONE_INSTANCE.flatMap((key) => {
    const x = r.scenarios.find((s) => s.key === key && s.rounds.length > 0);
    if (!x) return [];
    const cpu = x.median.cpuMicrosPerRequest;
    return [
      [
        x.title.replace(/ \(service\)$/, ""),
        fmtRate(x.median.okPerSecond),
        fmtMs(x.median.p50Ms),
        fmtMs(x.median.p99Ms),
        cpu === null ? "-" : cpu.toFixed(0),
        cpu === null ? "-" : fmtRate(1e6 / cpu),
      ],
    ];
  });
  return table(
    [
      "one instance, 50 connections",
      "req/s",
      "p50 ms",
      "p99 ms",
      "service CPU µs/req",
      "req/s per core of service CPU",
    ],
    rows,
    new Set([1, 2, 3, 4, 5]),
  );
}

/**
 * docs/scaling.md's measured section: one instance under each load of the run, then the scaling
 * scenario's table and what limited its largest step (or that the run predates it).
 */
export function renderScaling(r: RunResults): string {
  const run = `full run of ${r.date.slice(0, 10)} ${r.date.slice(11, 16)} UTC, commit ${r.commit}, ${r.machine.cpus} × ${r.machine.cpuModel}`;
  const scaling = r.scaling?.steps.length
    ? [
        `Instances (same run; ${scalingSetting(r.scaling)}):`,
        "",
        scalingTable(r.scaling),
        "",
        `${scalingLimit(r.scaling)}.`,
      ]
    : [
        "Instances: not measured yet — this run predates the scaling scenario; the next full `npm run bench` " +
          "writes its table here from `bench/results.json`.",
      ];
  return [
    `One instance (${run}; medians of ${r.options.rounds} rounds, the load generator, Postgres and Redis on the same cores):`,
    "",
    oneInstanceTable(r),
    "",
    ...scaling,
  ].join("\n");
}

export function scalingSectionIn(markdown: string): string | undefined {
  return textBetween(markdown, SCALING_BEGIN_MARKER, SCALING_END_MARKER);
}

/** Rewrites docs/scaling.md's measured section (at `file`) with the run `results`. */
export function writeScaling(file: string, results: RunResults): void {
  const markdown = fs.readFileSync(file, "utf8");
  fs.writeFileSync(
    file,
    replaceBetween(markdown, SCALING_BEGIN_MARKER, SCALING_END_MARKER, renderScaling(results), "docs/scaling.md"),
  );
}

// `npx tsx bench/benchmarks-md.ts [results.json] [BENCHMARKS.md] [docs/scaling.md]` re-renders both sections from a results file.
if (import.meta.url === `file://${process.argv[1]}`) {
  const resultsFile = process.argv[2] ?? new URL("results.json", import.meta.url).pathname;
  const markdownFile = process.argv[3] ?? new URL("../BENCHMARKS.md", import.meta.url).pathname;
  const scalingFile = process.argv[4] ?? new URL("../docs/scaling.md", import.meta.url).pathname;
  const results = JSON.parse(fs.readFileSync(resultsFile, "utf8")) as RunResults;
  writeLatestRun(markdownFile, results);
  writeScaling(scalingFile, results);
  process.stderr.write(`bench: wrote the latest run of ${resultsFile} into ${markdownFile} and ${scalingFile}\n`);
}
