import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

/*
 * SECURITY.md proves each claim with `file` › "test name". A renamed or deleted test would leave
 * the claim pointing at nothing, so every reference is checked here against the test files: the
 * file exists and a test()/it()/describe() in it carries that name. Names rendered from a
 * template literal (marked "(rendered from a template)") are matched by their literal parts.
 */

const root = fileURLToPath(new URL("../../../", import.meta.url));
// A name may itself hold quotes; it ends at the quote followed by the cell's next item, a note or the cell's end.
const REFERENCE = /`(test\/[^`]+\.ts)` › "(.*?)"(?=\s*(?:<br>|\||\(|$))(\s*\(rendered from a template\))?/gm;

interface Reference {
  readonly file: string;
  readonly name: string;
  readonly templated: boolean;
}

export function referencesIn(markdown: string): Reference[] {
  return [...markdown.matchAll(REFERENCE)].map((m) => ({ file: m[1]!, name: m[2]!, templated: Boolean(m[3]) }));
}

/** The names a test file gives its tests, as written in the source (quotes and template literals). */
function testNamesIn(source: string): string[] {
  const names: string[] = [];
  const call = /\b(?:test|it|describe)\s*\(\s*(["'`])((?:\\.|(?!\1)[\s\S])*)\1/g;
  for (const m of source.matchAll(call)) names.push(m[2]!.replace(/\\(["'`\\])/g, "$1"));
  return names;
}

/** A template's literal parts must all appear, in order, in the rendered name. */
function templateMatches(template: string, rendered: string): boolean {
  const parts = template.split(/\$\{[^}]*\}/).filter((part) => part.length > 0);
  let from = 0;
  for (const part of parts) {
    const at = rendered.indexOf(part, from);
    if (at < 0) return false;
    from = at + part.length;
  }
  return parts.length > 0;
}

export function missingReferences(markdown: string, readTest: (file: string) => string | undefined): string[] {
  const missing: string[] = [];
  for (const ref of referencesIn(markdown)) {
    const source = readTest(ref.file);
    if (source === undefined) {
      missing.push(`${ref.file} (no such file) › "${ref.name}"`);
      continue;
    }
    const names = testNamesIn(source);
    const found =
      names.includes(ref.name) ||
      (ref.templated && names.some((n) => n.includes("${") && templateMatches(n, ref.name)));
    if (!found) missing.push(`${ref.file} › "${ref.name}"`);
  }
  return missing;
}

const readTest = (file: string) => (existsSync(`${root}${file}`) ? readFileSync(`${root}${file}`, "utf8") : undefined);

test("every test SECURITY.md names as proof exists under that name", () => {
  const markdown = readFileSync(`${root}SECURITY.md`, "utf8");
  assert.ok(referencesIn(markdown).length > 100, "SECURITY.md's proofs are found by the pattern");
  assert.deepEqual(missingReferences(markdown, readTest), []);
});

test("the check can fail: a renamed test, a missing file and a template that does not fit are reported", () => {
  const markdown = [
    '`test/a.test.ts` › "present"',
    '`test/a.test.ts` › "renamed away"',
    '`test/none.test.ts` › "anything"',
    '`test/a.test.ts` › "JSON to /x is 415" (rendered from a template)',
    '`test/a.test.ts` › "JSON to /x is 400" (rendered from a template)',
  ].join("<br>");
  const files: Record<string, string> = {
    "test/a.test.ts": 'test("present", () => {});\ntest(`JSON to ${path} is 415`, () => {});',
  };
  assert.deepEqual(
    missingReferences(markdown, (f) => files[f]),
    [
      'test/a.test.ts › "renamed away"',
      'test/none.test.ts (no such file) › "anything"',
      'test/a.test.ts › "JSON to /x is 400"',
    ],
  );
});
