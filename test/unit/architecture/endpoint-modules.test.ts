import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { posix } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import ts from "typescript";

/*
 * The shape of the endpoints that take a client credential (node-oidc-provider's actions over
 * its shared client_auth): each endpoint module (src/domain/<area>/*-endpoint.ts) admits its
 * callers through the one client-authentication pipeline and imports no other endpoint module;
 * and no domain method throws "… is not wired" (a dependency an object cannot work without is
 * a required constructor field, not an optional one checked on every call).
 */

const root = fileURLToPath(new URL("../../../", import.meta.url)).replace(/\/$/, "");
const PIPELINE = "src/domain/shared/client-auth-pipeline.ts";

const tsFilesUnder = (dir: string) =>
  (readdirSync(`${root}/${dir}`, { recursive: true }) as string[])
    .filter((f) => f.endsWith(".ts"))
    .map((f) => `${dir}/${f}`);

const isEndpointModule = (path: string) => /^src\/domain\/[^/]+\/[^/]+-endpoint\.ts$/.test(path);

/** The src files a module imports (relative imports, `.js` named as their `.ts`), type-only ones included. */
function importsOf(path: string, text = readFileSync(`${root}/${path}`, "utf8")): string[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: string[] = [];
  for (const statement of source.statements) {
    if (!(ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement))) continue;
    const specifier = statement.moduleSpecifier;
    if (!specifier || !ts.isStringLiteral(specifier) || !specifier.text.startsWith(".")) continue;
    found.push(posix.normalize(posix.join(posix.dirname(path), specifier.text)).replace(/\.js$/, ".ts"));
  }
  return found;
}

/** `Class.method` (or the function) of every `throw` whose message says "not wired". */
function notWiredThrowsIn(path: string, text: string): string[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node, where: string) => {
    let here = where;
    if ((ts.isMethodDeclaration(node) || ts.isFunctionDeclaration(node)) && node.name)
      here = `${where}${node.name.getText(source)}`;
    if (ts.isClassDeclaration(node) && node.name) here = `${node.name.text}.`;
    if (ts.isThrowStatement(node) && /not wired/i.test(node.getText(source)))
      found.push(`${path}: ${here} (line ${source.getLineAndCharacterOfPosition(node.getStart()).line + 1})`);
    ts.forEachChild(node, (child) => visit(child, here));
  };
  visit(source, "");
  return found;
}

describe("architecture: endpoint modules over one client-authentication pipeline", () => {
  const endpoints = tsFilesUnder("src/domain").filter(isEndpointModule);

  test("the endpoint modules are the ones that take a client credential", () => {
    assert.deepEqual(endpoints.sort(), [
      "src/domain/credential-changes/credential-change-endpoint.ts",
      "src/domain/tokens/introspection-endpoint.ts",
      "src/domain/tokens/revocation-endpoint.ts",
      "src/domain/tokens/token-endpoint.ts",
    ]);
  });

  test("each endpoint module imports the pipeline and no other endpoint module", () => {
    for (const endpoint of endpoints) {
      const imports = importsOf(endpoint);
      assert.ok(imports.includes(PIPELINE), `${endpoint} imports ${PIPELINE}`);
      assert.deepEqual(
        imports.filter(isEndpointModule),
        [],
        `${endpoint} imports no other endpoint module (shared steps belong in the pipeline)`,
      );
    }
  });

  test("the import check can fail: an endpoint importing another endpoint, or not the pipeline, is seen", () => {
    const path = "src/domain/tokens/introspection-endpoint.ts";
    const imports = importsOf(path, 'import type { TokenEndpoint } from "./token-endpoint.js";\n');
    assert.deepEqual(imports, ["src/domain/tokens/token-endpoint.ts"]);
    assert.ok(imports.some(isEndpointModule) && !imports.includes(PIPELINE));
    assert.deepEqual(importsOf(path, 'import { ClientAuthPipeline } from "../shared/client-auth-pipeline.js";\n'), [
      PIPELINE,
    ]);
  });

  test('no method in src/domain throws "not wired"', () => {
    const found = tsFilesUnder("src/domain").flatMap((path) =>
      notWiredThrowsIn(path, readFileSync(`${root}/${path}`, "utf8")),
    );
    assert.deepEqual(found, []);
  });

  test("the not-wired check can fail: a method that throws it is named", () => {
    const text = `export class A {\n  m() {\n    if (!this.x) throw new Error("the x is not wired");\n  }\n}\n`;
    assert.deepEqual(notWiredThrowsIn("src/domain/a.ts", text), ["src/domain/a.ts: A.m (line 3)"]);
  });
});
