// The README's "Five minutes with the service" and "Protect your service", run as a reader runs
// them: their ```sh blocks, read from README.md at run time, one after the other in one
// `bash -euo pipefail` (a `$(… | jq -er …)` that finds an error body fails the run), with `curl`,
// `jq`, `npm run -s cli` and `npx tsx` from the repository root, against a running server: a process
// (test/deploy/readme-walkthrough.test.ts) or a container (test/container/). Only what must differ
// on a shared machine is substituted: the ports (8080, 8090, 50061) and the sample service's log file.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { it } from "node:test";
import { freePort } from "./free-port.js";
import { CHILD_HUNG_MS, repoRoot } from "./server-process.js";

/** A `## ` section of a documentation page whose sh blocks are run. */
export interface DocSection {
  readonly file: string;
  readonly heading: string;
}

export const FIVE_MINUTES: DocSection = { file: "README.md", heading: "Five minutes with the service" };
export const PROTECT_YOUR_SERVICE: DocSection = { file: "README.md", heading: "Protect your service" };
/** docs/tokens.md's walk-through of private_key_jwt and DPoP; it continues FIVE_MINUTES. */
export const KEYS_AND_DPOP: DocSection = {
  file: "docs/tokens.md",
  heading: "Walk-through: a key instead of a secret, and a DPoP-bound token",
};
/** Printed between blocks so each block's output can be told apart; no README line prints it. */
const MARK = "::readme-block";

/** Why the walk-through cannot run here (a tool it uses is missing), or undefined. */
export const walkthroughToolMissing = ["jq", "curl"]
  .filter((tool) => spawnSync(tool, ["--version"]).status !== 0)
  .map((tool) => `${tool} is not installed (.ci/run installs it)`)[0];

