import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { loadavg } from "node:os";
import { after, before, describe, test } from "node:test";
import { accessToken } from "../helpers/api.js";
import { backend, newStorage, serviceEnv } from "../helpers/backend.js";
import type { RapidResetOptions, RapidResetReport } from "../helpers/rapid-reset.js";
import { repoRoot, spawnServer, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";
import { grpcClients, newTenant, ROOMY_RATE_LIMITS, type GrpcClients } from "../helpers/token-kit.js";

/**
 * HTTP/2 rapid reset (CVE-2023-44487) from one unauthenticated h2c
 * connection made an instance unresponsive for everyone on it, HTTP/1.1 clients included. On the
 * server of commit 8b0dbf5 this test fails: with a 5 s attack the victims' reads took up to 15 s
 * and got 500, 503 and 504 (gRPC DEADLINE_EXCEEDED). Victims read over REST (HTTP/1.1, fetch) and
 * gRPC (grpc-js, HTTP/2) from 127.0.0.1; the attacker connects from 127.0.0.2, so the per-address
 * limits tell it apart as they would tell apart two machines.
 *
 *   RAPID_RESET_MS=N  how long the attacker runs (default 3000 in npm test; scripts/fuzz.sh: 10000)
 *   RAPID_RESET_PATH  what each attacking stream asks for (default /readyz: the costliest unauthenticated GET)
 */
const ATTACK_MS = Number(process.env.RAPID_RESET_MS ?? 3_000);
/** The attacker's address: the victims connect from 127.0.0.1, as any other client would from its own. */
const ATTACKER_ADDRESS = "127.0.0.2";
/** Sixteen attacking addresses at once (127.0.0.10–25), as in the run that found it: each alone stays within its own budget for a while. */
const ATTACKER_ADDRESSES = Array.from({ length: 16 }, (_, i) => `127.0.0.${10 + i}`);
const VICTIM_LOOPS = 2;
const P99_BOUND_MS = 1_000;
interface Sample {
  readonly face: "rest" | "grpc";
  readonly ms: number;
  readonly ok: boolean;
  readonly detail?: string;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function summary(samples: readonly Sample[]) {
  const sorted = samples.map((s) => s.ms).sort((a, b) => a - b);
  return {
    count: samples.length,
    errors: samples.filter((s) => !s.ok).length,
    p50: Math.round(percentile(sorted, 50)),
    p99: Math.round(percentile(sorted, 99)),
    max: Math.round(sorted.at(-1) ?? NaN),
  };
}

/**
 * Runs the attacker (test/helpers/rapid-reset.ts) in a process of its own: `attacking` resolves
 * when its frames start to flow, `report` with what it sent.
 */
function runAttacker(options: RapidResetOptions): { attacking: Promise<void>; report: Promise<RapidResetReport> } {
  const child = spawn(process.execPath, ["--import", "tsx", "test/helpers/rapid-reset.ts", JSON.stringify(options)], {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  let started: () => void;
  const attacking = new Promise<void>((resolve) => (started = resolve));
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    err += chunk;
    if (err.includes("attacking\n")) started();
  });
  const report = new Promise<RapidResetReport>((resolve, reject) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), options.durationMs + 30_000);
    child.once("close", (code) => {
      clearTimeout(timer);
      started();
      try {
        if (code !== 0) throw new Error(`exit ${code}`);
        resolve(JSON.parse(out.trim().split("\n").at(-1)!) as RapidResetReport);
      } catch (error) {
        reject(new Error(`the attacker failed (${(error as Error).message}):\n${out}\n${err}`));
      }
    });
  });
  return { attacking, report };
}

/**
 * Victims: `loops` REST reads over HTTP/1.1 and `loops` gRPC reads over one grpc-js channel,
 * each loop one request at a time with a short pause, until `until` resolves.
 */
