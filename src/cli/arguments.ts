import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  fromJson,
  getOption,
  ScalarType,
  type DescField,
  type DescMessage,
  type DescMethodUnary,
  type JsonObject,
  type JsonValue,
} from "@bufbuild/protobuf";
import { field as fieldRules, Ignore } from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import { Command, CommanderError, Option } from "commander";
import { docs } from "../../gen/travel/operator/v1/operator_docs.js";
import { OperatorService } from "../../gen/travel/operator/v1/operator_pb.js";

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

type Method = DescMethodUnary<DescMessage, DescMessage>;

/** How an option's text becomes its request field, by the field's type. */
type OptionKind =
  | { readonly kind: "string" }
  | { readonly kind: "boolean" }
  | { readonly kind: "integer" }
  /** An enum: one of its names (the unset zero value excepted). */
  | { readonly kind: "choice"; readonly values: readonly string[] }
  /** A google.protobuf.Timestamp: RFC 3339, or a date (midnight UTC). */
  | { readonly kind: "time" }
  /** A repeated string: the option repeats, or takes a comma-separated list. */
  | { readonly kind: "list" }
  /** A repeated message: a JSON file holding an array of objects. */
  | { readonly kind: "jsonFile" };

/** One option: the request field it fills. */
export interface OptionSpec {
  readonly name: string;
  readonly field: DescField;
  readonly type: OptionKind;
  readonly required: boolean;
  /** The value's placeholder in the help ("ID", "N"). */
  readonly value: string;
  readonly help: string;
}

/** One command: its RPC and its options, all read from the RPC's descriptor. */
export interface CommandSpec {
  readonly name: string;
  readonly method: Method;
  readonly summary: string;
  readonly description: string;
  readonly options: readonly OptionSpec[];
}

/**
 * Where the CLI's public names differ from what the rule below makes of the proto's (kept so
 * scripts written against the CLI keep working). Commands: "<group> <verb>" for an RPC named
 * Verb + Noun(s) (ListApiUsers → "api-user list"), the bare verb for a one-word RPC ("seed").
 */
const COMMAND_NAMES: Readonly<Record<string, string>> = {
  SetTmcApiUserLimit: "tmc set-limit",
  RotateSigningKey: "keys rotate",
  ListSigningKeys: "keys list",
  ListAuditEvents: "audit list",
  GetTokenLockout: "lockout show",
  ResetTokenLockout: "lockout reset",
  ImportAirCredits: "credits import",
  RotateResourceServerSecret: "resource-server rotate",
  SetApiUserKeys: "api-user set-keys",
  SetApiUserDpopPolicy: "api-user set-dpop",
  SetResourceServerKeys: "resource-server set-keys",
};
/** Options: the field name in kebab case ("tmc_id" → --tmc-id), except these (Method.field → option). */
const OPTION_NAMES: Readonly<Record<string, string>> = {
  "ListAuditEvents.actions": "action",
  "ImportAirCredits.credits": "file",
  "CreateResourceServer.audiences": "audience",
};
/**
 * Options required although their field's rules allow it empty: an int32 whose zero is a value
 * (a limit of 0), which protovalidate cannot tell from "absent". Others are required by their
 * rules (a UUID, min_len, email, ip, min_items).
 */
const ALSO_REQUIRED: ReadonlySet<string> = new Set(["SetTmcApiUserLimit.max_api_users"]);
/** The groups' titles in the top-level help (their commands are appended). */
const GROUPS: Readonly<Record<string, string>> = {
  tmc: "TMCs",
  company: "companies",
  user: "user profiles",
  "api-user": "API users",
  audit: "the audit trail",
  keys: "signing keys",
  "trusted-issuer": "trusted identity providers",
  "resource-server": "resource servers (protected services)",
  lockout: "token-endpoint lockouts",
  credits: "air credits",
};

/** Every OperatorService RPC as a command, in the service's order. */
export const COMMANDS: readonly CommandSpec[] = OperatorService.methods.map((rpc) => {
  if (rpc.methodKind !== "unary") throw new Error(`${rpc.name}: the CLI calls unary RPCs only`);
  const method = rpc as Method;
  const description = textOf(docs[`${OperatorService.typeName}.${method.name}`] ?? method.name);
  return {
    name: COMMAND_NAMES[method.name] ?? commandNameOf(method.name),
    method,
    summary: firstSentence(description),
    description,
    options: method.input.fields.map((field) => optionOf(method, field)),
  };
});

