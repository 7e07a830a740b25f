import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Command, CommanderError, Option } from "commander";

/** Wrong or missing arguments: reported on stderr with exit code 2 (and the command's usage), before anything is written. */
export class UsageError extends Error {
  constructor(
    message: string,
    /** The help of the command the arguments were meant for (the whole CLI's when unknown). */
    readonly usage = "",
  ) {
    super(message);
  }
}

/** `--help` or `--version` was answered on stdout: nothing else to do, exit 0. */
export class Answered extends Error {
  constructor() {
    super("answered");
  }
}

export type OutputFormat = "json" | "table";

interface OptionSpec {
  readonly type: "string" | "boolean";
  /** The value's placeholder in the help ("ID", "N"). */
  readonly value?: string;
  readonly help: string;
}

/** One command: its RPC, the options it accepts, and how they become the request's JSON. */
export interface CommandSpec {
  readonly rpc:
    | "createTmc"
    | "setTmcApiUserLimit"
    | "listTmcs"
    | "getTmc"
    | "createCompany"
    | "createUser"
    | "createApiUser"
    | "listApiUsers"
    | "revokeApiUser"
    | "rotateSigningKey"
    | "listSigningKeys"
    | "listAuditEvents"
    | "addTrustedIssuer"
    | "listTrustedIssuers"
    | "removeTrustedIssuer"
    | "seed"
    | "migrate"
    | "getTokenLockout"
    | "resetTokenLockout"
    | "importAirCredits";
  readonly description: string;
  readonly options: Readonly<Record<string, OptionSpec>>;
  readonly required: readonly string[];
  readonly integers?: readonly string[];
  readonly choices?: Readonly<Record<string, readonly string[]>>;
  /** Options naming a JSON file whose contents (an array) become this request field. */
  readonly jsonFiles?: Readonly<Record<string, string>>;
  /** Repeatable options (also comma-separated) → the request's list field. */
  readonly lists?: Readonly<Record<string, string>>;
  /** Options holding a point in time (RFC 3339, or a date: midnight UTC). */
  readonly times?: readonly string[];
}

const id = (help: string): OptionSpec => ({ type: "string", value: "ID", help });
const text = (value: string, help: string): OptionSpec => ({ type: "string", value, help });
const TMC_ID = id("the TMC (a UUID)");
const LIMIT = text("N", "at most N entries (1-1000, default 100)");
const OFFSET = text("N", "skip the first N entries (default 0)");

