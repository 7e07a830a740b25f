// A rolling restart of three instances behind HAProxy under continuous REST and gRPC load, and the
// tally of what the load saw: each instance in turn gets SIGTERM, drains (SHUTDOWN_DRAIN_MS: /readyz
// 503 while it serves on), closes its connections gracefully and exits 0; it is started again and
// HAProxy takes it back once its /readyz has passed the checks. The instances are whatever `start`
// makes: processes (test/deploy/rolling-restart.test.ts) or containers (test/container/).
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { AuthService } from "../../gen/travel/auth/v2/auth_pb.js";
import { grpcJsUnary, jsonGrpcClient, type GenericGrpcClient } from "./grpc-js.js";
import type { startHaproxy } from "./haproxy.js";
import type { ServerProcess } from "./server-process.js";
import { operatorCall } from "./service.js";
import { INTROSPECT_PATH, TOKEN_PATH } from "./token-kit.js";
import { waitFor } from "./wait.js";

const MIN_REST_CALLS = 2_000;
const MIN_GRPC_CALLS = 500;
const REST_WORKERS = 4;
const GRPC_WORKERS = 2;

type Haproxy = Awaited<ReturnType<typeof startHaproxy>>;

/** One failed call: what was asked and what came back. */
interface Failure {
  readonly call: string;
  readonly outcome: string;
  readonly at: number;
}

/** Counts and failures of the calls a load loop made. */
class Tally {
  rest = 0;
  grpc = 0;
  readonly failures: Failure[] = [];

  fail(call: string, outcome: string): void {
    this.failures.push({ call, outcome, at: Date.now() });
  }
}

interface Credentials {
  readonly client_id: string;
  readonly client_secret: string;
}

/** Until `running()` is false: a client_credentials token, then its introspection, over and over (REST). */
async function restLoop(baseUrl: string, client: Credentials, tally: Tally, running: () => boolean): Promise<void> {
  const form = (fields: Record<string, string>) => ({
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(fields).toString(),
  });
  while (running()) {
    let token: string | undefined;
    try {
      const issued = await fetch(`${baseUrl}${TOKEN_PATH}`, form({ grant_type: "client_credentials", ...client }));
      const body = (await issued.json()) as { access_token?: string };
      tally.rest++;
      if (issued.status !== 200 || !body.access_token)
        tally.fail("REST token", `${issued.status} ${JSON.stringify(body)}`);
      token = body.access_token;
    } catch (error) {
      tally.rest++;
      tally.fail("REST token", String(error));
    }
    if (!token) continue;
    try {
      const introspected = await fetch(`${baseUrl}${INTROSPECT_PATH}`, form({ token, ...client }));
      const body = (await introspected.json()) as { active?: boolean };
      tally.rest++;
      if (introspected.status !== 200 || body.active !== true)
        tally.fail("REST introspection", `${introspected.status} ${JSON.stringify(body)}`);
    } catch (error) {
      tally.rest++;
      tally.fail("REST introspection", String(error));
    }
  }
}

/** The same pair over gRPC (grpc-js, one channel through HAProxy's h2c frontend). */
async function grpcLoop(
  grpcClient: GenericGrpcClient,
  client: Credentials,
  tally: Tally,
  running: () => boolean,
): Promise<void> {
  while (running()) {
    const issued = await grpcJsUnary<object, { access_token?: string }>(grpcClient, "FetchOauth2Token", {
      grant_type: "client_credentials",
      ...client,
    });
    tally.grpc++;
    if (!issued.ok || !issued.response?.access_token) {
      tally.fail("gRPC FetchOauth2Token", `${issued.code} ${issued.details}`);
      continue;
    }
    const introspected = await grpcJsUnary<object, { active?: boolean }>(grpcClient, "IntrospectToken", {
      token: issued.response.access_token,
      ...client,
    });
    tally.grpc++;
    if (!introspected.ok || introspected.response?.active !== true)
      tally.fail("gRPC IntrospectToken", `${introspected.code} ${introspected.details}`);
  }
}

