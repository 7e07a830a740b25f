import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { cruise, type IConfiguration, type ICruiseResult, type IViolation } from "dependency-cruiser";
import extractTSConfig from "dependency-cruiser/config-utl/extract-ts-config";

/*
 * The layering of src/ and gen/, checked on the import graph dependency-cruiser builds with the
 * project's tsconfig (NodeNext: imports name .js, the files are .ts). The rules live in
 * dependency-rules.cjs; a second cruise over fixtures/ proves that each rule can fail.
 */

const root = fileURLToPath(new URL("../../../", import.meta.url)).replace(/\/$/, "");
// Paths in the rules and in the cruise result are relative to the repository root.
process.chdir(root);

const { configFor } = createRequire(import.meta.url)("./dependency-rules.cjs") as {
  configFor: (roots?: { src?: string; gen?: string; tsConfig?: string }) => IConfiguration;
};
const FIXTURES = "test/unit/architecture/fixtures";

async function cruiseWith(roots: { src: string; gen: string }): Promise<ICruiseResult> {
  const { options, ...ruleSet } = configFor({ ...roots, tsConfig: "tsconfig.json" });
  const { output } = await cruise(
    [roots.src, roots.gen],
    { ...options, baseDir: root, validate: true, ruleSet },
    undefined,
    { tsConfig: extractTSConfig(`${root}/tsconfig.json`) },
  );
  assert.equal(typeof output, "object", "the cruise returns its result as an object");
  return output as ICruiseResult;
}

/** One line per violation: rule, from, to (and the cycle, for circular ones). */
const describeViolation = (v: IViolation) =>
  `${v.rule.name}: ${v.from} → ${v.to}${v.cycle?.length ? `  (cycle: ${[v.from, ...v.cycle.map((c) => c.name)].join(" → ")})` : ""}`;
const lines = (violations: readonly IViolation[]) => violations.map(describeViolation).sort();
/**
 * The rule, from and to of each violation, with the fixture's prefix dropped; a cycle (reported
 * once, from whichever member the cruise met first) as its sorted members.
 */
const triples = (violations: readonly IViolation[]) =>
  violations
    .map((v) =>
      (v.cycle?.length
        ? [v.rule.name, `cycle of ${[...new Set([v.from, ...v.cycle.map((c) => c.name)])].sort().join(", ")}`]
        : [v.rule.name, v.from, v.to]
      )
        .map((s) => s.replaceAll(`${FIXTURES}/`, ""))
        .join(" | "),
    )
    .sort();

const tsFilesUnder = (dir: string) =>
  (readdirSync(`${root}/${dir}`, { recursive: true }) as string[])
    .filter((f) => f.endsWith(".ts"))
    .map((f) => `${dir}/${f}`);