/** CreateApiUser → "api-user create", ListTmcs → "tmc list", Seed → "seed". */
function commandNameOf(rpc: string): string {
  const [verb, ...noun] = rpc.split(/(?=[A-Z])/).map((word) => word.toLowerCase());
  return noun.length === 0 ? verb! : `${noun.join("-").replace(/s$/, "")} ${verb!}`;
}

function optionOf(method: Method, field: DescField): OptionSpec {
  const key = `${method.name}.${field.name}`;
  const name = OPTION_NAMES[key] ?? field.name.replace(/_/g, "-");
  const type = kindOf(key, field);
  const rules = getOption(field, fieldRules);
  const stringRules = rules.type.case === "string" ? rules.type.value : undefined;
  const ignoredWhenEmpty = rules.ignore === Ignore.IF_ZERO_VALUE;
  const required =
    ALSO_REQUIRED.has(key) ||
    rules.required ||
    (!ignoredWhenEmpty &&
      stringRules !== undefined &&
      (Number(stringRules.minLen ?? 0) > 0 || ["uuid", "email", "ip"].includes(String(stringRules.wellKnown.case)))) ||
    (rules.type.case === "repeated" && Number(rules.type.value.minItems ?? 0) > 0);
  const isUuid = stringRules?.wellKnown.case === "uuid";
  const value = {
    string: isUuid ? "ID" : name.toUpperCase().replace(/-/g, "_"),
    boolean: "",
    integer: "N",
    choice: name.toUpperCase().replace(/-/g, "_"),
    time: "TIME",
    list: name.toUpperCase().replace(/-/g, "_"),
    jsonFile: "FILE",
  }[type.kind];
  const comment = textOf(docs[`${method.input.typeName}.${field.name}`] ?? "").replace(/\.$/, "");
  const hint = {
    string: "",
    boolean: "",
    integer: "",
    choice: type.kind === "choice" ? `one of ${type.values.join(", ")}` : "",
    time: "RFC 3339, or YYYY-MM-DD",
    list: "repeatable, or comma-separated",
    jsonFile: "a JSON file holding an array of them",
  }[type.kind];
  const help = [comment, hint && `(${hint})`].filter(Boolean).join(" ") || field.name;
  return { name, field, type, required, value, help };
}

function kindOf(key: string, field: DescField): OptionKind {
  switch (field.fieldKind) {
    case "scalar":
      if (field.scalar === ScalarType.BOOL) return { kind: "boolean" };
      if (field.scalar === ScalarType.INT32) return { kind: "integer" };
      if (field.scalar === ScalarType.STRING) return { kind: "string" };
      break;
    case "enum":
      return { kind: "choice", values: field.enum.values.filter((v) => v.number !== 0).map((v) => v.name) };
    case "message":
      if (field.message.typeName === "google.protobuf.Timestamp") return { kind: "time" };
      break;
    case "list":
      if (field.listKind === "scalar" && field.scalar === ScalarType.STRING) return { kind: "list" };
      if (field.listKind === "message") return { kind: "jsonFile" };
      break;
    default:
      break;
  }
  throw new Error(`${key}: the CLI has no option form for this field's type (add one in src/cli/arguments.ts)`);
}

