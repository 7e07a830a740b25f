import crypto from "node:crypto";
import fs from "node:fs";
import {
  fromJson,
  toJson,
  type DescMessage,
  type DescMethodUnary,
  type JsonObject,
  type Message,
} from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ErrorResponseSchema } from "../../gen/travel/common/v1/error_pb.js";
import type { Service } from "../app/compose.js";
import { ConfigError, loadConfig, type Config } from "../config/config.js";
import { operatorTokenFile } from "../config/secret-files.js";
import { readServerRecord, serverRecordFile, type ServerRecord } from "../store/server-record.js";
import { withRestDefaults } from "../gateway/json-shape.js";
import { DataDirBusyError, dataDirOwner } from "../store/data-dir-lock.js";
import { contractValidator } from "../rpc/contract-validator.js";
import { requestInfoKey } from "../rpc/request-context.js";
import { Answered, optionOfField, parseCommand, usage, UsageError, type OutputFormat } from "./arguments.js";
import { renderTable } from "./table.js";

/**
 * The operator CLI. Every command is an OperatorService RPC: sent to the running server at
 * ADMIN_URL (its admin listener when ADMIN_PORT is set, else SERVER_URL; the only safe way while
 * a server owns an embedded DATA_DIR), or, when no server answers, run in-process on the same
 * storage through the same interceptors.
 */
async function run(argv: readonly string[]): Promise<number> {
  let invocation: Invocation;
  try {
    invocation = parseInvocation(argv);
  } catch (error) {
    if (error instanceof Answered) return 0;
    if (error instanceof UsageError || error instanceof ConfigError) {
      process.stderr.write(
        `error: ${error.message}\n\n${error instanceof UsageError && error.usage ? error.usage : usage()}\n`,
      );
      return 2;
    }
    throw error;
  }
  const { config, method, output } = invocation;
  const offline: { service?: Service } = {};
  let serverUrl = config.adminUrl;
  try {
    const target = await operatorTargetOf(config, process.env);
    serverUrl = target.url;
    const response = await callServerOrInProcess(invocation, target, offline);
    // A table shows every column, empty ones as "-"; JSON keeps the REST shape (empty strings left out).
    process.stdout.write(
      output === "table"
        ? renderTable(toJson(method.output, response, { alwaysEmitImplicit: true }) as JsonObject)
        : JSON.stringify(withRestDefaults(method.output, toJson(method.output, response) as JsonObject)) + "\n",
    );
    return 0;
  } catch (error) {
    return reportFailure(error, serverUrl);
  } finally {
    await offline.service?.close();
  }
}

/** A command line understood: the settings, the RPC and its checked request, how to print the answer. */
interface Invocation {
  readonly config: Config;
  readonly method: DescMethodUnary<DescMessage, DescMessage>;
  readonly request: Message;
  readonly output: OutputFormat;
  readonly init: boolean;
}

/** The arguments and settings, checked before anything is sent or written (UsageError, ConfigError: exit 2). */
function parseInvocation(argv: readonly string[]): Invocation {
  const command = parseCommand(argv);
  const config = loadConfig();
  const method = command.spec.method;
  const request = fromJson(method.input, command.request);
  // Checked here too, so wrong arguments fail with exit 2 before anything is sent or written.
  const result = contractValidator([method.parent.file]).validate(method.input, request);
  if (result.kind !== "valid") {
    // Name the option the user typed: "tmc_id: must be a valid UUID" → "--tmc-id: must be a valid UUID".
    throw new UsageError(
      result.error.message.replace(
        /^([a-z_]+(\[\d+\])?):/,
        (_, field: string) => `${optionOfField(command.spec, field)}:`,
      ),
      command.usage,
    );
  }
  return { config, method, request, output: command.output, init: command.init };
}

/**
 * The RPC sent to the server at `target`; when none answers there, run in-process on the same
 * storage (the service it starts is left in `offline` for the caller to close).
 */