/** The ```sh blocks of a `## ` section, in order. */
function shellBlocks({ file, heading }: DocSection): string[] {
  const page = fs.readFileSync(path.join(repoRoot, file), "utf8");
  const start = page.indexOf(`\n## ${heading}\n`);
  assert.notEqual(start, -1, `${file} has no "## ${heading}" section`);
  const end = page.indexOf("\n## ", start + 1);
  const section = page.slice(start, end === -1 ? undefined : end);
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

/** One run of README sections: bash's outcome and each block's non-empty output lines, in README order. */
export interface Walkthrough {
  readonly run: ScriptRun;
  readonly outputs: string[][];
  /** Everything a failure message needs: bash's status and output, the sample service's log. */
  readonly report: () => string;
}

/**
 * Runs the sh blocks of `sections` (the README's two, FIVE_MINUTES alone, or FIVE_MINUTES and a
 * page's walk-through that continues it) against the server on localhost:`port`, in `env` (what
 * tells the CLI where the server is: its DATA_DIR, or SERVER_URL and OPERATOR_TOKEN); the sample
 * service's log and the walk-through's files go into `workDir`.
 */
export async function runReadmeWalkthrough(
  port: number,
  workDir: string,
  env: NodeJS.ProcessEnv,
  sections: readonly DocSection[] = [FIVE_MINUTES, PROTECT_YOUR_SERVICE],
): Promise<Walkthrough> {
  const blocks = sections.flatMap(shellBlocks);
  // The ERR trap names the command that stopped the run; it changes nothing the blocks do.
  let script = [
    `trap 'echo "stopped by: $BASH_COMMAND" >&2' ERR`,
    ...blocks.map((block) => `echo ${MARK}\n${block}`),
  ].join("\n");
  const sampleLog = path.join(workDir, "sample-service.log");
  script = substitute(script, "localhost:8080", `localhost:${port}`);
  if (sections.includes(PROTECT_YOUR_SERVICE)) {
    const [rest, rpc] = [await freePort(), await freePort()];
    script = substitute(script, "localhost:8090", `localhost:${rest}`);
    script = substitute(script, "PORT=8090", `PORT=${rest}`);
    script = substitute(script, "RPC_PORT=50061", `RPC_PORT=${rpc}`);
    script = substitute(script, "sample-service.log", sampleLog);
  }
  if (sections.includes(KEYS_AND_DPOP)) {
    script = substitute(script, "client-key.pem", path.join(workDir, "client-key.pem"));
    script = substitute(script, "jwks.json", path.join(workDir, "jwks.json"));
  }
  assert.doesNotMatch(script, /\b(8080|8090|50061)\b/, "a port the test did not substitute");
  const run = await runBash(script, env, CHILD_HUNG_MS);
  const outputs = run.stdout
    .split(`${MARK}\n`)
    .slice(1)
    .map((block) => block.split("\n").filter((line) => line.trim() !== ""));
  const report = () =>
    `bash exited ${run.code ?? run.signal}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}\nsample service:\n${
      fs.existsSync(sampleLog) ? fs.readFileSync(sampleLog, "utf8") : "(no log)"
    }`;
  return { run, outputs, report };
}

/** bash ran every block (`blockCount` of them) to its end, and no tool complained. */
export function assertRanToEnd(walkthrough: Walkthrough, blockCount: number): void {
  const { run, outputs, report } = walkthrough;
  assert.equal(run.code, 0, report());
  assert.equal(outputs.length, blockCount, report());
  // What else the reader's terminal shows: the CLI's "using the server at …", no error of a tool.
  assert.doesNotMatch(run.stderr, /No such file|command not found|jq: error|stopped by/, report());
}

/** The five minutes' block printed Ada's profile, a 403, the new secret, 401 after the rotation and 204 for the revocation. */
export function assertFiveMinutes({ outputs, report }: Walkthrough): void {
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
}

/** The resource-server commands listed without a secret, rotated, removed, and the platform audit showed them. */
export function assertResourceServers({ outputs }: Walkthrough): void {
  const lines = outputs[1] ?? [];
  const table = lines.slice(
    0,
    lines.findIndex((line) => line.startsWith("totalCount")),
  );
  assert.ok(
    table.some((line) => /Trips API +https:\/\/trips\.example\/api/.test(line)),
    lines.join("\n"),
  );
  assert.equal(table.length, 3, "a heading, a rule and one row");
  const [rotated, removed, audit] = lines.slice(table.length + 1);
  assert.equal(typeof (JSON.parse(rotated!) as { clientSecret?: unknown }).clientSecret, "string", rotated);
  assert.equal(typeof (JSON.parse(removed!) as { clientId?: unknown }).clientId, "string", removed);
  const actions = (JSON.parse(audit!) as { events: Array<{ action: string }> }).events.map((event) => event.action);
  assert.deepEqual(actions, ["RESOURCE_SERVER_REMOVE", "RESOURCE_SERVER_ROTATE", "RESOURCE_SERVER_CREATE"]);
}

/** "Protect your service": the sample service accepted the live API user's token, then refused it after the rotation. */
export function assertProtectYourService({ outputs, report }: Walkthrough): void {
  const [accepted, refused] = outputs[2] ?? [];
  assert.ok(accepted, report());
  const claims = JSON.parse(accepted) as { sub?: unknown; client_id?: unknown };
  assert.equal(typeof claims.sub, "string", accepted);
  assert.equal(typeof claims.client_id, "string", accepted);
  assert.equal(refused, "401", report());
  assert.equal(outputs[2]!.length, 2, report());
}

/**
 * docs/tokens.md's walk-through (the last block, after the five minutes' two): keys registered, the secret
 * refused, a bearer then a DPoP-bound token read Ada's profile, and after the CLI replaced the set
 * a new token still does.
 */
export function assertKeysAndDpop({ outputs, report }: Walkthrough): void {
  const lines = outputs.at(-1) ?? [];
  assert.equal(lines.length, 13, report());
  const [registered, secretRefused, bearer, read, dpop, boundRead, replaced, bearerAgain, readAgain] = lines;
  const [policy, unboundRefused, dpopRequired, requiredRead] = lines.slice(9);
  assert.deepEqual((JSON.parse(registered!) as { keyIds?: unknown }).keyIds, ["2026-11"], registered);
  assert.equal(secretRefused, "403", report());
  assert.deepEqual([bearer, dpop, bearerAgain], ["bearer", "dpop", "bearer"], report());
  assert.deepEqual(
    [policy, unboundRefused, dpopRequired],
    ['{"dpopBoundAccessTokens":true}', "DPoP proof is missing", "dpop"],
    report(),
  );
  for (const answer of [read, boundRead, readAgain, requiredRead]) {
    const [status, body] = [answer!.slice(0, 4), answer!.slice(4)];
    assert.equal(status, "200 ", answer);
    assert.equal((JSON.parse(body) as { personalInfo?: { email?: unknown } }).personalInfo?.email, "ada@acme.example");
  }
  assert.deepEqual((JSON.parse(replaced!) as { keyIds?: unknown }).keyIds, ["2026-11"], replaced);
}

/** The checks of a run of both sections, as tests of the enclosing suite (`walkthrough()`: the run its `before` made). */
export function itPassesBothSections(walkthrough: () => Walkthrough): void {
  it("runs to its end without a failing command", () => assertRanToEnd(walkthrough(), 3));

  it("the five minutes print Ada's profile, a 403, the new secret, 401 after the rotation and 204 for the revocation", () =>
    assertFiveMinutes(walkthrough()));

  it("the resource-server commands list without a secret, rotate, remove, and the platform audit shows them", () =>
    assertResourceServers(walkthrough()));

  it("the sample service accepts the live API user's token, then refuses it after the rotation", () =>
    assertProtectYourService(walkthrough()));
}