export const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  "tmc create": {
    rpc: "createTmc",
    description: "create a TMC (travel management company)",
    options: { name: text("NAME", "its name"), "max-api-users": text("N", "active API users it may hold (default 5)") },
    required: ["name"],
    integers: ["max-api-users"],
  },
  "tmc set-limit": {
    rpc: "setTmcApiUserLimit",
    description: "change how many active API users a TMC may hold",
    options: { "tmc-id": TMC_ID, "max-api-users": text("N", "the new limit (0-100000)") },
    required: ["tmc-id", "max-api-users"],
    integers: ["max-api-users"],
  },
  "tmc list": {
    rpc: "listTmcs",
    description: "list TMCs by name, each with its limit and active API-user count",
    options: { limit: LIMIT, offset: OFFSET },
    required: [],
    integers: ["limit", "offset"],
  },
  "tmc get": {
    rpc: "getTmc",
    description: "show one TMC with its limit and active API-user count",
    options: { "tmc-id": TMC_ID },
    required: ["tmc-id"],
  },
  "company create": {
    rpc: "createCompany",
    description: "create a company (organization) under a TMC",
    options: { "tmc-id": TMC_ID, name: text("NAME", "its name") },
    required: ["tmc-id", "name"],
  },
  "user create": {
    rpc: "createUser",
    description: "create a user profile under a company",
    options: {
      "org-id": id("the company (a UUID)"),
      email: text("E", "the user's email"),
      "given-name": text("G", "given name"),
      "family-name": text("F", "family name"),
      inactive: { type: "boolean", help: "create the profile inactive" },
    },
    required: ["org-id", "email", "given-name", "family-name"],
  },
  "api-user create": {
    rpc: "createApiUser",
    description: "create an API user for a TMC (its credential is shown once)",
    options: {
      "tmc-id": TMC_ID,
      "org-id": id("the company of a COMPANY_ADMIN"),
      role: text("ROLE", "TMC_ADMIN (default) or COMPANY_ADMIN"),
      "credential-type": text("TYPE", "CLIENT_CREDENTIALS (default) or SCIM_TOKEN"),
    },
    required: ["tmc-id"],
    choices: { role: ["TMC_ADMIN", "COMPANY_ADMIN"], "credential-type": ["CLIENT_CREDENTIALS", "SCIM_TOKEN"] },
  },
  "api-user list": {
    rpc: "listApiUsers",
    description: "list a TMC's active API users (role, credential type, created, last token issued)",
    options: { "tmc-id": TMC_ID, limit: LIMIT, offset: OFFSET },
    required: ["tmc-id"],
    integers: ["limit", "offset"],
  },
  "api-user revoke": {
    rpc: "revokeApiUser",
    description: "revoke an API user: its tokens die at once on every instance",
    options: { "tmc-id": TMC_ID, "client-id": id("the API user's client id") },
    required: ["tmc-id", "client-id"],
  },
  "audit list": {
    rpc: "listAuditEvents",
    description: "read a TMC's audit trail, newest first",
    options: {
      "tmc-id": TMC_ID,
      limit: LIMIT,
      action: text("ACTION", "only this action (repeatable, or comma-separated), e.g. TOKEN_ISSUED"),
      "client-id": id("only events whose actor or target is this client"),
      since: text("TIME", "only events at or after TIME (RFC 3339, or YYYY-MM-DD)"),
      until: text("TIME", "only events before TIME"),
      "page-token": text("TOKEN", "the nextPageToken of the previous page"),
    },
    required: ["tmc-id"],
    integers: ["limit"],
    lists: { action: "actions" },
    times: ["since", "until"],
  },
  "keys rotate": {
    rpc: "rotateSigningKey",
    description:
      "publish a new signing key; every instance signs with it after SIGNING_KEY_PREPUBLISH_SECONDS (the current one keeps verifying its tokens)",
    options: {
      now: {
        type: "boolean",
        help: "emergency (compromised key): sign with the new key at once and withdraw every other key at once",
      },
    },
    required: [],
  },
  "keys list": {
    rpc: "listSigningKeys",
    description: "list the published signing keys with their state (NEXT, ACTIVE, RETIRED) and instants",
    options: {},
    required: [],
  },
  "trusted-issuer add": {
    rpc: "addTrustedIssuer",
    description: "trust an identity provider's JWTs for a TMC's token exchange",
    options: {
      "tmc-id": TMC_ID,
      issuer: text("ISS", "the issuer (its tokens' iss)"),
      "jwks-uri": text("URL", "where it publishes its JWKS"),
      jwks: text("JSON", "or its JWKS inline"),
      audience: text("AUD", "the aud its tokens carry for this platform"),
      "company-id": text(
        "UUID",
        "bind it to one company of the TMC (that company's IdP): its tokens name that company's users only",
      ),
    },
    required: ["tmc-id", "issuer"],
  },
  "trusted-issuer list": {
    rpc: "listTrustedIssuers",
    description: "list the issuers a TMC trusts",
    options: { "tmc-id": TMC_ID },
    required: ["tmc-id"],
  },
  "trusted-issuer remove": {
    rpc: "removeTrustedIssuer",
    description: "stop trusting an issuer",
    options: { "tmc-id": TMC_ID, issuer: text("ISS", "the issuer") },
    required: ["tmc-id", "issuer"],
  },
  "lockout show": {
    rpc: "getTokenLockout",
    description:
      "show failed authentications behind a token-endpoint lockout (without --client-id: unknown client ids from the address)",
    options: { address: text("IP", "the source address"), "client-id": id("the client") },
    required: ["address"],
  },
  "lockout reset": {
    rpc: "resetTokenLockout",
    description: "lift a lockout at once on every instance",
    options: { address: text("IP", "the source address"), "client-id": id("the client") },
    required: ["address"],
  },
  "credits import": {
    rpc: "importAirCredits",
    description: "import a company's unused air credits",
    options: {
      "company-id": id("the company (a UUID)"),
      file: text("FILE", "a JSON array of UnusedCreditInfo objects"),
    },
    required: ["company-id", "file"],
    jsonFiles: { file: "credits" },
  },
  seed: {
    rpc: "seed",
    description: "create a demo TMC, company, users, air credits and TMC admin",
    options: {},
    required: [],
  },
  migrate: { rpc: "migrate", description: "apply pending database migrations", options: {}, required: [] },
};

const GROUPS: Readonly<Record<string, string>> = {
  tmc: "TMCs: create, set-limit, list, get",
  company: "companies: create",
  user: "user profiles: create",
  "api-user": "API users: create, list, revoke",
  audit: "the audit trail: list",
  keys: "signing keys: rotate, list",
  "trusted-issuer": "trusted identity providers: add, list, remove",
  lockout: "token-endpoint lockouts: show, reset",
  credits: "air credits: import",
};

