import fs from "node:fs";
import { parseArgs } from "node:util";

/** Wrong or missing arguments: reported on stderr with exit code 2, before anything is written. */
export class UsageError extends Error {}

export const USAGE = `Usage: npm run -s cli -- <command> [options]

Commands (each prints one JSON object on stdout):
  tmc create --name NAME [--max-api-users N]
  tmc set-limit --tmc-id ID --max-api-users N
  company create --tmc-id ID --name NAME
  user create --org-id ID --email E --given-name G --family-name F [--inactive]
  api-user create --tmc-id ID [--org-id ID] [--role TMC_ADMIN|COMPANY_ADMIN]
                  [--credential-type CLIENT_CREDENTIALS|SCIM_TOKEN]
  audit list --tmc-id ID [--limit N]
  keys rotate
  trusted-issuer add --tmc-id ID --issuer ISS (--jwks-uri URL | --jwks JSON) [--audience AUD]
  lockout show --address IP [--client-id ID]      (without --client-id: unknown client ids from IP)
  lockout reset --address IP [--client-id ID]
  credits import --company-id ID --file credits.json   (a JSON array of UnusedCreditInfo objects)
  seed
  migrate

Settings come from the same environment as the server: ADMIN_URL (or ADMIN_HOST/ADMIN_PORT
when the server has an admin port, else SERVER_URL or HOST/PORT), OPERATOR_TOKEN (or
DATA_DIR/operator-token), DATABASE_URL, DATA_DIR, REDIS_URL, MASTER_KEY.
With no server answering there the command runs in-process on that storage.`;

type OptionSpec = { type: "string" | "boolean" };

/** One command: its RPC, the options it accepts, and how they become the request's JSON. */
export interface CommandSpec {
  readonly rpc:
    | "createTmc"
    | "setTmcApiUserLimit"
    | "createCompany"
    | "createUser"
    | "createApiUser"
    | "rotateSigningKey"
    | "listAuditEvents"
    | "addTrustedIssuer"
    | "seed"
    | "migrate"
    | "getTokenLockout"
    | "resetTokenLockout"
    | "importAirCredits";
  readonly options: Record<string, OptionSpec>;
  readonly required: readonly string[];
  readonly integers?: readonly string[];
  readonly choices?: Readonly<Record<string, readonly string[]>>;
  /** Options naming a JSON file whose contents (an array) become this request field. */
  readonly jsonFiles?: Readonly<Record<string, string>>;
  /** Option name → request JSON field (defaults to the camelCase of the option). */
  readonly rename?: Readonly<Record<string, string>>;
}

const str: OptionSpec = { type: "string" };

export const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  "tmc create": { rpc: "createTmc", options: { name: str, "max-api-users": str }, required: ["name"], integers: ["max-api-users"] },
  "tmc set-limit": {
    rpc: "setTmcApiUserLimit",
    options: { "tmc-id": str, "max-api-users": str },
    required: ["tmc-id", "max-api-users"],
    integers: ["max-api-users"],
  },
  "company create": { rpc: "createCompany", options: { "tmc-id": str, name: str }, required: ["tmc-id", "name"] },
  "user create": {
    rpc: "createUser",
    options: { "org-id": str, email: str, "given-name": str, "family-name": str, inactive: { type: "boolean" } },
    required: ["org-id", "email", "given-name", "family-name"],
  },
  "api-user create": {
    rpc: "createApiUser",
    options: { "tmc-id": str, "org-id": str, role: str, "credential-type": str },
    required: ["tmc-id"],
    choices: { role: ["TMC_ADMIN", "COMPANY_ADMIN"], "credential-type": ["CLIENT_CREDENTIALS", "SCIM_TOKEN"] },
  },
  "audit list": { rpc: "listAuditEvents", options: { "tmc-id": str, limit: str }, required: ["tmc-id"], integers: ["limit"] },
  "keys rotate": { rpc: "rotateSigningKey", options: {}, required: [] },
  "trusted-issuer add": {
    rpc: "addTrustedIssuer",
    options: { "tmc-id": str, issuer: str, "jwks-uri": str, jwks: str, audience: str },
    required: ["tmc-id", "issuer"],
  },
  "lockout show": { rpc: "getTokenLockout", options: { address: str, "client-id": str }, required: ["address"] },
  "lockout reset": { rpc: "resetTokenLockout", options: { address: str, "client-id": str }, required: ["address"] },
  "credits import": { rpc: "importAirCredits", options: { "company-id": str, file: str }, required: ["company-id", "file"], jsonFiles: { file: "credits" } },
  seed: { rpc: "seed", options: {}, required: [] },
  migrate: { rpc: "migrate", options: {}, required: [] },
};

export interface ParsedCommand {
  readonly name: string;
  readonly spec: CommandSpec;
  /** The request message as protobuf JSON. */
  readonly request: Record<string, string | number | boolean | unknown[]>;
}

export function parseCommand(argv: readonly string[]): ParsedCommand {
  // The command's words come first ("tmc create"), then its options.
  const words = argv.slice(0, 2).filter((a, i) => !a.startsWith("-") && (i === 0 || !argv[0]!.startsWith("-")));
  const name = [words.join(" "), words[0] ?? ""].find((candidate) => candidate in COMMANDS);
  if (!name) {
    throw new UsageError(argv.length === 0 || argv[0]!.startsWith("-") ? "a command is required first" : `unknown command "${words.join(" ")}"`);
  }
  const spec = COMMANDS[name]!;
  const rest = argv.slice(name.split(" ").length);

  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: rest, options: spec.options, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const request: Record<string, string | number | boolean | unknown[]> = {};
  for (const option of spec.required) {
    if (values[option] === undefined || values[option] === "") throw new UsageError(`--${option} is required for "${name}"`);
  }
  for (const [option, value] of Object.entries(values)) {
    if (value === undefined) continue;
    const field = spec.rename?.[option] ?? option.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    if (spec.jsonFiles?.[option]) {
      request[spec.jsonFiles[option]!] = readJsonArray(option, String(value));
    } else if (spec.integers?.includes(option)) {
      if (typeof value !== "string" || !/^\d{1,9}$/.test(value)) throw new UsageError(`--${option} must be a whole number, got "${String(value)}"`);
      request[field] = Number(value);
    } else if (spec.choices?.[option]) {
      if (!spec.choices[option]!.includes(String(value))) {
        throw new UsageError(`--${option} must be one of ${spec.choices[option]!.join(", ")}, got "${String(value)}"`);
      }
      request[field] = value;
    } else {
      request[field] = value;
    }
  }
  return { name, spec, request };
}

/** A JSON file holding an array; anything else is a usage error. */
function readJsonArray(option: string, file: string): unknown[] {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    throw new UsageError(`--${option}: cannot read ${file}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`--${option}: ${file} is not JSON: ${(error as Error).message}`);
  }
  if (!Array.isArray(parsed)) throw new UsageError(`--${option}: ${file} must hold a JSON array`);
  const notObject = parsed.findIndex((item) => typeof item !== "object" || item === null || Array.isArray(item));
  if (notObject >= 0) throw new UsageError(`--${option}: element ${notObject} of ${file} must be a JSON object`);
  return parsed;
}
