import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import {
  BEGIN_MARKER,
  END_MARKER,
  latestRunIn,
  renderLatestRun,
  renderScaling,
  replaceLatestRun,
  scalingSectionIn,
  type RunResults,
} from "../../../bench/benchmarks-md.js";

/*
 * A full `npm run bench` writes bench/results.json and renders it into BENCHMARKS.md's "Latest full
 * run" section (the README no longer carries benchmark figures). The figures exist once, in the
 * results file: the section must be what that file renders, so a hand edit of either is caught.
 */

const read = (file: string) => readFileSync(new URL(`../../../${file}`, import.meta.url), "utf8");

test("BENCHMARKS.md's latest run is what bench/results.json renders", () => {
  const results = JSON.parse(read("bench/results.json")) as RunResults;
  assert.equal(latestRunIn(read("BENCHMARKS.md")), renderLatestRun(results));
});

test("docs/scaling.md's measured section is what bench/results.json renders", () => {
  const results = JSON.parse(read("bench/results.json")) as RunResults;
  assert.equal(scalingSectionIn(read("docs/scaling.md")), renderScaling(results));
});

test("a run rewrites the section between the markers and nothing else; without markers it refuses", () => {
  const page = `# Benchmarks\n\nprose before\n\n${BEGIN_MARKER}\nold figures\n${END_MARKER}\n\nprose after\n`;
  const written = replaceLatestRun(page, "new figures");
  assert.equal(written, `# Benchmarks\n\nprose before\n\n${BEGIN_MARKER}\nnew figures\n${END_MARKER}\n\nprose after\n`);
  assert.equal(latestRunIn(written), "new figures");
  assert.equal(replaceLatestRun(written, "new figures"), written);
  assert.throws(() => replaceLatestRun("# Benchmarks\n", "x"), /no "<!-- bench:latest-run:begin -->"/);
  assert.equal(latestRunIn("# Benchmarks\n"), undefined);
});
