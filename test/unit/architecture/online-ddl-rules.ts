import fs from "node:fs";
import path from "node:path";

/**
 * Online-DDL discipline: a migration runs while the previous version keeps serving on
 * the same tables, so it may not take a lock that stops them for longer than a moment. THE rule
 * list (CONTRIBUTING.md points here); each rule says why. It applies to every migration newer
 * than CUTOFF: the ones before it ran when no fleet was live, and stay as they are.
 */
export const CUTOFF = "20261126000200_ssf_poll_positions";

export interface Violation {
  readonly rule: string;
  readonly message: string;
}

interface Rule {
  readonly name: string;
  /** Why the rule exists, shown with every violation. */
  readonly why: string;
  readonly check: (migration: ParsedMigration) => string[];
}

interface ParsedMigration {
  /** The source without comments. */
  readonly code: string;
  /** Tables this migration creates itself (empty, so building their indexes blocks no one). */
  readonly createdTables: ReadonlySet<string>;
  /** The bodies of `alterTable(...)` / `table(...)` calls: changes to tables that exist. */
  readonly alterBlocks: readonly string[];
}

const VOLATILE =
  /\b(gen_random_uuid|random|clock_timestamp|timeofday|uuid_generate_v\w+|nextval)\s*\(|\b(big)?serial\b/i;

export const RULES: readonly Rule[] = [
  {
    name: "index-not-concurrent",
    why: "CREATE INDEX without CONCURRENTLY blocks every write to the table while it builds",
    check: ({ code, createdTables, alterBlocks }) => [
      ...[...code.matchAll(CREATE_INDEX)]
        .filter((m) => !m[2] && !createdTables.has(unquoted(m[3]!)))
        .map((m) => `non-concurrent index on existing table ${unquoted(m[3]!)}: ${m[0].trim()}`),
      ...alterBlocks
        .filter((block) => /\.(index|unique|primary)\s*\(/.test(block))
        .map(() => "an index, unique or primary key added through alterTable (knex builds it without CONCURRENTLY)"),
    ],
  },
  {
    name: "concurrently-outside-transaction",
    why: "CREATE INDEX CONCURRENTLY cannot run in a transaction: export `config = { transaction: false }`",
    check: ({ code }) =>
      /\bconcurrently\b/i.test(code) && !/export\s+const\s+config\s*=\s*\{\s*transaction\s*:\s*false\s*\}/.test(code)
        ? ["CONCURRENTLY without `export const config = { transaction: false }`"]
        : [],
  },
  {
    name: "no-column-type-change",
    why: "ALTER COLUMN … TYPE rewrites the table under an ACCESS EXCLUSIVE lock; add a column, backfill, switch over",
    check: ({ code, alterBlocks }) => [
      ...[...code.matchAll(/alter\s+column\s+"?\w+"?\s+(set\s+data\s+)?type\b/gi)].map(
        (m) => `column type change: ${m[0]}`,
      ),
      ...alterBlocks.filter((block) => /\.alter\s*\(/.test(block)).map(() => "column changed with knex's .alter()"),
    ],
  },
  {
    name: "no-volatile-default",
    why: "a column added with a volatile default (random(), gen_random_uuid(), a serial…) rewrites the table",
    check: ({ code, alterBlocks }) => [
      ...[...code.matchAll(/add\s+column\s+[^;"'`]*?default\s+[^,;"'`]*/gi)]
        .filter((m) => VOLATILE.test(m[0]) || /\b(big)?serial\b/i.test(m[0]))
        .map((m) => `volatile default: ${m[0]}`),
      ...[...code.matchAll(/add\s+column\s+"?\w+"?\s+(big)?serial\b/gi)].map((m) => `serial column added: ${m[0]}`),
      ...alterBlocks
        .filter(
          (block) =>
            /\.(increments|bigIncrements)\s*\(/.test(block) ||
            (/defaultTo\([^)]*\)/.test(block) && VOLATILE.test(block)),
        )
        .map(() => "a column with a volatile default added through alterTable"),
    ],
  },
  {
    name: "lock-timeout",
    why: "without lock_timeout, a DDL statement queued behind a long transaction blocks every query queued behind it",
    // Set in the migration's SQL, or by onOneConnection / inLockedTransaction (src/store/postgres/online-ddl.ts).
    check: ({ code }) =>
      /\block_timeout\b/i.test(code) || /\b(onOneConnection|inLockedTransaction)\s*\(/.test(code)
        ? []
        : ["no lock_timeout set"],
  },
];

const CREATE_INDEX =
  /create\s+(unique\s+)?index\s+(concurrently\s+)?(?:if\s+not\s+exists\s+)?(?:"?[\w.]+"?\s+)?on\s+(?:only\s+)?("?[\w.]+"?)/gi;

function unquoted(table: string): string {
  return table.replace(/"/g, "").split(".").at(-1)!.toLowerCase();
}

function withoutComments(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:])\/\/.*$/gm, "$1");
}

/** The argument text of every `.alterTable(` / `.table(` call, by balancing parentheses. */
function alterBlocksOf(code: string): string[] {
  const blocks: string[] = [];
  for (const match of code.matchAll(/\.(alterTable|table)\s*\(/g)) {
    let depth = 1;
    let end = match.index + match[0].length;
    while (end < code.length && depth > 0) {
      if (code[end] === "(") depth++;
      else if (code[end] === ")") depth--;
      end++;
    }
    blocks.push(code.slice(match.index, end));
  }
  return blocks;
}

function parse(source: string): ParsedMigration {
  const code = withoutComments(source);
  const created = [
    ...[...code.matchAll(/createTable(?:IfNotExists)?\s*\(\s*["'`](\w+)["'`]/g)].map((m) => m[1]!),
    ...[...code.matchAll(/create\s+table\s+(?:if\s+not\s+exists\s+)?("?[\w.]+"?)/gi)].map((m) => unquoted(m[1]!)),
  ];
  return { code, createdTables: new Set(created.map((t) => t.toLowerCase())), alterBlocks: alterBlocksOf(code) };
}

/** Every violation of the rules in one migration's source. */
export function checkMigrationSource(source: string): Violation[] {
  const migration = parse(source);
  return RULES.flatMap((rule) =>
    rule.check(migration).map((found) => ({ rule: rule.name, message: `${found} (${rule.why})` })),
  );
}

export const MIGRATIONS_DIR = path.resolve(import.meta.dirname, "../../../src/store/postgres/migrations");

/** The migration names (file names without .ts) in the migrations directory, in order. */
export function migrationNames(dir = MIGRATIONS_DIR): string[] {
  return fs
    .readdirSync(dir)
    .filter((file) => /^\d{14}_\w+\.ts$/.test(file))
    .map((file) => file.replace(/\.ts$/, ""))
    .sort();
}

/** The violations of every migration newer than CUTOFF, as "name: rule: message". */
export function checkMigrations(dir = MIGRATIONS_DIR): string[] {
  return migrationNames(dir)
    .filter((name) => name > CUTOFF)
    .flatMap((name) =>
      checkMigrationSource(fs.readFileSync(path.join(dir, `${name}.ts`), "utf8")).map(
        (v) => `${name}: ${v.rule}: ${v.message}`,
      ),
    );
}