const SETTINGS = `
Every command is an OperatorService RPC; it prints one JSON object on stdout (--output table
for people). Settings come from the same environment as the server: ADMIN_URL (or ADMIN_HOST/
ADMIN_PORT when the server has an admin port, else SERVER_URL or HOST/PORT), OPERATOR_TOKEN (or
DATA_DIR/operator-token), DATABASE_URL, DATA_DIR, REDIS_URL, MASTER_KEY. With no server
answering there the command runs in-process on that storage; an empty DATA_DIR is refused
unless --init says to create a new store there. Where it runs is said on stderr. While a server
is still starting on DATA_DIR, the command waits for it (up to CLI_REQUEST_TIMEOUT_MS).
Exit codes: 0 done, 1 failed (errorCode and debugIdentifier on stderr), 2 wrong arguments.`;

export interface ParsedCommand {
  readonly name: string;
  readonly spec: CommandSpec;
  /** The request message as protobuf JSON. */
  readonly request: Record<string, string | number | boolean | unknown[]>;
  readonly output: OutputFormat;
  /** --init: an offline run may create a new store in an empty DATA_DIR. */
  readonly init: boolean;
  /** The command's help, for errors found later (the request's validation). */
  readonly usage: string;
}

/**
 * Parses the command line. Throws `Answered` after printing help or the version on stdout, and
 * `UsageError` for anything wrong (unknown commands and options come with commander's nearest
 * suggestion).
 */
export function parseCommand(
  argv: readonly string[],
  stdout: (text: string) => void = (t) => void process.stdout.write(t),
): ParsedCommand {
  const found: { command?: ParsedCommand } = {};
  const program = buildProgram(stdout, (command) => (found.command = command));
  try {
    program.parse([...argv], { from: "user" });
  } catch (error) {
    if (error instanceof UsageError || error instanceof Answered) throw error;
    if (!(error instanceof CommanderError)) throw error;
    if (error.code === "commander.helpDisplayed" || error.code === "commander.version") throw new Answered();
    const target = commandOf(program, argv);
    if (error.code === "commander.help") {
      // A group (or the CLI) named without its command.
      throw new UsageError(
        target === program
          ? "a command is required first"
          : `"${fullName(target)}" needs a command: ${target.commands
              .map((c) => c.name())
              .filter((n) => n !== "help")
              .join(", ")}`,
        target.helpInformation(),
      );
    }
    // commander quotes with '…'; the messages have always said "…".
    throw new UsageError(error.message.replace(/^error: /, "").replace(/'([^']*)'/g, '"$1"'), target.helpInformation());
  }
  if (!found.command) throw new UsageError("a command is required first", program.helpInformation());
  return found.command;
}

/** The whole CLI's help (what `--help` prints). */
export function usage(): string {
  return buildProgram(
    () => {},
    () => {},
  ).helpInformation();
}

function buildProgram(stdout: (text: string) => void, done: (command: ParsedCommand) => void): Command {
  const program = new Command("cli")
    .usage("<command> [options]   (npm run -s cli -- <command> ...)")
    .description("The operator CLI of the authentication and API-user service.")
    .version(packageVersion(), "-V, --version", "print the version")
    .helpOption("-h, --help", "show help (also after any command)")
    .addHelpText("after", SETTINGS)
    // Set before adding commands: subcommands inherit them.
    .exitOverride()
    .showSuggestionAfterError(true)
    .configureOutput({ writeOut: stdout, writeErr: () => {}, outputError: () => {} });
  const groups = new Map<string, Command>();
  for (const [name, spec] of Object.entries(COMMANDS)) {
    const words = name.split(" ");
    let parent = program;
    if (words.length === 2) {
      const group = words[0]!;
      if (!groups.has(group))
        groups.set(
          group,
          program
            .command(group)
            .description(GROUPS[group] ?? "")
            .helpOption("-h, --help", "show help"),
        );
      parent = groups.get(group)!;
    }
    const command = parent.command(words.at(-1)!).description(spec.description).helpOption("-h, --help", "show help");
    for (const [option, o] of Object.entries(spec.options)) {
      const required = spec.required.includes(option) ? " (required)" : "";
      const flags = o.type === "boolean" ? `--${option}` : `--${option} <${o.value ?? "VALUE"}>`;
      const declared = new Option(flags, `${o.help}${required}`);
      // Checked after parsing with the messages of the table above (choices, numbers, lists).
      if (spec.lists?.[option])
        declared.argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]);
      command.addOption(declared);
    }
    command.addOption(
      new Option("--output <format>", "json (default, for scripts) or table (for people)")
        .choices(["json", "table"])
        .default("json"),
    );
    command.addOption(
      new Option("--init", "with no server answering, create a new store if DATA_DIR holds none (refused otherwise)"),
    );
    command.action((values: OptionValues) => done(toParsed(name, spec, values, command.helpInformation())));
  }
  return program;
}

