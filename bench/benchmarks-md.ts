// The "Latest full run" section of BENCHMARKS.md, rendered from a run's results (bench/results.json):
// a full `npm run bench` rewrites that section and nothing else, so benchmark figures live in one
// file of their own instead of the README, and the prose around them stays as written.
import fs from "node:fs";
import {
  goalsTable,
  invalidationLine,
  scenarioTable,
  type Goal,
  type InvalidationSummary,
  type ScenarioSummary,
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
    "Goals:",
    "",
    goalsTable(r.goals),
  ].join("\n");
}

/** `markdown` with the text between the markers replaced by `body`; throws when the markers are missing. */
export function replaceLatestRun(markdown: string, body: string): string {
  const begin = markdown.indexOf(BEGIN_MARKER);
  const end = markdown.indexOf(END_MARKER);
  if (begin < 0 || end < begin)
    throw new Error(`BENCHMARKS.md has no "${BEGIN_MARKER}" … "${END_MARKER}" section to write the run into`);
  return `${markdown.slice(0, begin + BEGIN_MARKER.length)}\n${body}\n${markdown.slice(end)}`;
}

/** The text between the markers, or undefined when they are missing. */
export function latestRunIn(markdown: string): string | undefined {
  const begin = markdown.indexOf(BEGIN_MARKER);
  const end = markdown.indexOf(END_MARKER);
  return begin < 0 || end < begin ? undefined : markdown.slice(begin + BEGIN_MARKER.length, end).trim();
}

/** Rewrites the section of the file at `file` with the run `results`. */
export function writeLatestRun(file: string, results: RunResults): void {
  fs.writeFileSync(file, replaceLatestRun(fs.readFileSync(file, "utf8"), renderLatestRun(results)));
}

// `npx tsx bench/benchmarks-md.ts [results.json] [BENCHMARKS.md]` re-renders the section from a results file.
if (import.meta.url === `file://${process.argv[1]}`) {
  const resultsFile = process.argv[2] ?? new URL("results.json", import.meta.url).pathname;
  const markdownFile = process.argv[3] ?? new URL("../BENCHMARKS.md", import.meta.url).pathname;
  writeLatestRun(markdownFile, JSON.parse(fs.readFileSync(resultsFile, "utf8")) as RunResults);
  process.stderr.write(`bench: wrote the latest run of ${resultsFile} into ${markdownFile}\n`);
}