async function callServerOrInProcess(
  invocation: Invocation,
  target: { url: string; source: string },
  offline: { service?: Service },
  waited = false,
): Promise<Message> {
  const { config, method, request, init } = invocation;
  try {
    say(`using the server at ${target.url} (${target.source})`);
    return await call(
      createConnectTransport({ baseUrl: target.url, httpVersion: "1.1" }),
      operatorToken(config),
      method,
      request,
      config.cliRequestTimeoutMs,
    );
  } catch (error) {
    if (!isUnreachable(error)) throw error;
  }
  // The service (and its database drivers) loads only here: a command the server answers needs
  // none of it, and loading it took most of such a command's time (about 1 s of 1.3 s).
  const [{ createService }, { embeddedDatabaseExists }] = await Promise.all([
    import("../app/compose.js"),
    import("../store/postgres/database.js"),
  ]);
  const { databaseUrl, dataDir, databaseSchema } = config.storage;
  if (!databaseUrl && !init && !embeddedDatabaseExists(dataDir)) {
    // A server started at the same moment (`npm start` in another terminal, a fresh clone) claims
    // DATA_DIR within its first second: go through it once it has announced itself.
    if (!waited && (await ownerAppears(dataDir)))
      return callServerOrInProcess(invocation, await operatorTargetOf(config, process.env), offline, true);
    throw new NoStoreError(target.url, dataDir);
  }
  say(
    `no server answers at ${target.url}; running in-process on ` +
      (databaseUrl
        ? `DATABASE_URL ${withoutCredentials(databaseUrl)} (schema ${databaseSchema})`
        : `DATA_DIR ${dataDir} (embedded database${embeddedDatabaseExists(dataDir) ? "" : ", created now: --init"})`),
  );
  offline.service = await createService(config, {
    logStream: process.stderr,
    migrateOnly: method.name === "Migrate",
  });
  return call(offline.service.transport, operatorToken(config), method, request, config.cliRequestTimeoutMs);
}

/** The CLI's own notes on stderr (stdout carries only the answer): where it runs. */
function say(text: string): void {
  process.stderr.write(`cli: ${text}\n`);
}

/** An offline run found no store where it would write, and was not told to create one. */
class NoStoreError extends Error {
  constructor(serverUrl: string, dataDir: string) {
    super(
      `no server answers at ${serverUrl} and DATA_DIR ${dataDir} holds no store; a new one here would not be the ` +
        "running server's (its credentials would be refused there). Run with the server's DATA_DIR, or SERVER_URL/ADMIN_URL " +
        "naming it; or pass --init to create a new store in this DATA_DIR",
    );
  }
}

/** How long a CLI that found no store watches DATA_DIR for a server claiming it (one started at the same moment). */
const SERVER_CLAIM_GRACE_MS = 3_000;

/** Whether a process claims DATA_DIR within the grace period (a server starting); false when none does. */
async function ownerAppears(dataDir: string): Promise<boolean> {
  const deadline = Date.now() + SERVER_CLAIM_GRACE_MS;
  while (dataDirOwner(dataDir) === undefined) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return true;
}

/** How often the CLI says it is still waiting for a server that is starting on its DATA_DIR. */
const SERVER_WAIT_PROGRESS_MS = 15_000;

/**
 * Where OperatorService is, and why there: ADMIN_URL, SERVER_URL or ADMIN_PORT when set; else the
 * address a server running on this DATA_DIR recorded (its admin listener if it has one); else the
 * default. A process holding DATA_DIR that has recorded no address yet is a server still starting
 * (migrations run before it listens): the CLI waits for its record rather than colliding with it.
 */
