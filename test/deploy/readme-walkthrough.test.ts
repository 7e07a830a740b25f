// The README's "Five minutes with the service" and "Protect your service", run as a reader runs
// them: their ```sh blocks, read from README.md at run time, one after the other in one
// `bash -euo pipefail` (a `$(… | jq -er …)` that finds an error body fails the run), with `curl`,
// `jq`, `npm run -s cli` and `npx tsx` from the repository root, against a server started as
// `npm start` starts it (the embedded default, no secrets given: the server keeps its own in
// DATA_DIR, where the CLI finds it). Only what must differ on a shared machine is substituted: the
// ports (8080, 8090, 50061) and the sample service's log file.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { isPostgres, newStorage, type Storage } from "../helpers/backend.js";
import { freePort } from "../helpers/free-port.js";
import { CHILD_HUNG_MS, childEnv, repoRoot, spawnServer, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";

const SECTIONS = ["Five minutes with the service", "Protect your service"];
/** Printed between blocks so each block's output can be told apart; no README line prints it. */
const MARK = "::readme-block";

const toolMissing = ["jq", "curl"].find((tool) => spawnSync(tool, ["--version"]).status !== 0);
const skip = isPostgres
  ? "the README's walk-through runs on the embedded default (./data); the Postgres backend is not what it describes"
  : toolMissing && `${toolMissing} is not installed (.ci/run installs it)`;

/** The ```sh blocks of a `## ` section of the README, in order. */
function shellBlocks(readme: string, heading: string): string[] {
  const start = readme.indexOf(`\n## ${heading}\n`);
  assert.notEqual(start, -1, `README.md has no "## ${heading}" section`);
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end === -1 ? undefined : end);
  const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((match) => match[1]!);
  assert.ok(blocks.length > 0, `"## ${heading}" has no sh block`);
  return blocks;
}

/** Replaces every `from` (which must occur) with `to`. */
function substitute(script: string, from: string, to: string): string {
  assert.ok(script.includes(from), `the README's commands no longer mention ${from}`);
  return script.split(from).join(to);
}

interface ScriptRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the script in `bash -euo pipefail` in its own process group, which is killed when bash has
 * ended (the sample service it starts in the background, through npx and tsx, with it) or has
 * outlived `timeoutMs`.
 */
function runBash(script: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-euo", "pipefail", "-c", script], {
      cwd: repoRoot,
      env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const killGroup = (signal: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, signal);
      } catch {
        // the group is gone already
      }
    };
    const timer = setTimeout(() => killGroup("SIGKILL"), timeoutMs);
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      killGroup("SIGTERM");
      setTimeout(() => killGroup("SIGKILL"), 5_000).unref();
      resolve({ code, signal, stdout, stderr });
    });
  });
}

