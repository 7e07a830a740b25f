import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { COMMANDS } from "../../../src/cli/arguments.js";
import { root } from "../docs/markdown-checks.js";

/*
 * docs/cli.md's synopsis says which options a command requires: an option in brackets is optional, one
 * outside brackets (and outside a "(--a | --b)" choice) is required. The CLI derives the same from the
 * contract's rules; the two must agree, or a reader is told to leave out an option the CLI then demands.
 */

interface SynopsisLine {
  readonly command: string;
  readonly optional: Set<string>;
  readonly required: Set<string>;
}

/** The synopsis lines of docs/cli.md (a `\` continuation joined), each with its options sorted by marking. */
export function synopsisLines(markdown: string): SynopsisLine[] {
  const joined = markdown.replace(/\\\n\s*/g, " ");
  const lines: SynopsisLine[] = [];
  for (const raw of joined.split("\n")) {
    const match = /^npm run -s cli -- ([a-z-]+(?: [a-z-]+)?)((?: .*)?)$/.exec(raw.replace(/\s+#.*$/, ""));
    if (!match) continue;
    const words = match[1]!.split(" ");
    const command = COMMANDS.some((c) => c.name === match[1]) ? match[1]! : words[0]!;
    const rest = (COMMANDS.some((c) => c.name === match[1]) ? match[2]! : `${words[1] ?? ""}${match[2]!}`).trim();
    const optional = new Set<string>();
    const required = new Set<string>();
    // Brackets and parenthesised choices, then what is left outside both.
    for (const bracket of rest.matchAll(/\[([^\]]*)\]/g)) for (const o of options(bracket[1]!)) optional.add(o);
    const outside = rest.replace(/\[[^\]]*\]/g, "").replace(/\([^)]*\)/g, "");
    for (const o of options(outside)) required.add(o);
    lines.push({ command, optional, required });
  }
  return lines;
}

function options(text: string): string[] {
  return [...text.matchAll(/--([a-z][a-z-]*)/g)].map((m) => m[1]!).filter((name) => name !== "output");
}

describe("docs/cli.md's synopsis", () => {
  const lines = synopsisLines(readFileSync(path.join(root, "docs/cli.md"), "utf8"));

  test("marks each option required or optional as the CLI does", () => {
    const wrong: string[] = [];
    for (const line of lines) {
      const spec = COMMANDS.find((c) => c.name === line.command);
      if (!spec) continue;
      for (const option of spec.options) {
        if (option.required && line.optional.has(option.name) && !line.required.has(option.name))
          wrong.push(`${line.command}: --${option.name} is required`);
        if (!option.required && line.required.has(option.name))
          wrong.push(`${line.command}: --${option.name} is optional`);
      }
    }
    assert.deepEqual(wrong, []);
  });

  test("the check catches a required option shown in brackets", () => {
    const [line] = synopsisLines("npm run -s cli -- trusted-issuer add --tmc-id ID [--audience AUD]\n");
    assert.equal(line!.command, "trusted-issuer add");
    assert.ok(line!.optional.has("audience") && line!.required.has("tmc-id"));
    assert.equal(
      COMMANDS.find((c) => c.name === "trusted-issuer add")!.options.find((o) => o.name === "audience")!.required,
      true,
    );
  });

  test("covers every command the CLI has", () => {
    const documented = new Set(lines.map((l) => l.command));
    assert.deepEqual(
      COMMANDS.map((c) => c.name).filter((name) => !documented.has(name)),
      [],
    );
  });
});