async function operatorTargetOf(config: Config, env: NodeJS.ProcessEnv): Promise<{ url: string; source: string }> {
  const named = ["ADMIN_URL", "SERVER_URL", "ADMIN_PORT"].find((name) => env[name]?.trim());
  if (named) return { url: config.adminUrl, source: named };
  const { dataDir } = config.storage;
  const recorded = (record: ServerRecord) => ({
    url: record.adminUrl ?? record.url,
    source: `recorded by server process ${record.pid} in ${serverRecordFile(dataDir)}`,
  });
  const running = readServerRecord(dataDir);
  if (running) return recorded(running);
  const owner = config.storage.databaseUrl ? undefined : dataDirOwner(dataDir);
  if (owner === undefined) return { url: config.adminUrl, source: "the default: HOST and PORT" };
  // No deadline of its own: the owner is a server still starting, which bounds its own start (database
  // retries, then exit non-zero), or another CLI run, which ends; a fixed wait failed on a busy machine
  // where an embedded start takes over a minute. Either way the wait ends when the owner does.
  say(`DATA_DIR ${dataDir} is held by process ${owner}, which has not announced a server yet; waiting for it`);
  const started = Date.now();
  let nextProgress = started + SERVER_WAIT_PROGRESS_MS;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const announced = readServerRecord(dataDir);
    if (announced) return recorded(announced);
    if (dataDirOwner(dataDir) === undefined) return { url: config.adminUrl, source: "the default: HOST and PORT" };
    if (Date.now() >= nextProgress) {
      say(`still waiting for process ${owner} (${Math.round((Date.now() - started) / 1000)} s)`);
      nextProgress += SERVER_WAIT_PROGRESS_MS;
    }
  }
}

/** A database URL fit for a message: no user, no password, no query. */
function withoutCredentials(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    return `${url.protocol}//${url.host}${url.pathname}`;
  } catch {
    return "(unparsable)";
  }
}

async function call(
  transport: Transport,
  token: string | undefined,
  method: DescMethodUnary<DescMessage, DescMessage>,
  request: Message,
  timeoutMs: number,
) {
  const headers = new Headers();
  if (token) headers.set("authorization", `Bearer ${token}`);
  // In-process calls get a request id of their own, as a network request would.
  const info = { requestId: crypto.randomUUID(), remoteAddress: "cli", protocol: "cli" as const };
  const response = await transport.unary(
    method,
    undefined,
    timeoutMs,
    headers,
    request,
    createContextValues().set(requestInfoKey, info),
  );
  return response.message;
}

function operatorToken(config: Config): string | undefined {
  if (config.secrets.operatorToken) return config.secrets.operatorToken.value;
  try {
    return fs.readFileSync(operatorTokenFile(config.storage.dataDir), "utf8").trim();
  } catch {
    return undefined;
  }
}

function isUnreachable(error: unknown): boolean {
  if (!(error instanceof ConnectError) || error.code !== Code.Unavailable) return false;
  const text = `${error.message} ${String((error.cause as { code?: string } | undefined)?.code ?? "")}`;
  return /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH/.test(text);
}

function reportFailure(error: unknown, serverUrl: string): number {
  if (error instanceof ConfigError) {
    process.stderr.write(`error: ${error.message}\n`);
    return 2;
  }
  if (error instanceof NoStoreError) {
    process.stderr.write(`error: ${error.message}\n`);
    return 1;
  }
  if (error instanceof DataDirBusyError) {
    process.stderr.write(`error: ${error.message}; is the server running at another ADMIN_URL (or SERVER_URL)?\n`);
    return 1;
  }
  if (error instanceof ConnectError) {
    const body = error.findDetails(ErrorResponseSchema)[0];
    const first = body?.errorMessages[0];
    if ((!body && error.code === Code.Unimplemented) || first?.errorCode === "ROUTE_NOT_FOUND") {
      // A listener without OperatorService: the public port of a server that has an admin port.
      process.stderr.write(
        `error: ${serverUrl} does not serve OperatorService (${first?.errorCode ?? Code[error.code]}); ` +
          "if the server has an admin port (ADMIN_PORT), set ADMIN_URL or ADMIN_PORT to reach it\n",
      );
      return 1;
    }
    const parameters = first?.errorParameters.map((p) => `${p.name}=${p.value}`).join(", ");
    process.stderr.write(
      `error: ${first?.message ?? error.rawMessage} (${first?.errorCode ?? Code[error.code]}${parameters ? `; ${parameters}` : ""})` +
        (body?.debugIdentifier ? ` [debugIdentifier ${body.debugIdentifier}]` : "") +
        "\n",
    );
    // Arguments the server found invalid are usage errors too.
    return error.code === Code.InvalidArgument ? 2 : 1;
  }
  process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
  return 1;
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