/** Resolves once HAProxy sees all six servers (three REST, three gRPC) UP; the error names their states. */
export async function waitAllUp(proxy: Haproxy, what: string, timeoutMs = 60_000): Promise<void> {
  let lastStates: Record<string, string> = {};
  const allUp = async () => {
    const states = (lastStates = await proxy.states());
    return Object.values(states).length === 6 && Object.values(states).every((s) => s === "UP");
  };
  await waitFor(what, allUp, { timeoutMs, intervalMs: 200 }).catch((error: Error) => {
    throw new Error(`${error.message}\nstates: ${JSON.stringify(lastStates)}\nhaproxy:\n${proxy.output()}`);
  });
}

export interface RollingRestartOutcome {
  readonly rest: number;
  readonly grpc: number;
  readonly failures: readonly Failure[];
  /** Per instance: how long after SIGTERM it exited, and when HAProxy had it back. */
  readonly restarts: readonly string[];
}

/**
 * Restarts `instances` one after the other behind `proxy` (`start(i)` starts instance i again) while
 * REST and gRPC load runs through it with an API user created through the first instance's operator
 * API. Load goes on until every instance is back and both minimum call counts are reached. Asserts
 * that each instance exited 0; the caller asserts the failures.
 */
export async function rollingRestartUnderLoad(
  proxy: Haproxy,
  instances: Array<ServerProcess | undefined>,
  start: (index: number) => Promise<ServerProcess>,
): Promise<RollingRestartOutcome> {
  await waitAllUp(proxy, "HAProxy to see all six servers UP");
  const { tmcId } = await operatorCall<{ tmcId: string }>(instances[0]!.address, "CreateTmc", { name: "Rolling" });
  const created = await operatorCall<{ clientId: string; clientSecret: string }>(
    instances[0]!.address,
    "CreateApiUser",
    { tmcId },
  );
  const client: Credentials = { client_id: created.clientId, client_secret: created.clientSecret };
  const grpcClient = jsonGrpcClient(AuthService, proxy.grpc);

  const tally = new Tally();
  let restarting = true;
  const running = () => restarting || tally.rest < MIN_REST_CALLS || tally.grpc < MIN_GRPC_CALLS;
  const loops = [
    ...Array.from({ length: REST_WORKERS }, () => restLoop(proxy.rest, client, tally, running)),
    ...Array.from({ length: GRPC_WORKERS }, () => grpcLoop(grpcClient, client, tally, running)),
  ];
  const restarts: string[] = [];
  try {
    await sleep(2_000);
    for (let i = 0; i < instances.length; i++) {
      const started = Date.now();
      const stopped = await instances[i]!.stop(60_000);
      assert.deepEqual(stopped, { code: 0, signal: null }, `instance ${i + 1} exits 0:\n${instances[i]!.stderr()}`);
      const exitedAfter = Date.now() - started;
      instances[i] = undefined;
      instances[i] = await start(i);
      await waitAllUp(proxy, `HAProxy to take instance ${i + 1} back`);
      restarts.push(`instance ${i + 1}: exited ${exitedAfter} ms after SIGTERM, back in ${Date.now() - started} ms`);
    }
  } finally {
    restarting = false;
    // Load goes on until both minimums are reached (bounded by the test's timeout).
    await Promise.all(loops);
    grpcClient.close();
  }
  assert.ok(tally.rest >= MIN_REST_CALLS && tally.grpc >= MIN_GRPC_CALLS);
  return { rest: tally.rest, grpc: tally.grpc, failures: tally.failures, restarts };
}

/** Prints the outcome (the figures the operations guide quotes) and asserts that no request failed. */
export function assertNoFailedRequest(label: string, outcome: RollingRestartOutcome): void {
  console.log(
    `${label}: ${outcome.rest} REST and ${outcome.grpc} gRPC calls, ${outcome.failures.length} failed\n  ` +
      outcome.restarts.join("\n  "),
  );
  assert.deepEqual(
    outcome.failures.slice(0, 10),
    [],
    `${outcome.failures.length} failed of ${outcome.rest} REST and ${outcome.grpc} gRPC calls`,
  );
}
