import assert from "node:assert/strict";
import { test } from "node:test";
import { UsageError, parseCommand } from "../../../src/cli/arguments.js";
import {
  README_MAX_LINES,
  brokenLinks,
  cliCommands,
  disk,
  documentationPages,
  headingAnchors,
  ignoredDirectories,
  missingPaths,
  missingScripts,
  type Files,
} from "./markdown-checks.js";

/*
 * The documentation is split by audience (README, CONTRIBUTING, BENCHMARKS, docs/*.md) and links
 * instead of repeating itself, so a moved file, a renamed heading or a dropped npm script would
 * leave readers at a dead end. Checked here: the README stays short, every relative link reaches a
 * file (and its heading, for an anchor), every `npm run <script>` exists in package.json, and every
 * repository path the README names in backticks exists, and every operator command the pages
 * name (`npm run -s cli -- tmc create`) is one the CLI knows.
 */

test(`README.md is at most ${README_MAX_LINES} lines`, () => {
  const lines = disk.read("README.md").replace(/\n$/, "").split("\n").length;
  assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines`);
});

test("every relative link of the documentation reaches an existing file and heading", () => {
  const pages = documentationPages();
  assert.ok(pages.length >= 10, `the documentation pages are found: ${pages.join(", ")}`);
  assert.deepEqual(
    [...pages, "SECURITY.md"].flatMap((page) => brokenLinks(page, disk)),
    [],
  );
});

test("every npm script the documentation names exists in package.json", () => {
  const scripts = (JSON.parse(disk.read("package.json")) as { scripts: Record<string, string> }).scripts;
  assert.deepEqual(
    documentationPages().flatMap((page) => missingScripts(page, disk.read(page), scripts)),
    [],
  );
});

test("every repository path the README names in backticks exists", () => {
  const markdown = disk.read("README.md");
  assert.ok((markdown.match(/`docs\/spec\.txt`/g) ?? []).length > 0, "the README's paths are found by the pattern");
  const runtime = ignoredDirectories(disk.read(".gitignore"));
  assert.ok(runtime.has("data") && runtime.has("node_modules"), `run-time directories: ${[...runtime].join(", ")}`);
  assert.deepEqual(missingPaths("README.md", markdown, disk.exists, runtime), []);
});

/** Whether the CLI knows the command `words` (missing options are fine: only the command is checked). */
function cliKnows(words: readonly string[]): boolean {
  try {
    parseCommand(words, () => {});
    return true;
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    return !/unknown command|needs a command|a command is required/.test(error.message);
  }
}

test("every operator command the documentation names is one the CLI knows", () => {
  const named = documentationPages().flatMap((page) => cliCommands(page, disk.read(page)));
  assert.ok(named.length > 20, `the pages' CLI commands are found: ${named.length}`);
  assert.deepEqual(
    named.filter(({ words }) => !cliKnows(words)).map(({ where, words }) => `${where} → cli ${words.join(" ")}`),
    [],
  );
  assert.equal(cliKnows(["tmc", "creat"]), false, "an unknown command is told apart");
  assert.equal(cliKnows(["tmx"]), false, "an unknown group is told apart");
});

test("the checks can fail: a missing file, a missing heading, a missing script and a missing path are reported", () => {
  const pages: Record<string, string> = {
    "README.md": [
      "# Title",
      "See [ops](docs/ops.md#logs), [gone](docs/gone.md), [bad anchor](docs/ops.md#metrics), [here](#title).",
      "Outside: [up](../x.md). A web link [w](https://example.com/x.md) is not checked.",
      "```sh",
      "npm run -s nosuch   # in code: still a command the reader types",
      "[not a link](in-code.md)",
      "```",
      "Run `npm run typecheck`, `npm test`, `npm run gone:script`; read `src/present.ts` and `src/absent.ts`,",
      "`/v2/api-users`, `DATABASE_URL`, `v20.20.2`, `docs/ops.md`, `./data`, `./docs/gone` and `MISSING.md`.",
      "X=$(npm run -s cli -- tmc create --name N | jq .tmcId); npm run -s cli -- seed        # demo; `npm run -s cli -- …`",
    ].join("\n"),
    "docs/ops.md": "# Operations\n\n## Logs\n\n```\n## Metrics\n```\n",
  };
  const files: Files = {
    exists: (p) => p in pages || p === "docs" || p === "src/present.ts",
    read: (p) => pages[p]!,
  };
  assert.deepEqual(brokenLinks("README.md", files), [
    "README.md:2 → docs/gone.md (no such file)",
    "README.md:2 → docs/ops.md#metrics (no such heading)",
    "README.md:3 → ../x.md (no such file)",
  ]);
  assert.deepEqual(missingScripts("README.md", pages["README.md"]!, { typecheck: "tsc", test: "x", cli: "tsx" }), [
    "README.md:5 → npm run nosuch",
    "README.md:8 → npm run gone:script",
  ]);
  assert.deepEqual(
    missingPaths("README.md", pages["README.md"]!, files.exists, ignoredDirectories("/data/\n*.log\n")),
    ["README.md:8 → src/absent.ts", "README.md:9 → ./docs/gone", "README.md:9 → MISSING.md"],
  );
  assert.deepEqual(
    cliCommands("README.md", pages["README.md"]!).map(({ where, words }) => `${where} ${words.join(" ")}`),
    ["README.md:10 tmc create", "README.md:10 seed"],
  );
  assert.deepEqual(
    [...headingAnchors("# A `b` title: c\n## A `b` title: c\n### Air credits: 100 000 credits")],
    ["a-b-title-c", "a-b-title-c-1", "air-credits-100-000-credits"],
  );
});