/** What commander parses an option into: its text, a flag, or a variadic option's texts. */
type OptionValues = Record<string, string | boolean | string[] | undefined>;

/** The option values as the request's protobuf JSON, checked with messages naming the option. */
function toParsed(name: string, spec: CommandSpec, values: OptionValues, help: string): ParsedCommand {
  const fail = (message: string): never => {
    throw new UsageError(message, help);
  };
  const request: Record<string, string | number | boolean | unknown[]> = {};
  const valueOf = (option: string) => values[camel(option)];
  for (const option of spec.required) {
    const value = valueOf(option);
    if (value === undefined || value === "") fail(`--${option} is required for "${name}"`);
  }
  for (const option of Object.keys(spec.options)) {
    const value = valueOf(option);
    if (value === undefined || value === false) continue;
    const field = camel(option);
    if (spec.jsonFiles?.[option]) {
      request[spec.jsonFiles[option]!] = readJsonArray(option, String(value), fail);
    } else if (spec.lists?.[option]) {
      const items = (value as string[]).flatMap((v) => v.split(",")).map((v) => v.trim());
      if (items.some((v) => v === "")) fail(`--${option} must not be empty`);
      request[spec.lists[option]!] = items;
    } else if (spec.integers?.includes(option)) {
      if (typeof value !== "string" || !/^\d{1,9}$/.test(value))
        fail(`--${option} must be a whole number, got "${String(value)}"`);
      request[field] = Number(value);
    } else if (spec.times?.includes(option)) {
      request[field] = timeOf(option, String(value), fail);
    } else if (spec.choices?.[option]) {
      if (!spec.choices[option]!.includes(String(value)))
        fail(`--${option} must be one of ${spec.choices[option]!.join(", ")}, got "${String(value)}"`);
      request[field] = String(value);
    } else {
      request[field] = value as string | boolean;
    }
  }
  return {
    name,
    spec,
    request,
    output: values.output === "table" ? "table" : "json",
    init: values.init === true,
    usage: help,
  };
}

/** The option of a request field a validation message names ("client_id" → "--client-id", "actions[2]" → "--action"). */
export function optionOfField(spec: CommandSpec, field: string): string {
  const json = camel(field.replace(/\[\d+\]$/, "").replace(/_/g, "-"));
  const listOption = Object.entries(spec.lists ?? {}).find(([, f]) => f === json)?.[0];
  const fileOption = Object.entries(spec.jsonFiles ?? {}).find(([, f]) => f === json)?.[0];
  return `--${listOption ?? fileOption ?? field.replace(/\[\d+\]$/, "").replace(/_/g, "-")}`;
}

/** RFC 3339 (with a zone), or a date alone (midnight UTC); anything else is a usage error. */
function timeOf(option: string, value: string, fail: (message: string) => never): string {
  const dateOnly = /^\d{4}-\d{2}-\d{2}$/.test(value);
  const full = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})$/.test(value);
  const time = Date.parse(dateOnly ? `${value}T00:00:00Z` : value);
  if ((!dateOnly && !full) || Number.isNaN(time))
    fail(`--${option} must be an RFC 3339 time (2026-11-22T10:00:00Z) or a date (2026-11-22), got "${value}"`);
  return new Date(time).toISOString();
}

/** A JSON file holding an array of objects; anything else is a usage error. */
function readJsonArray(option: string, file: string, fail: (message: string) => never): unknown[] {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    return fail(`--${option}: cannot read ${file}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return fail(`--${option}: ${file} is not JSON: ${(error as Error).message}`);
  }
  if (!Array.isArray(parsed)) return fail(`--${option}: ${file} must hold a JSON array`);
  const notObject = parsed.findIndex((item) => typeof item !== "object" || item === null || Array.isArray(item));
  if (notObject >= 0) fail(`--${option}: element ${notObject} of ${file} must be a JSON object`);
  return parsed;
}

/** The deepest command the words of argv name (the CLI itself when the first is unknown). */
function commandOf(program: Command, argv: readonly string[]): Command {
  let command = program;
  for (const word of argv) {
    if (word.startsWith("-")) break;
    const next = command.commands.find((c) => c.name() === word);
    if (!next) break;
    command = next;
  }
  return command;
}

function fullName(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

function camel(option: string): string {
  return option.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** The version in the service's package.json (found upwards from this file: src/cli or dist/src/cli). */
function packageVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = path.join(dir, "package.json");
    if (fs.existsSync(candidate)) {
      const pkg = JSON.parse(fs.readFileSync(candidate, "utf8")) as { name?: string; version?: string };
      if (pkg.version && pkg.name) return pkg.version;
    }
    const parent = path.dirname(dir);
    if (parent === dir) return "unknown";
    dir = parent;
  }
}