describe("the README's walk-through, as printed", { skip }, () => {
  let storage: Storage;
  let server: ServerProcess;
  let run: ScriptRun;
  /** Each block's non-empty output lines, in README order. */
  let outputs: string[][];

  before(async () => {
    storage = newStorage();
    // As `npm start` runs: no MASTER_KEY, OPERATOR_TOKEN or TOKEN_ISSUER, only a port of its own.
    server = await spawnServer({
      HOST: "127.0.0.1",
      PORT: "0",
      LOG_LEVEL: "info",
      SHUTDOWN_TIMEOUT_MS: "500",
      SHUTDOWN_DRAIN_MS: "0",
      ...storage.env,
    });
    const readme = fs.readFileSync(path.join(repoRoot, "README.md"), "utf8");
    const blocks = SECTIONS.flatMap((heading) => shellBlocks(readme, heading));
    // The ERR trap names the command that stopped the run; it changes nothing the blocks do.
    let script = [
      `trap 'echo "stopped by: $BASH_COMMAND" >&2' ERR`,
      ...blocks.map((block) => `echo ${MARK}\n${block}`),
    ].join("\n");
    const [rest, rpc] = [await freePort(), await freePort()];
    script = substitute(script, "localhost:8080", `localhost:${server.port}`);
    script = substitute(script, "localhost:8090", `localhost:${rest}`);
    script = substitute(script, "PORT=8090", `PORT=${rest}`);
    script = substitute(script, "RPC_PORT=50061", `RPC_PORT=${rpc}`);
    script = substitute(script, "sample-service.log", path.join(storage.dataDir, "sample-service.log"));
    assert.doesNotMatch(script, /\b(8080|8090|50061)\b/, "a port the test did not substitute");
    run = await runBash(script, childEnv({ DATA_DIR: storage.dataDir }), CHILD_HUNG_MS);
    outputs = run.stdout
      .split(`${MARK}\n`)
      .slice(1)
      .map((block) => block.split("\n").filter((line) => line.trim() !== ""));
  });
  after(async () => {
    await server?.stop();
    if (storage) await dropStorage(storage);
  });

  const report = () =>
    `bash exited ${run.code ?? run.signal}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}\nsample service:\n${
      fs.existsSync(path.join(storage.dataDir, "sample-service.log"))
        ? fs.readFileSync(path.join(storage.dataDir, "sample-service.log"), "utf8")
        : "(no log)"
    }`;

  it("runs to its end without a failing command", () => {
    assert.equal(run.code, 0, report());
    assert.equal(outputs.length, 3, report());
    // What else the reader's terminal shows: the CLI's "using the server at …", no error of a tool.
    assert.doesNotMatch(run.stderr, /No such file|command not found|jq: error|stopped by/, report());
  });

  it("the five minutes print Ada's profile, a 403, the new secret, 401 after the rotation and 204 for the revocation", () => {
    const [profile, forbidden, rotated, afterRotation, revoked] = outputs[0] ?? [];
    assert.ok(profile && forbidden && rotated, report());
    const ada = JSON.parse(profile) as { personalInfo?: { email?: unknown; name?: { given?: unknown } } };
    assert.equal(ada.personalInfo?.email, "ada@acme.example", profile);
    assert.equal(ada.personalInfo?.name?.given, "Ada", profile);
    const refusal = JSON.parse(forbidden) as { errorMessages?: Array<{ errorCode?: unknown }> };
    assert.equal(refusal.errorMessages?.[0]?.errorCode, "PERMISSION_DENIED", forbidden);
    assert.equal(typeof (JSON.parse(rotated) as { clientSecret?: unknown }).clientSecret, "string", rotated);
    assert.equal(afterRotation, "401", report());
    assert.equal(revoked, "204", report());
    assert.equal(outputs[0]!.length, 5, report());
  });

  it("the resource-server commands list without a secret, rotate, remove, and the platform audit shows them", () => {
    const lines = outputs[1] ?? [];
    const table = lines.slice(
      0,
      lines.findIndex((line) => line.startsWith("totalCount")),
    );
    assert.ok(
      table.some((line) => /Trips API +https:\/\/trips\.example\/api/.test(line)),
      report(),
    );
    assert.equal(table.length, 3, "a heading, a rule and one row");
    const [rotated, removed, audit] = lines.slice(table.length + 1);
    assert.equal(typeof (JSON.parse(rotated!) as { clientSecret?: unknown }).clientSecret, "string", rotated);
    assert.equal(typeof (JSON.parse(removed!) as { clientId?: unknown }).clientId, "string", removed);
    const actions = (JSON.parse(audit!) as { events: Array<{ action: string }> }).events.map((event) => event.action);
    assert.deepEqual(actions, ["RESOURCE_SERVER_REMOVE", "RESOURCE_SERVER_ROTATE", "RESOURCE_SERVER_CREATE"]);
  });

  it("the sample service accepts the live API user's token, then refuses it after the rotation", () => {
    const [accepted, refused] = outputs[2] ?? [];
    assert.ok(accepted, report());
    const claims = JSON.parse(accepted) as { sub?: unknown; client_id?: unknown };
    assert.equal(typeof claims.sub, "string", accepted);
    assert.equal(typeof claims.client_id, "string", accepted);
    assert.equal(refused, "401", report());
    assert.equal(outputs[2]!.length, 2, report());
  });
});