/** A proto comment as help: paragraphs joined, `code` marks dropped. */
function textOf(comment: string): string {
  return comment.replace(/\n\n/g, " ").replace(/`([^`]*)`/g, "$1");
}

function firstSentence(text: string): string {
  const end = /\.(\s|$)/.exec(text);
  return end ? text.slice(0, end.index) : text;
}

const SETTINGS = `
Every command is an OperatorService RPC; it prints one JSON object on stdout (--output table
for people). Settings come from the same environment as the server: ADMIN_URL (or ADMIN_HOST/
ADMIN_PORT when the server has an admin port, else SERVER_URL or HOST/PORT), OPERATOR_TOKEN (or
DATA_DIR/operator-token), DATABASE_URL, DATA_DIR, REDIS_URL, MASTER_KEY. With no server
answering there the command runs in-process on that storage; an empty DATA_DIR is refused
unless --init says to create a new store there. Where it runs is said on stderr. While a server
is still starting on DATA_DIR, the command waits until it listens or exits.
Exit codes: 0 done, 1 failed (errorCode and debugIdentifier on stderr), 2 wrong arguments.`;

export interface ParsedCommand {
  readonly spec: CommandSpec;
  /** The request message as protobuf JSON. */
  readonly request: JsonObject;
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
  for (const spec of COMMANDS) {
    const words = spec.name.split(" ");
    let parent = program;
    if (words.length === 2) {
      const group = words[0]!;
      if (!groups.has(group)) {
        const members = COMMANDS.filter((c) => c.name.startsWith(`${group} `)).map((c) => c.name.split(" ")[1]);
        groups.set(
          group,
          program
            .command(group)
            .description(`${GROUPS[group] ?? group}: ${members.join(", ")}`)
            .helpOption("-h, --help", "show help"),
        );
      }
      parent = groups.get(group)!;
    }
    const command = parent
      .command(words.at(-1)!)
      .summary(spec.summary)
      .description(spec.description)
      .helpOption("-h, --help", "show help");
    for (const o of spec.options) {
      const flags = o.type.kind === "boolean" ? `--${o.name}` : `--${o.name} <${o.value}>`;
      const declared = new Option(flags, `${o.help}${o.required ? " (required)" : ""}`);
      // Checked after parsing with messages naming the option (choices, numbers, lists).
      if (o.type.kind === "list")
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
    command.action((values: Record<string, unknown>) => done(toParsed(spec, values, command.helpInformation())));
  }
  return program;
}

/** The option values as the request's protobuf JSON, checked with messages naming the option. */
function toParsed(spec: CommandSpec, values: Record<string, unknown>, help: string): ParsedCommand {
  const fail = (message: string): never => {
    throw new UsageError(message, help);
  };
  const request: JsonObject = {};
  const valueOf = (option: string) => values[camel(option)];
  for (const o of spec.options) {
    const value = valueOf(o.name);
    if (o.required && (value === undefined || value === "")) fail(`--${o.name} is required for "${spec.name}"`);
  }
  for (const o of spec.options) {
    const value = valueOf(o.name);
    if (value === undefined || value === false) continue;
    request[o.field.jsonName] = requestValueOf(o, value, fail);
  }
  return {
    spec,
    request,
    output: values.output === "table" ? "table" : "json",
    init: values.init === true,
    usage: help,
  };
}

/** One option's value as its request field's protobuf JSON, or a UsageError naming the option. */
function requestValueOf(o: OptionSpec, value: unknown, fail: (message: string) => never): JsonValue {
  switch (o.type.kind) {
    case "jsonFile": {
      const items = readJsonArray(o.name, String(value), fail) as JsonValue[];
      // Each element must decode as the field's message: say which one does not, and why.
      items.forEach((item, index) => {
        try {
          if (o.field.fieldKind === "list" && o.field.listKind === "message") fromJson(o.field.message, item);
        } catch (error) {
          fail(
            `--${o.name}: element ${index} of ${String(value)} is not a ${o.field.message!.name}: ${(error as Error).message}`,
          );
        }
      });
      return items;
    }
    case "list": {
      const items = (value as string[]).flatMap((v) => v.split(",")).map((v) => v.trim());
      if (items.some((v) => v === "")) fail(`--${o.name} must not be empty`);
      return items;
    }
    case "integer":
      if (typeof value !== "string" || !/^\d{1,9}$/.test(value))
        fail(`--${o.name} must be a whole number, got "${String(value)}"`);
      return Number(value);
    case "time":
      return timeOf(o.name, String(value), fail);
    case "choice":
      if (!o.type.values.includes(String(value)))
        fail(`--${o.name} must be one of ${o.type.values.join(", ")}, got "${String(value)}"`);
      return String(value);
    case "boolean":
    case "string":
      return value as string | boolean;
  }
}

/** The option of a request field a validation message names ("client_id" → "--client-id", "actions[2]" → "--action"). */
export function optionOfField(spec: CommandSpec, path: string): string {
  const name = /^[a-z_0-9]+/.exec(path)?.[0];
  const option = spec.options.find((o) => o.field.name === name);
  return `--${option?.name ?? path.replace(/\[\d+\]$/, "").replace(/_/g, "-")}`;
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
