import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { documentationPages } from "./markdown-checks.js";

// The README's "Libraries, and why" table (now in CONTRIBUTING.md) was cut in two by a blank line; Markdown then
// renders its second half as a paragraph of pipes. A table row right after a blank line that
// follows another table row is that break (a new table starts with a header and a |---| line).
test("no Markdown table of the documentation (README, SECURITY.md, CONTRIBUTING.md, BENCHMARKS.md, docs/) is broken by a blank line", () => {
  for (const name of [...documentationPages(), "SECURITY.md"]) {
    const lines = fs.readFileSync(fileURLToPath(new URL(`../../../${name}`, import.meta.url)), "utf8").split("\n");
    const broken: number[] = [];
    let fenced = false;
    for (let i = 2; i < lines.length; i++) {
      if (lines[i]!.startsWith("```")) fenced = !fenced;
      if (fenced) continue;
      const row = (line: string | undefined) => /^\|.*\|\s*$/.test(line ?? "");
      const startsTable = /^\|(\s*:?-+:?\s*\|)+\s*$/.test(lines[i + 1] ?? "");
      if (row(lines[i]) && lines[i - 1]!.trim() === "" && row(lines[i - 2]) && !startsTable) broken.push(i + 1);
    }
    assert.deepEqual(broken, [], `${name}: table rows after a blank line at lines ${broken.join(", ")}`);
  }
});
