import assert from "node:assert/strict";
import { describe, test } from "node:test";
import ts from "typescript";
import { assertFilesWithin, assertOnlyAllowed, typeScriptFilesUnder, type Oversized } from "./allow-list.js";

/*
 * A domain service is built from named dependencies: its constructor takes one dependency object
 * (`new ApiUserAdmin({ uow, apiUsers, … })`), so a call site says what each argument is and two
 * ports of the same type cannot be swapped unnoticed. No constructor in src/domain may take more
 * than MAX_PARAMETERS parameters; value objects with one or two arguments stay positional.
 */

const MAX_PARAMETERS = 5;

/**
 * The constructors allowed more, each with its reason. A key is `path: Class` as
 * `wideConstructorsIn` names it. An entry that no longer matches a wide constructor fails the
 * test, so the list shrinks as they are converted.
 */
const ALLOWED: Readonly<Record<string, string>> = {};

/**
 * The constructors of one source text that take more than `max` parameters, each keyed
 * `path: Class` (a class nested in a function: `path: outer/Class`), its size the parameter count.
 */
function wideConstructorsIn(path: string, text: string, max = MAX_PARAMETERS): Oversized[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: Oversized[] = [];
  const visit = (node: ts.Node, enclosing: string) => {
    let name = enclosing;
    if (ts.isClassLike(node))
      name = enclosing ? `${enclosing}/${node.name?.text ?? "(class)"}` : (node.name?.text ?? "(class)");
    else if (ts.isFunctionDeclaration(node) && node.name)
      name = enclosing ? `${enclosing}/${node.name.text}` : node.name.text;
    if (ts.isConstructorDeclaration(node) && node.parameters.length > max) {
      const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
      found.push({ key: `${path}: ${enclosing}`, line, size: node.parameters.length });
    }
    ts.forEachChild(node, (child) => visit(child, name));
  };
  visit(source, "");
  return found;
}

describe("architecture: constructor parameters", () => {
  test(`no constructor in src/domain takes over ${MAX_PARAMETERS} parameters, except those allowed`, () => {
    const paths = typeScriptFilesUnder("src/domain");
    assertFilesWithin({ paths, atLeast: 50 }, wideConstructorsIn, ALLOWED, {
      unit: "parameters",
      fix: "take one dependency object with named fields instead (see CONTRIBUTING.md, how an area is built)",
      stale: "these allowed constructors no longer take too many parameters: drop them from ALLOWED",
    });
  });

  test("finds a wide constructor in any class, and counts its parameters", () => {
    const params = (n: number) => Array.from({ length: n }, (_, i) => `p${i}: number`).join(", ");
    const text = [
      `export class AtLimit {\n  constructor(${params(MAX_PARAMETERS)}) {}\n}`,
      `export class Wide {\n  constructor(\n    private readonly a: string,\n    ${params(MAX_PARAMETERS)},\n  ) {}\n}`,
      `export class Deps {\n  constructor(private readonly deps: { a: 1; b: 2; c: 3; d: 4; e: 5; f: 6 }) {}\n}`,
      `const Anonymous = class {\n  constructor(${params(MAX_PARAMETERS + 2)}) {}\n};`,
      `export function factory() {\n  return class Inner {\n    constructor(${params(MAX_PARAMETERS + 1)}) {}\n  };\n}`,
    ].join("\n");
    assert.deepEqual(
      wideConstructorsIn("src/domain/fixture.ts", text).map((c) => `${c.key}: ${c.size}`),
      [
        `src/domain/fixture.ts: Wide: ${MAX_PARAMETERS + 1}`,
        `src/domain/fixture.ts: (class): ${MAX_PARAMETERS + 2}`,
        `src/domain/fixture.ts: factory/Inner: ${MAX_PARAMETERS + 1}`,
      ],
    );
  });

  test("an allow-list fails on a wide constructor it does not name, and on a name no longer wide", () => {
    const found = [{ key: "src/domain/a.ts: A", line: 3, size: MAX_PARAMETERS + 1 }];
    const advice = { unit: "parameters", fix: "convert", stale: "drop" };
    assert.throws(() => assertOnlyAllowed(found, {}, advice), /convert/);
    assert.throws(() => assertOnlyAllowed([], { "src/domain/a.ts: A": "reason" }, advice), /drop/);
    assertOnlyAllowed(found, { "src/domain/a.ts: A": "reason" }, advice);
  });
});