async function readAsVictims(
  baseUrl: string,
  token: string,
  grpc: GrpcClients,
  loops: number,
  until: Promise<unknown>,
): Promise<Sample[]> {
  const samples: Sample[] = [];
  let running = true;
  void until.finally(() => (running = false));
  const restLoop = async () => {
    while (running) {
      const started = performance.now();
      try {
        const response = await fetch(`${baseUrl}/v2/api-users?limit=10`, {
          headers: { authorization: `Bearer ${token}` },
          signal: AbortSignal.timeout(15_000),
        });
        await response.arrayBuffer();
        samples.push({
          face: "rest",
          ms: performance.now() - started,
          ok: response.status === 200,
          detail: `HTTP ${response.status}`,
        });
      } catch (error) {
        samples.push({ face: "rest", ms: performance.now() - started, ok: false, detail: String(error) });
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const grpcLoop = async () => {
    while (running) {
      const started = performance.now();
      const outcome = await grpc.call("apiUser", "getApiUsers", { limit: 10 }, token);
      samples.push({
        face: "grpc",
        ms: performance.now() - started,
        ok: outcome.ok,
        detail: outcome.ok ? "OK" : `gRPC ${outcome.code}`,
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  await Promise.all([...Array.from({ length: loops }, restLoop), ...Array.from({ length: loops }, grpcLoop)]);
  return samples;
}

/** How many sessions the instance's own reset budget ended (its warn lines). */
function instanceRefusals(server: ServerProcess): number {
  return server.logLines().filter((line) => line.reason === "instance reset budget spent").length;
}

/** One service instance with an API user whose reads the victims make. */
interface Instance {
  readonly server: ServerProcess;
  readonly storage: ReturnType<typeof newStorage>;
  readonly token: string;
  readonly grpc: GrpcClients;
}

async function startInstance(): Promise<Instance> {
  const storage = newStorage();
  // A generous start: the embedded database starts slowly on a loaded machine.
  const server = await spawnServer(serviceEnv(storage, { ...ROOMY_RATE_LIMITS }));
  const tenant = await newTenant(server.address);
  const token = await accessToken(server.address, tenant.admin.clientId, tenant.admin.clientSecret);
  return { server, storage, token, grpc: grpcClients(server.address) };
}

async function stopInstance(instance: Instance | undefined): Promise<void> {
  if (!instance) return;
  instance.grpc.close();
  await instance.server.stop();
  await dropStorage(instance.storage);
}

/**
 * As in the issue's own run: one instance is attacked, another (the control) is not, and the same
 * victims read from both at the same time. The control's figures say what this machine allows
 * now (the suite shares 2 cores with other work); the attacked instance must stay within 1 s
 * p99 with no errors, and the attacker must be told GOAWAY ENHANCE_YOUR_CALM. Only when the
 * control itself is over 1 s (the machine, not the attack, is slow) is twice its p99 allowed.
 */
describe(`HTTP/2 abuse from one client leaves the others served (${backend}, attack ${ATTACK_MS} ms)`, () => {
  let attacked: Instance;
  let control: Instance;

  before(async () => {
    attacked = await startInstance();
    control = await startInstance();
  });
  after(async () => {
    await Promise.all([stopInstance(attacked), stopInstance(control)]);
  });

  for (const mode of ["client", "raw"] as const) {
    test(`rapid reset (${mode} frames) on one connection: other clients' REST and gRPC reads on that instance keep p99 < 1 s with no errors`, async () => {
      const server = attacked.server;
      const attacker = runAttacker({
        url: server.address,
        durationMs: ATTACK_MS,
        mode,
        path: process.env.RAPID_RESET_PATH ?? "/readyz",
        localAddress: ATTACKER_ADDRESS,
      });
      await attacker.attacking;
      const [samples, controlSamples] = await Promise.all([
        readAsVictims(server.address, attacked.token, attacked.grpc, VICTIM_LOOPS, attacker.report),
        readAsVictims(control.server.address, control.token, control.grpc, VICTIM_LOOPS, attacker.report),
      ]);
      const report = await attacker.report;
      const baseline = summary(controlSamples);
      const figures = {
        mode,
        attacker: report,
        rest: summary(samples.filter((s) => s.face === "rest")),
        grpc: summary(samples.filter((s) => s.face === "grpc")),
        all: summary(samples),
        control: baseline,
        loadAverage: loadavg().map((l) => Number(l.toFixed(1))),
      };
      // Always printed: the figures are the deliverable (victim p50/p99/errors, attacker streams).
      console.log(JSON.stringify(figures));
      assert.equal(server.child.exitCode, null, `the server died:\n${server.stderr().slice(0, 4000)}`);
      // A victim's 500 names its cause in the server's error log lines (an INTERNAL_ERROR, say): shown with it.
      const serverErrors = () =>
        server
          .logLines()
          .filter((line) => Number(line.level) >= 50)
          .slice(0, 5);
      assert.equal(
        figures.all.errors,
        0,
        `victim errors: ${JSON.stringify(samples.filter((s) => !s.ok).slice(0, 5))}; server errors: ${JSON.stringify(serverErrors())}; ${JSON.stringify(figures)}`,
      );
      // The hard bound is 1 s. Only when the control instance, which nobody attacks, is itself
      // over it is the machine (not the attack) the cause: then the attacked instance may be as
      // slow as twice the control, and the message says so.
      const machineTooSlow = baseline.p99 >= P99_BOUND_MS;
      const bound = machineTooSlow ? 2 * baseline.p99 : P99_BOUND_MS;
      assert.ok(
        figures.all.p99 < bound,
        machineTooSlow
          ? `victim p99 ${figures.all.p99} ms over twice the control's; the control instance (not attacked) itself took p99 ${baseline.p99} ms, over 1 s: the machine is too loaded to judge (load average ${loadavg()
              .map((l) => l.toFixed(1))
              .join(" ")}): ${JSON.stringify(figures)}`
          : `victim p99 ${figures.all.p99} ms, over 1 s while the control instance's p99 was ${baseline.p99} ms: ${JSON.stringify(figures)}`,
      );
      // The attacker was stopped by the server, not only by its own clock.
      assert.ok((report.goaways.ENHANCE_YOUR_CALM ?? 0) >= 1, `no GOAWAY ENHANCE_YOUR_CALM: ${JSON.stringify(report)}`);
    });
  }

  test(`rapid reset from ${ATTACKER_ADDRESSES.length} addresses at once: the instance's own reset budget ends the resetting sessions; other clients' reads: 0 × 503, 0 errors`, async () => {
    const server = attacked.server;
    const attacker = runAttacker({
      url: server.address,
      durationMs: ATTACK_MS,
      mode: "raw",
      path: process.env.RAPID_RESET_PATH ?? "/readyz",
      localAddresses: ATTACKER_ADDRESSES,
    });
    await attacker.attacking;
    const [samples, controlSamples] = await Promise.all([
      readAsVictims(server.address, attacked.token, attacked.grpc, VICTIM_LOOPS, attacker.report),
      readAsVictims(control.server.address, control.token, control.grpc, VICTIM_LOOPS, attacker.report),
    ]);
    const report = await attacker.report;
    const [withFlood, without] = [summary(samples), summary(controlSamples)];
    const unavailable = samples.filter((s) => /HTTP 503|gRPC 14\b/.test(s.detail ?? "")).length;
    console.log(
      `isolation: rapid reset ${ATTACKER_ADDRESSES.length} addresses victim p50/p99 without=${without.p50}/${without.p99} ms with=${withFlood.p50}/${withFlood.p99} ms 503s=${unavailable} errors=${withFlood.errors} samples=${withFlood.count} instance budget: ${instanceRefusals(server)} sessions ended; attacker=${JSON.stringify(report)} load=${loadavg()[0]!.toFixed(1)}`,
    );
    assert.equal(server.child.exitCode, null, `the server died:\n${server.stderr().slice(0, 4000)}`);
    assert.equal(unavailable, 0, `victim 503s: ${JSON.stringify(samples.filter((s) => !s.ok).slice(0, 5))}`);
    assert.equal(withFlood.errors, 0, `victim errors: ${JSON.stringify(samples.filter((s) => !s.ok).slice(0, 5))}`);
    // The attacker was stopped by the server: told to go away (ENHANCE_YOUR_CALM, or nghttp2's own
    // INTERNAL_ERROR when its reset limit came first), or refused.
    const stopped = Object.values(report.goaways).reduce((a, b) => a + b, 0) + report.refusedConnections;
    assert.ok(stopped >= ATTACKER_ADDRESSES.length, `the attacker was not stopped: ${JSON.stringify(report)}`);
  });
});
