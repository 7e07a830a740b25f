import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The repository's root, where `src/` is. */
export const root = fileURLToPath(new URL("../../../", import.meta.url));

/** The TypeScript files under `dir` (relative to the root, e.g. `src/domain`), as root-relative paths, sorted. */
export function typeScriptFilesUnder(dir: string): string[] {
  return (readdirSync(`${root}${dir}`, { recursive: true }) as string[])
    .map((f) => `${dir}/${f}`)
    .filter((f) => f.endsWith(".ts"))
    .sort();
}

/** One place a size rule found too large: `path: name`, where it starts, and what was measured. */
export interface Oversized {
  readonly key: string;
  readonly line: number;
  readonly size: number;
}

/**
 * Fails on every oversized place not in `allowed` (`unit` names what `size` counts), and on
 * every allowed key that no longer matches one: an allow-list cannot outlive its reason.
 */
export function assertOnlyAllowed(
  found: readonly Oversized[],
  allowed: Readonly<Record<string, string>>,
  advice: { readonly unit: string; readonly fix: string; readonly stale: string },
): void {
  const offenders = found.filter((f) => !(f.key in allowed));
  assert.deepEqual(
    offenders.map((f) => `${f.key} (line ${f.line}): ${f.size} ${advice.unit}`),
    [],
    advice.fix,
  );
  const stale = Object.keys(allowed).filter((key) => !found.some((f) => f.key === key));
  assert.deepEqual(stale, [], advice.stale);
}

/**
 * Measures every file (root-relative paths; at least `atLeast` of them, so that a wrong folder
 * cannot pass by finding nothing) and holds the result to `allowed` as `assertOnlyAllowed` does.
 */
export function assertFilesWithin(
  files: { readonly paths: readonly string[]; readonly atLeast: number },
  measure: (path: string, text: string) => Oversized[],
  allowed: Readonly<Record<string, string>>,
  advice: { readonly unit: string; readonly fix: string; readonly stale: string },
): void {
  assert.ok(files.paths.length >= files.atLeast, `only ${files.paths.length} files seen`);
  const found = files.paths.flatMap((f) => measure(f, readFileSync(`${root}${f}`, "utf8")));
  assertOnlyAllowed(found, allowed, advice);
}