describe("architecture: the import graph of src/ and gen/", () => {
  test("follows the layering rules", async () => {
    const result = await cruiseWith({ src: "src", gen: "gen" });

    // A cruise that resolves nothing would find nothing to forbid: check that it saw the tree.
    const sources = new Set(result.modules.map((m) => m.source));
    for (const file of [...tsFilesUnder("src"), ...tsFilesUnder("gen")])
      assert.ok(sources.has(file), `the cruise saw ${file}`);
    const srcEdges = result.modules
      .filter((m) => m.source.startsWith("src/"))
      .flatMap((m) => m.dependencies.filter((d) => d.resolved.startsWith("src/") && !d.couldNotResolve));
    assert.ok(srcEdges.length >= 200, `only ${srcEdges.length} resolved edges between src files`);
    assert.ok(
      srcEdges.some(
        (d) => d.module === "../domain/api-users/index.js" && d.resolved === "src/domain/api-users/index.ts",
      ),
      "a NodeNext import (.js) resolves to its .ts file",
    );
    assert.ok(
      srcEdges.some((d) => d.dependencyTypes.includes("type-only")),
      "type-only imports are part of the graph",
    );
    assert.ok(
      result.modules.some(
        (m) => m.source.startsWith("src/") && m.dependencies.some((d) => d.resolved.startsWith("gen/")),
      ),
      "edges into gen/ are resolved",
    );
    assert.ok(
      result.summary.totalDependenciesCruised! >= 400,
      `${result.summary.totalDependenciesCruised} dependencies cruised`,
    );

    const violations = lines(result.summary.violations);
    assert.deepEqual(violations, [], `${violations.length} architecture violation(s):\n  ${violations.join("\n  ")}`);
  });

  test("reports each rule broken in the fixture, and no allowed edge", async () => {
    const result = await cruiseWith({ src: `${FIXTURES}/src`, gen: `${FIXTURES}/gen` });
    const knex = result.modules.flatMap((m) => m.dependencies).find((d) => d.module === "knex")?.resolved;
    assert.ok(knex && /(^|\/)node_modules\/knex\//.test(knex), `knex resolves into node_modules (${knex})`);
    const sdkTraceBase = result.modules
      .flatMap((m) => m.dependencies)
      .find((d) => d.module === "@opentelemetry/sdk-trace-base")?.resolved;
    const connectProtocol = result.modules
      .flatMap((m) => m.dependencies)
      .find((d) => d.module === "@connectrpc/connect/protocol")?.resolved;
    assert.deepEqual(
      triples(result.summary.violations),
      [
        // 1
        "no-circular | cycle of src/rpc/a.ts, src/rpc/b.ts",
        // 2
        "errors-imports-only-errors | src/errors/codes.ts | src/config/flags.ts",
        // 3
        "config-imports-only-config-and-errors | src/config/settings.ts | src/domain/shared/clock.ts",
        // 4
        "domain-imports-only-domain-and-errors | src/domain/tokens/token-service.ts | gen/demo_pb.ts",
        "domain-imports-only-domain-and-errors | src/domain/tokens/token-service.ts | src/store/repo.ts",
        `domain-npm-only-jose | src/domain/tokens/token-service.ts | ${knex}`,
        "domain-area-imports-other-areas-only-by-model-or-ports | src/domain/tokens/token-service.ts | src/domain/api-users/admin.ts",
        // 5
        "store-imports-only-store-errors-and-domain-contracts | src/store/repo.ts | src/domain/api-users/admin.ts",
        "store-imports-only-store-errors-and-domain-contracts | src/store/repo.ts | src/observability/log.ts",
        // 6
        "rpc-not-to-store-gateway-http-app-config-cli | src/rpc/a.ts | src/store/repo.ts",
        "rpc-not-to-store-gateway-http-app-config-cli | src/rpc/b.ts | src/app/compose.ts",
        // 7
        "gateway-not-to-domain-store-http-app-config-cli | src/gateway/route.ts | src/domain/api-users/model.ts",
        // 8
        "http-not-to-domain-store-app-config-cli | src/http/server.ts | src/config/settings.ts",
        // 9
        "observability-imports-only-observability | src/observability/log.ts | src/errors/codes.ts",
        // 10
        "app-only-from-main-and-cli | src/rpc/b.ts | src/app/compose.ts",
        // 11
        "gen-not-to-src | gen/demo_pb.ts | src/errors/codes.ts",
        // 12
        `opentelemetry-sdk-only-in-observability | src/store/traced.ts | ${sdkTraceBase}`,
        // 13
        `connect-private-sections-only-in-connect-internals | src/http/server.ts | ${connectProtocol}`,
        // 14
        "src-takes-only-the-shared-token-format-from-packages | src/domain/tokens/token-service.ts | packages/verifier/src/verifier.ts",
        // 15
        "shared-token-format-imports-only-node-and-itself | packages/verifier/src/jws.ts | src/domain/api-users/admin.ts",
        // an import that does not resolve
        "no-unresolvable | src/rpc/b.ts | ./missing.js",
      ].sort(),
      `got:\n  ${lines(result.summary.violations).join("\n  ")}`,
    );
    // Every rule of the set is exercised by the fixture.
    const { forbidden = [] } = configFor();
    assert.deepEqual(
      [...new Set(result.summary.violations.map((v) => v.rule.name))].sort(),
      forbidden.map((r) => r.name!).sort(),
    );
  });

  test("Connect's private sections are imported by connect-internals.ts alone, in test/, bench/ and scripts/ too", () => {
    // src/ and gen/ are held by rule 13 above; the other trees are read as text (the fixtures break it on purpose).
    const importsPrivate = /(?:from|import)\s*\(?\s*["']@connectrpc\/connect\/protocol[^"']*["']/;
    const offenders = ["test", "bench", "scripts"]
      .flatMap((dir) => tsFilesUnder(dir))
      .filter((file) => !file.startsWith(`${FIXTURES}/`) && !file.includes("/node_modules/"))
      .filter((file) => importsPrivate.test(readFileSync(`${root}/${file}`, "utf8")));
    assert.deepEqual(offenders, [], `import them through src/http/protocol/connect-internals.ts`);
    // Written in two parts, so that this file does not match itself.
    assert.ok(
      importsPrivate.test("import { x } from " + '"@connectrpc/connect/protocol-grpc";'),
      "the pattern finds one",
    );
  });
});
