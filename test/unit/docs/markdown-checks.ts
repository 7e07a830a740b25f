import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/*
 * Checks over the documentation pages (README, CONTRIBUTING, BENCHMARKS, docs/*.md), shared by the
 * docs tests: pure functions over Markdown text, so each can be shown to fail on a small example.
 */

export const root = fileURLToPath(new URL("../../../", import.meta.url));
export const README_MAX_LINES = 250;

/** The documentation pages, relative to the repository root. */
export function documentationPages(): string[] {
  const docs = readdirSync(path.join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`);
  return ["README.md", "CONTRIBUTING.md", "BENCHMARKS.md", ...docs];
}

/** Lines outside fenced code blocks, with their 1-based numbers. */
function proseLines(markdown: string): Array<{ line: number; text: string }> {
  const out: Array<{ line: number; text: string }> = [];
  let fenced = false;
  markdown.split("\n").forEach((text, i) => {
    if (/^\s*```/.test(text)) fenced = !fenced;
    else if (!fenced) out.push({ line: i + 1, text });
  });
  return out;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text } of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text);
    if (!heading) continue;
    const rendered = heading[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, "$1");
    const slug = rendered
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** Relative links `[text](target)` outside code, as written. */
export function relativeLinks(markdown: string): Array<{ line: number; target: string }> {
  const links: Array<{ line: number; target: string }> = [];
  for (const { line, text } of proseLines(markdown)) {
    const withoutCode = text.replace(/`[^`]*`/g, (span) => (span.includes("](") ? "" : span));
    for (const m of withoutCode.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      links.push({ line, target });
    }
  }
  return links;
}

export interface Files {
  readonly exists: (repoPath: string) => boolean;
  readonly read: (repoPath: string) => string;
}

export const disk: Files = {
  exists: (p) => existsSync(path.join(root, p)),
  read: (p) => readFileSync(path.join(root, p), "utf8"),
};

/** Links of `page` whose file or anchor does not exist, as "page:line → target (why)". */
export function brokenLinks(page: string, files: Files): string[] {
  const broken: string[] = [];
  const markdown = files.read(page);
  for (const { line, target } of relativeLinks(markdown)) {
    const [file = "", anchor] = target.split("#", 2) as [string, string | undefined];
    const resolved = file === "" ? page : path.posix.normalize(path.posix.join(path.posix.dirname(page), file));
    if (resolved.startsWith("..") || !files.exists(resolved.replace(/\/$/, ""))) {
      broken.push(`${page}:${line} → ${target} (no such file)`);
      continue;
    }
    if (anchor !== undefined && resolved.endsWith(".md") && !headingAnchors(files.read(resolved)).has(anchor))
      broken.push(`${page}:${line} → ${target} (no such heading)`);
  }
  return broken;
}

/** `npm run <script>` (with or without -s) and `npm start`/`npm test` naming a script package.json lacks. */
export function missingScripts(page: string, markdown: string, scripts: Record<string, string>): string[] {
  const missing: string[] = [];
  markdown.split("\n").forEach((text, i) => {
    for (const m of text.matchAll(/\bnpm (?:run(?:\s+-s)?\s+([\w:.-]+)|(start|test)\b)/g)) {
      const script = m[1] ?? m[2]!;
      if (!(script in scripts)) missing.push(`${page}:${i + 1} → npm run ${script}`);
    }
  });
  return missing;
}

const FILE_EXTENSION = /\.(md|txt|json|ya?ml|ts|cjs|js|sh|proto)$/;

/** Top-level directories .gitignore names: made at run time (`data/`, `dist/`, `node_modules`), never in a clone. */
export function ignoredDirectories(gitignore: string): Set<string> {
  return new Set(
    gitignore
      .split("\n")
      .map((line) => line.trim().replace(/^\//, "").replace(/\/$/, ""))
      .filter((name) => /^[\w.-]+$/.test(name)),
  );
}

/** Repository paths in backticks (`src/…`, `docs/spec.txt`, `.ci/run`, `SECURITY.md`) that do not exist. */
export function missingPaths(
  page: string,
  markdown: string,
  exists: (repoPath: string) => boolean,
  runtimeDirectories: ReadonlySet<string> = new Set(),
): string[] {
  const missing: string[] = [];
  for (const { line, text } of proseLines(markdown)) {
    for (const m of text.matchAll(/`([^`\s]+)`/g)) {
      const candidate = m[1]!.replace(/^\.\//, "");
      if (!/^[\w.-]+(\/[\w.-]*)*$/.test(candidate)) continue; // URL paths (/v2/…), placeholders, globs
      if (!candidate.includes("/") && !FILE_EXTENSION.test(candidate)) continue; // a word, a variable, a version
      if (runtimeDirectories.has(candidate.split("/")[0]!)) continue;
      if (!exists(candidate.replace(/\/$/, ""))) missing.push(`${page}:${line} → ${m[1]}`);
    }
  }
  return missing;
}

/** The operator commands (`npm run -s cli -- tmc create …` → "tmc create") the pages name, with where. */
export function cliCommands(page: string, markdown: string): Array<{ where: string; words: string[] }> {
  const found: Array<{ where: string; words: string[] }> = [];
  markdown.split("\n").forEach((text, i) => {
    for (const m of text.matchAll(/\bnpm run -s cli -- ([a-z][\w-]*(?: [a-z][\w-]*)?)/g))
      found.push({ where: `${page}:${i + 1}`, words: m[1]!.split(" ") });
  });
  return found;
}
