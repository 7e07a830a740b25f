import assert from "node:assert/strict";
import { describe, test } from "node:test";
import ts from "typescript";
import { assertFilesWithin, typeScriptFilesUnder, type Oversized } from "./allow-list.js";

/*
 * No function of src/ is longer than a reader can hold: every function, method, constructor,
 * accessor and arrow function whose body spans more than MAX_BODY_LINES lines is listed, unless
 * it is below. Migrations (src/store/postgres/migrations/) are history and not read that way;
 * gen/ is generated. A body's span counts from the line of its first token to the line of its
 * last, comments and blank lines included, and a function's span includes the functions nested
 * in it: moving a step into a closure does not make the outer function shorter to read.
 */

const MAX_BODY_LINES = 60;

/**
 * The functions allowed to be longer, each with its reason. Only pure data tables belong here: a
 * function whose length is one literal, read entry by entry, not a sequence of steps. A key is
 * `path: name` as `longFunctionsIn` names it. An entry that no longer matches a long function
 * fails the test, so the list cannot outlive its reason.
 */
const ALLOWED: Readonly<Record<string, string>> = {
  "src/domain/seed/demo-seed.ts: demoCredits":
    "the demo data set: one array literal of air-credit records (fields per record), built from a handful of parameters",
  "src/observability/metrics.ts: createMetrics":
    "the metric catalogue: one object literal of Prometheus metric definitions (name, help, labels, buckets)",
};

/**
 * The functions of one source text whose body spans more than `max` lines, each keyed `path: name`
 * (a method is `Class.method`, a function nested in another `outer/inner`), its size the body's lines.
 */
function longFunctionsIn(path: string, text: string, max = MAX_BODY_LINES): Oversized[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const lineOf = (pos: number) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const found: Oversized[] = [];
  const visit = (node: ts.Node, enclosing: string) => {
    let name = enclosing;
    if (ts.isClassLike(node)) name = qualify(enclosing, "/", node.name?.text ?? "(class)");
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      name = qualify(enclosing, ts.isClassLike(node.parent) ? "." : "/", nameOf(node, source));
      const first = lineOf(node.body.getStart(source));
      const bodyLines = lineOf(node.body.getEnd()) - first + 1;
      if (bodyLines > max) found.push({ key: `${path}: ${name}`, line: first, size: bodyLines });
    }
    ts.forEachChild(node, (child) => visit(child, name));
  };
  visit(source, "");
  return found;
}

const qualify = (enclosing: string, separator: string, name: string) =>
  enclosing ? `${enclosing}${separator}${name}` : name;

/** A function's own name, or the name it is bound to: variable, property, or the call it is passed to. */
function nameOf(node: ts.SignatureDeclaration, source: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return "constructor";
  if (node.name && !ts.isComputedPropertyName(node.name)) {
    const own = node.name.getText(source);
    if (ts.isGetAccessor(node)) return `get ${own}`;
    if (ts.isSetAccessor(node)) return `set ${own}`;
    return own;
  }
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))
    return parent.name.getText(source);
  if (ts.isCallExpression(parent)) return `(callback of ${parent.expression.getText(source)})`;
  return "(anonymous)";
}

const sourceFiles = () => typeScriptFilesUnder("src").filter((f) => !f.startsWith("src/store/postgres/migrations/"));

describe("architecture: function length", () => {
  test(`no function of src/ has a body over ${MAX_BODY_LINES} lines, except the data tables allowed`, () => {
    assertFilesWithin({ paths: sourceFiles(), atLeast: 100 }, longFunctionsIn, ALLOWED, {
      unit: "lines",
      fix: "split these by meaning into named steps (or, for a pure data table, allow it above with its reason)",
      stale: "these allowed functions are no longer long (or were renamed): drop them from ALLOWED",
    });
  });

  test("finds a long function wherever it is, and measures its body", () => {
    const body = (lines: number) => Array.from({ length: lines - 2 }, (_, i) => `  step(${i});`).join("\n");
    const text = [
      `export function atLimit() {\n${body(MAX_BODY_LINES)}\n}`,
      `export function overLimit(\n  a: number,\n  b: number,\n) {\n${body(MAX_BODY_LINES + 1)}\n}`,
      `export class Service {\n  constructor() {\n${body(MAX_BODY_LINES + 1)}\n  }`,
      `  async handle(): Promise<void> {\n${body(MAX_BODY_LINES + 1)}\n  }`,
      `  get value() {\n${body(MAX_BODY_LINES + 1)}\n  }\n}`,
      `const arrow = () => {\n${body(MAX_BODY_LINES + 1)}\n};`,
      `server.on("stream", (s) => {\n${body(MAX_BODY_LINES + 1)}\n});`,
      `export function outer() {\n  return { inner: function () {\n${body(MAX_BODY_LINES + 1)}\n  } };\n}`,
      `const table = () => ({\n${Array.from({ length: MAX_BODY_LINES }, (_, i) => `  k${i}: ${i},`).join("\n")}\n});`,
    ].join("\n");
    assert.deepEqual(
      longFunctionsIn("src/fixture.ts", text).map((f) => `${f.key}: ${f.size}`),
      [
        `src/fixture.ts: overLimit: ${MAX_BODY_LINES + 1}`,
        `src/fixture.ts: Service.constructor: ${MAX_BODY_LINES + 1}`,
        `src/fixture.ts: Service.handle: ${MAX_BODY_LINES + 1}`,
        `src/fixture.ts: Service.get value: ${MAX_BODY_LINES + 1}`,
        `src/fixture.ts: arrow: ${MAX_BODY_LINES + 1}`,
        `src/fixture.ts: (callback of server.on): ${MAX_BODY_LINES + 1}`,
        `src/fixture.ts: outer: ${MAX_BODY_LINES + 3}`,
        `src/fixture.ts: outer/inner: ${MAX_BODY_LINES + 1}`,
        `src/fixture.ts: table: ${MAX_BODY_LINES + 2}`,
      ],
    );
  });
});
