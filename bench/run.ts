// `npm run bench`: the service's hot paths on real Postgres + Redis against four baselines
// measured in the same run — a bare Fastify route, a minimal Fastify token route, that route with
// the service's guarantees (admission in Redis, audit in Postgres), the same work behind grpc-js's
// own gRPC server, and node-oidc-provider issuing JWT access tokens — plus the invalidation delay between two instances. Scenarios are
// interleaved in rounds (each round runs every scenario once, in a rotated order) so machine noise
// hits all alike; the table shows medians over rounds and ratios of same-round figures. Writes bench/results.json and the "Latest full run" section of
// BENCHMARKS.md. See HELP below and BENCHMARKS.md.
import { execFileSync, fork, type ChildProcess } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import knexPkg from "knex";
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from "jose";
import { FORM, JSON_TYPE, agent, form, request } from "./http.js";
import { measureInvalidationOnce, readOn, type InvalidationSample, type Victim } from "./invalidation.js";
import { runVerifierLocal, type VerifierLocalRun } from "./protected-services.js";
import { clientAssertion, dpopProof } from "./client-proofs.js";
import { grpcAuthClients, grpcCall, grpcIssue, type HttpRequestSpec } from "./load.js";
import type { LoadJob, LoadReply, LoadRequest, LoadResult } from "./loadgen.js";
import { writeLatestRun, writeScaling } from "./benchmarks-md.js";
import { quietMachine, rssBytes } from "./procstat.js";
import {
  AUDIT_VOLUME_READS,
  BASELINE_LABEL,
  BASELINES,
  credentialRatiosLine,
  fmtMs,
  fmtRate,
  goalsTable,
  invalidationLine,
  judgeGoals,
  logLine,
  roundFigures,
  scenarioTable,
  summarise,
  summariseInvalidation,
  summarisePropagation,
  summariseVerifierLocal,
  protectedServicesLines,
  scalingLimit,
  scalingLine,
  scalingStep,
  scalingTable,
  type RoundFigures,
  type ScalingSummary,
} from "./report.js";
import {
  BENCH_DATABASE_URL,
  BENCH_REDIS_URL,
  createBackend,
  repoRoot,
  startBaseline,
  startListeningChild,
  startService,
  stopAllServers,
  buildService,
  storageServerPids,
  type Backend,
  type LogSummary,
  type ServerProcess,
  type ServiceInstance,
} from "./server.js";

/** Tokens per IntrospectTokens call of the rs-introspection-batch scenario (the contract's most). */
const RS_BATCH = 100;
/** The audience of the bench's resource server. */
const RS_AUDIENCE = "https://gateway.bench.invalid/api";

/** Users of the SCIM company of the scim-filtered-list scenario, and its connections. */
const SCIM_USERS = 10_000;
const SCIM_CONNECTIONS = 4;
/** Credits of the company of the air-credits-list scenario, how many go per import request, and its connections. */
const AIR_CREDITS = 100_000;
const AIR_CREDITS_PER_IMPORT = 150;
const AIR_CREDITS_CONNECTIONS = 2;
/** The audit-volume scenarios: one tenant's trail of AUDIT_EVENTS token events, read by the operator. */
const AUDIT_VOLUME_SCENARIOS = AUDIT_VOLUME_READS.map((read) => read.key);
const AUDIT_EVENTS = 1_000_000;
const AUDIT_CLIENTS = 20;
/** How far back the seeded trail reaches, in days. */
const AUDIT_DAYS = 30;
/** "scenario connections" of each audit-volume read, for the help. */
const AUDIT_VOLUME_CONNECTIONS = AUDIT_VOLUME_READS.map((read) => `${read.key} ${read.connections}`);
/** Issue 35's ratios, measured side by side: `--only issuance-ratios` runs just them. */
const ISSUANCE_RATIO_SCENARIOS = ["rest-issuance", "pkjwt-issuance", "dpop-issuance", "verifier-local"];

/** The scaling scenario: the same mixed load on 1, 2, … this many instances. */
const SCALING_INSTANCES = 3;

const HELP = `Usage: npm run -s bench -- [options]

Starts, as child processes on 127.0.0.1: the service twice (instances A and B, one fresh
Postgres schema and Redis key prefix, both removed at the end), a bare Fastify route, a minimal
Fastify token route, the same-guarantees route, its gRPC twin on grpc-js's own server and
node-oidc-provider (bench/baselines/), and a
separate load-generator process (bench/loadgen.ts). Seeds the service with --clients API users
through OperatorService, checks every scenario's answer (tokens are verified against each
server's JWKS), then runs --rounds rounds; each round runs every scenario once (warm-up, then
measured) in a rotated order, followed by its share of the invalidation repetitions. Prints one table and the goals; a full run
writes bench/results.json and the "Latest full run" section of BENCHMARKS.md.

Scenarios (all on instance A but invalidation):
  rest-issuance        POST /v2/auth/oauth2-token, client_credentials, clients round-robin
  pkjwt-issuance       the same with private_key_jwt: each request a fresh Ed25519 client
                       assertion (goal: ≥ 0.7 × rest-issuance's req/s in the same run)
  dpop-issuance        rest-issuance with a DPoP proof: each request a fresh Ed25519 proof with
                       the server's nonce (token_type DPoP; goal: ≥ 0.7 × rest-issuance's req/s
                       in the same run)
  grpc-issuance        AuthService.FetchOauth2Token over grpc-js (--connections calls in flight
                       on --grpc-channels HTTP/2 connections), clients round-robin
  authenticated-read   GET /v2/api-users?limit=10 with each client's token round-robin
  introspection        POST /v2/auth/introspect, each client introspecting its own token
  rs-introspection     POST /v2/auth/introspect by a resource server (registered through
                       OperatorService), the clients' tokens for its audience round-robin
  rs-introspection-grpc
                       the same over grpc-js (AuthService.IntrospectToken)
  rs-introspection-batch
                       AuthService.IntrospectTokens over grpc-js, ${RS_BATCH} tokens per call
  bare-fastify         baseline: GET / on a bare Fastify route
  minimal-token-route  baseline: POST /token (in-memory clients, one HMAC compare, EdDSA JWT)
  same-guarantees-route
                       baseline, "the limit for our guarantees": the minimal token route plus
                       one Redis EVALSHA of the service's admission script per request
                       (generation check, address and client budgets) and every token an audit
                       row in Postgres, one insert per 100 ms (not with --embedded)
  same-guarantees-grpc baseline, the limit for gRPC issuance: the same-guarantees route's work
                       (admission in Redis, audit in Postgres) served by @grpc/grpc-js's own
                       Server on AuthService.FetchOauth2Token, loaded like grpc-issuance
                       (not with --embedded)
  same-guarantees-read baseline, the limit for the authenticated read: GET /api-users?limit=10 on
                       the same-guarantees route with its tokens, each verified (node:crypto),
                       checked against the service's generation cache (one MGET) and answered
                       with one Postgres statement (page and total) (not with --embedded)
  oidc-provider        baseline: node-oidc-provider 9, client_credentials, JWT access tokens (EdDSA)
  invalidation         rotate a client on A, time until B refuses its old token
  propagation          rotate a client on A, time until the sample protected service
                       (examples/protected-service, the verifier package) following B's change
                       stream refuses its old token
  verifier-local       the verifier package's local verification rate on one core, first sight
                       and cached, beside a bare crypto.verify of the same tokens (a child process);
                       and its request check of a cached token: DPoP (a fresh proof each, made
                       beforehand) ÷ Bearer
  scim-filtered-list   SCIM lists of a company of ${SCIM_USERS} users (created over SCIM first):
                       GET /v2/scim/v2/Users?filter=userName eq "…" (other users round-robin)
                       and, as scim-filtered-list-sw, a userName sw "…" filter (10 matches each);
                       at most ${SCIM_CONNECTIONS} connections (latency, not throughput, is the question)
  ${AUDIT_VOLUME_SCENARIOS.join(", ")}
                       (opt-in: --only audit-volume for all, or any one alone; Postgres only)
                       one tenant with ${AUDIT_EVENTS} TOKEN_ISSUED audit events of the last ${AUDIT_DAYS} days (SQL
                       generate_series into the service's schema, then ANALYZE) of ${AUDIT_CLIENTS} API users,
                       read over OperatorService (Connect JSON), as the CLI's "audit list" does:
                       ListAuditEvents by action + since (the last 1-24 hours), by client id, with
                       until (6-29 days back: most of the trail is newer), and ListApiUsers with each
                       user's last token time; goal: p99 under 100 ms each, on its connections:
                       ${AUDIT_VOLUME_CONNECTIONS.slice(0, 2).join(", ")},
                       ${AUDIT_VOLUME_CONNECTIONS.slice(2).join(", ")}
  scaling              (not with --embedded) the service built as production runs it (tsc, node
                       dist/src/main.js) in a fresh schema and key prefix of its own, started 1,
                       then 2, then ${SCALING_INSTANCES} times (the other scenarios' servers stopped first); at
                       each count the same mixed load for one warm-up (3 × --warmup but with
                       --quick) and one --duration: three quarters of --connections as REST
                       connections (client_credentials issuance, introspection and GET
                       /v2/api-users?limit=10 in turn, request by request), a quarter as grpc-js
                       FetchOauth2Token calls in flight; the generator assigns REST connections and
                       gRPC channels to the instances round-robin (no balancer). Reports req/s,
                       p50/p99, each instance's CPU and the Postgres and Redis servers' CPU
  air-credits-list     POST /v3/air/company-transferable-unused-credits/list on a company of
                       ${AIR_CREDITS} credits (imported through OperatorService.ImportAirCredits
                       first), filtered by airline, expiry window and PCCs, pages round-robin;
                       at most ${AIR_CREDITS_CONNECTIONS} connections (goal: p99 under 50 ms)

Options:
  --duration N        measured seconds per scenario per round (default 8)
  --warmup N          unmeasured seconds before each measurement (default 1; 3× in round 1
                      but with --quick)
  --rounds N          rounds (default 3; the memory goal needs 3)
  --connections N     HTTP connections / gRPC calls in flight (default 50)
  --grpc-channels N   HTTP/2 connections the gRPC calls are spread over (default 4)
  --clients N         API users / baseline clients, used round-robin (default 60, at least 50
                      for a full run)
  --invalidation N    invalidation repetitions, spread over the rounds (default 21)
  --propagation N     propagation repetitions, spread over the rounds (default 21)
  --only KEYS         comma-separated scenarios to run (default: all); issuance-ratios: issue 35's
                      ratios alone (${ISSUANCE_RATIO_SCENARIOS.join(", ")})
  --log-level L       the service's LOG_LEVEL (default info, as deployed: it logs every request)
  --embedded          PGlite + in-process Redis stand-in (one instance: no invalidation)
  --quick             smoke run (about a minute): --duration 3 --rounds 1 --invalidation 5 --propagation 5
                      --clients 50
  --out FILE          results file ("-": none). Default: bench/results.json for a full run
                      (no --quick, --only, --rounds, --duration, --clients, --embedded), else none
  --markdown FILE     Markdown file whose "Latest full run" section gets the run ("-": none).
                      Default: BENCHMARKS.md for a full run, else none; a full run without
                      --markdown also rewrites docs/scaling.md's measured section
  --cpu-prof DIR      run instance A with node --cpu-prof, writing its profile into DIR
  --json              print results.json's content instead of the table
  --fail-on-goals     exit with 1 when a goal is not met (default: only when the run itself
                      failed — a scenario's check, a crashed server, cleanup)
  -h, --help          this text

Storage: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) and
BENCH_REDIS_URL (default redis://127.0.0.1:6379); only the run's own schemas and key prefixes
(the service's, and the same-guarantees routes' beside them) are written and removed, also on
Ctrl-C or failure.`;

const ALL_SCENARIOS = [
  "rest-issuance",
  "pkjwt-issuance",
  "dpop-issuance",
  "grpc-issuance",
  "authenticated-read",
  "introspection",
  "rs-introspection",
  "rs-introspection-grpc",
  "rs-introspection-batch",
  "bare-fastify",
  "minimal-token-route",
  "same-guarantees-route",
  "same-guarantees-grpc",
  "same-guarantees-read",
  "oidc-provider",
  "invalidation",
  "propagation",
  "verifier-local",
  "scim-filtered-list",
  "air-credits-list",
  ...AUDIT_VOLUME_SCENARIOS,
  "scaling",
] as const;

/** Opt-in (--only): seeding a million audit events takes a minute and grows the run's schema by ~300 MB. */
const OPT_IN: ReadonlySet<string> = new Set(AUDIT_VOLUME_SCENARIOS);
/** `--only audit-volume` names all three. */
const ALIASES: Readonly<Record<string, readonly string[]>> = {
  "audit-volume": AUDIT_VOLUME_SCENARIOS,
  "issuance-ratios": ISSUANCE_RATIO_SCENARIOS,
};

/** Scenarios that are measurements of their own, not load rounds. */
const NOT_LOAD: ReadonlySet<string> = new Set(["invalidation", "propagation", "verifier-local", "scaling"]);

/** The sample protected service's audience in the propagation and verifier-local scenarios. */
const SAMPLE_AUDIENCE = "https://trips.bench.invalid/api";
/** Distinct tokens the verifier-local scenario verifies per round. */
const VERIFIER_TOKENS = 4_000;

interface Options {
  durationS: number;
  warmupS: number;
  rounds: number;
  connections: number;
  grpcChannels: number;
  clients: number;
  invalidationReps: number;
  propagationReps: number;
  only: ReadonlySet<string>;
  logLevel: string;
  embedded: boolean;
  quick: boolean;
  out: string | undefined;
  markdown: string | undefined;
  /** docs/scaling.md, whose measured section a full run rewrites with the markdown. */
  scalingDoc: string | undefined;
  cpuProfDir: string | undefined;
  json: boolean;
  failOnGoals: boolean;
}

function parseOptions(argv: string[]): Options {
  let values;
  try {
    values = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        duration: { type: "string" },
        warmup: { type: "string" },
        rounds: { type: "string" },
        connections: { type: "string" },
        "grpc-channels": { type: "string" },
        clients: { type: "string" },
        invalidation: { type: "string" },
        propagation: { type: "string" },
        only: { type: "string" },
        "log-level": { type: "string" },
        embedded: { type: "boolean" },
        quick: { type: "boolean" },
        out: { type: "string" },
        markdown: { type: "string" },
        "cpu-prof": { type: "string" },
        json: { type: "boolean" },
        "fail-on-goals": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (error) {
    usage((error as Error).message);
  }
  if (values.help) {
    process.stdout.write(`${HELP}\n`);
    process.exit(0);
  }
  const quick = values.quick ?? false;
  const int = (name: string, raw: string | undefined, fallback: number, min: number, max: number) => {
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max)
      usage(`--${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
    return Number(raw);
  };
  const logLevel = values["log-level"] ?? "info";
  if (!["trace", "debug", "info", "warn", "error", "fatal", "silent"].includes(logLevel))
    usage(`--log-level must be a pino level, got "${logLevel}"`);
  const only = new Set(
    values.only === undefined
      ? ALL_SCENARIOS.filter((k) => !OPT_IN.has(k))
      : values.only
          .split(",")
          .map((k) => k.trim())
          .filter((k) => k !== "")
          .flatMap((k) => ALIASES[k] ?? [k]),
  );
  for (const key of only)
    if (!(ALL_SCENARIOS as readonly string[]).includes(key))
      usage(`--only: unknown scenario "${key}" (${ALL_SCENARIOS.join(", ")})`);
  // A million rows written with SQL into the run's own schema: PGlite lives inside the service's
  // process, where the bench cannot write, and answers one query at a time.
  if (values.embedded && AUDIT_VOLUME_SCENARIOS.some((key) => only.has(key)))
    usage(`--embedded: ${AUDIT_VOLUME_SCENARIOS.filter((key) => only.has(key)).join(", ")} run on Postgres only`);
  // bench/results.json is the committed record of a full run: a partial or smoke run does not
  // overwrite it unless --out says so.
  const full =
    !quick &&
    values.only === undefined &&
    values.rounds === undefined &&
    values.duration === undefined &&
    values.clients === undefined &&
    !values.embedded;
  const outRaw = values.out ?? (full ? path.join(repoRoot, "bench", "results.json") : "-");
  const markdownRaw = values.markdown ?? (full ? path.join(repoRoot, "BENCHMARKS.md") : "-");
  return {
    durationS: int("duration", values.duration, quick ? 3 : 8, 1, 600),
    warmupS: int("warmup", values.warmup, 1, 0, 60),
    rounds: int("rounds", values.rounds, quick ? 1 : 3, 1, 20),
    connections: int("connections", values.connections, 50, 1, 1024),
    grpcChannels: int("grpc-channels", values["grpc-channels"], 4, 1, 64),
    clients: int("clients", values.clients, quick ? 50 : 60, 1, 10_000),
    invalidationReps: int("invalidation", values.invalidation, quick ? 5 : 21, 0, 1000),
    propagationReps: int("propagation", values.propagation, quick ? 5 : 21, 0, 1000),
    only,
    logLevel,
    embedded: values.embedded ?? false,
    quick,
    out: outRaw === "-" ? undefined : path.resolve(outRaw),
    markdown: markdownRaw === "-" ? undefined : path.resolve(markdownRaw),
    scalingDoc: values.markdown === undefined && full ? path.join(repoRoot, "docs", "scaling.md") : undefined,
    cpuProfDir: values["cpu-prof"] === undefined ? undefined : path.resolve(values["cpu-prof"]),
    json: values.json ?? false,
    failOnGoals: values["fail-on-goals"] ?? false,
  };
}

function usage(message: string): never {
  process.stderr.write(`bench: ${message}\n\n${HELP}\n`);
  process.exit(2);
}

const progress = (message: string) => process.stderr.write(`bench: ${message}\n`);

// ---- the load generator process ------------------------------------------------------------

class LoadGenerator {
  private readonly child: ChildProcess;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (r: LoadResult) => void; reject: (e: Error) => void }>();

  constructor() {
    this.child = fork(path.join(repoRoot, "bench", "loadgen.ts"), [], {
      cwd: repoRoot,
      execArgv: ["--import", "tsx"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.child.on("message", (reply: LoadReply) => {
      const waiter = this.pending.get(reply.id);
      if (!waiter) return;
      this.pending.delete(reply.id);
      if ("error" in reply) waiter.reject(new Error(`load generator: ${reply.error}`));
      else waiter.resolve(reply.result);
    });
    this.child.on("exit", (code, signal) => {
      for (const w of this.pending.values())
        w.reject(new Error(`the load generator exited with ${signal ?? `code ${code}`}`));
      this.pending.clear();
    });
  }

  run(request: Omit<LoadRequest, "id">): Promise<LoadResult> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ ...request, id } satisfies LoadRequest);
    });
  }

  stop(): void {
    if (this.child.connected) this.child.send({ exit: true });
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 5_000);
    timer.unref();
    this.child.once("exit", () => clearTimeout(timer));
  }
}

// ---- scenarios -----------------------------------------------------------------------------

interface LoadScenario {
  readonly key: string;
  readonly title: string;
  readonly kind: "service" | "baseline";
  readonly face: "REST" | "gRPC";
  readonly server: ServerProcess;
  readonly job: LoadJob;
  readonly expected: readonly string[];
  /** Tokens each request carries (a batch introspection's); 1 when absent. */
  readonly tokensPerRequest?: number;
  /** What the checked request answered. */
  answered: string;
}

interface Credentials {
  readonly clientId: string;
  readonly clientSecret: string;
}

/** Verifies a JWT access token against the issuer's JWKS: EdDSA, signature, expiry. */
async function verifyJwt(
  token: string,
  jwksUrl: string,
  expect: { issuer: string; audience?: string; subject: string },
): Promise<string> {
  const jwks = (await request(jwksUrl)).json<JSONWebKeySet>();
  const header = decodeProtectedHeader(token);
  const { payload } = await jwtVerify(token, createLocalJWKSet(jwks), {
    algorithms: ["EdDSA"],
    issuer: expect.issuer,
    ...(expect.audience ? { audience: expect.audience } : {}),
    subject: expect.subject,
  });
  return `JWT ${header.alg}${header.typ ? ` typ ${header.typ}` : ""}, verified with ${new URL(jwksUrl).pathname} (sub, iss${expect.audience ? ", aud" : ""}, exp ${payload.exp ? "ok" : "missing"})`;
}

async function operator(
  service: ServiceInstance,
  token: string,
  method: string,
  body: object,
): Promise<Record<string, unknown>> {
  const send = () =>
    request(`${service.operatorUrl}/travel.operator.v1.OperatorService/${method}`, {
      headers: { ...JSON_TYPE, authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
      timeoutMs: 30_000,
    });
  let answer = await send();
  // On a busy machine the seeding's parallel writes to one TMC can meet its row lock, or the
  // database its statement timeout: the service answers RESOURCE_BUSY ("retry shortly") or 503
  // ("retry with backoff"), and a console would retry.
  const retryable = () =>
    (answer.status === 409 && answer.text.includes("RESOURCE_BUSY")) ||
    (answer.status === 503 && answer.text.includes("DEPENDENCY_UNAVAILABLE"));
  for (let attempt = 1; attempt <= 5 && retryable(); attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
    answer = await send();
  }
  if (answer.status !== 200)
    throw new Error(`OperatorService.${method} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
  return answer.json();
}

/**
 * Token issuance with private_key_jwt: options.clients API users of their own, each with an
 * Ed25519 key registered through OperatorService, each request a fresh assertion (a jti is
 * usable once) signed in the load generator as a client library would.
 */
async function privateKeyJwtScenario(
  A: ServiceInstance,
  operatorToken: string,
  tmcId: string,
  options: { clients: number; connections: number },
  issuer: string,
): Promise<LoadScenario> {
  const clients = await createTmcAdmins(A, operatorToken, tmcId, options.clients);
  const variants: HttpRequestSpec[] = await inParallel(clients.length, 6, async (i) => {
    const { publicKey, privateKey } = crypto.generateKeyPairSync("ed25519");
    const kid = `bench-${i}`;
    const jwk = { ...publicKey.export({ format: "jwk" }), kid };
    await operator(A, operatorToken, "SetApiUserKeys", {
      tmcId,
      clientId: clients[i]!.clientId,
      jwks: JSON.stringify({ keys: [jwk] }),
    });
    return {
      method: "POST",
      path: "/v2/auth/oauth2-token",
      headers: FORM,
      body: form({
        grant_type: "client_credentials",
        client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
      }),
      assertion: {
        clientId: clients[i]!.clientId,
        kid,
        privateKeyPem: privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
        audience: issuer,
      },
    };
  });
  const probe = variants[0]!;
  const answer = await request(`${A.baseUrl}${probe.path}`, {
    headers: FORM,
    body: `${probe.body}&client_assertion=${clientAssertion(probe.assertion!)}`,
  });
  const token = answer.status === 200 ? answer.json<{ access_token?: string }>().access_token : undefined;
  if (!token) throw new Error(`private_key_jwt issuance answered ${answer.status}: ${answer.text.slice(0, 300)}`);
  const verified = await verifyJwt(token, `${A.baseUrl}/.well-known/jwks.json`, {
    issuer,
    subject: clients[0]!.clientId,
  });
  return {
    key: "pkjwt-issuance",
    title: "REST issuance, private_key_jwt (service)",
    kind: "service",
    face: "REST",
    server: A,
    job: { kind: "http", baseUrl: A.baseUrl, variants, connections: options.connections },
    expected: ["200"],
    answered: `200 access_token for each of ${clients.length} clients (a fresh assertion per request): ${verified}`,
  };
}

/**
 * Token issuance with DPoP: the rest-issuance clients and requests, each request with a fresh
 * proof (a jti is usable once) by the client's own Ed25519 key, signed in the load generator as a
 * client library would, with the server's nonce (the generator asks for it before each run).
 */
async function dpopIssuanceScenario(
  A: ServiceInstance,
  tokenVariants: readonly HttpRequestSpec[],
  connections: number,
  issuer: string,
  subject: string,
): Promise<LoadScenario> {
  const url = `${A.baseUrl}/v2/auth/oauth2-token`;
  const variants: HttpRequestSpec[] = tokenVariants.map((v) => {
    const { publicKey, privateKey } = crypto.generateKeyPairSync("ed25519");
    return {
      ...v,
      dpop: {
        privateKeyPem: privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
        publicJwk: publicKey.export({ format: "jwk" }),
        url,
      },
    };
  });
  const probe = variants[0]!;
  const ask = (nonce?: string) =>
    request(url, { headers: { ...FORM, dpop: dpopProof({ ...probe.dpop!, nonce }) }, body: probe.body! });
  const first = await ask();
  const nonce = first.headers["dpop-nonce"];
  if (first.status !== 400 || typeof nonce !== "string" || !first.text.includes("use_dpop_nonce"))
    throw new Error(`DPoP issuance without a nonce answered ${first.status}: ${first.text.slice(0, 300)}`);
  const answer = await ask(nonce);
  const body = answer.status === 200 ? answer.json<{ access_token?: string; token_type?: string }>() : {};
  if (!body.access_token || body.token_type !== "DPoP")
    throw new Error(`DPoP issuance answered ${answer.status}: ${answer.text.slice(0, 300)}`);
  if (typeof (decodeJwt(body.access_token).cnf as { jkt?: unknown } | undefined)?.jkt !== "string")
    throw new Error("DPoP issuance: the access token has no cnf.jkt");
  const verified = await verifyJwt(body.access_token, `${A.baseUrl}/.well-known/jwks.json`, { issuer, subject });
  return {
    key: "dpop-issuance",
    title: "REST issuance, DPoP (service)",
    kind: "service",
    face: "REST",
    server: A,
    job: { kind: "http", baseUrl: A.baseUrl, variants, connections },
    expected: ["200"],
    answered: `400 use_dpop_nonce without a nonce, then 200 token_type DPoP with cnf.jkt for each of ${variants.length} clients (a fresh proof per request): ${verified}`,
  };
}

async function inParallel<T>(count: number, width: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, count) }, async () => {
      while (next < count) {
        const i = next++;
        out[i] = await task(i);
      }
    }),
  );
  return out;
}

/** `count` TMC admins of the TMC (their tokens may read /v2/api-users), created through OperatorService. */
async function createTmcAdmins(
  service: ServiceInstance,
  operatorToken: string,
  tmcId: string,
  count: number,
): Promise<Credentials[]> {
  return inParallel(count, 6, async () => {
    const r = (await operator(service, operatorToken, "CreateApiUser", { tmcId, role: "TMC_ADMIN" })) as {
      clientId?: string;
      clientSecret?: string;
    };
    if (!r.clientId || !r.clientSecret) throw new Error(`OperatorService.CreateApiUser returned ${JSON.stringify(r)}`);
    return { clientId: r.clientId, clientSecret: r.clientSecret };
  });
}

async function issueRest(baseUrl: string, c: Credentials, extra: Record<string, string> = {}): Promise<string> {
  const answer = await request(`${baseUrl}/v2/auth/oauth2-token`, {
    headers: FORM,
    body: form({ grant_type: "client_credentials", client_id: c.clientId, client_secret: c.clientSecret, ...extra }),
  });
  const token = answer.status === 200 ? answer.json<{ access_token?: string }>().access_token : undefined;
  if (!token) throw new Error(`POST /v2/auth/oauth2-token answered ${answer.status}: ${answer.text.slice(0, 300)}`);
  return token;
}

/** A DPoP-bound token for `audience` (the nonce asked for first, as a client does), and the Ed25519 key it is bound to. */
async function issueBoundRest(
  baseUrl: string,
  c: Credentials,
  audience: string,
): Promise<{ bound: string; privateKeyPem: string; publicJwk: object }> {
  const { publicKey, privateKey } = crypto.generateKeyPairSync("ed25519");
  const key = {
    privateKeyPem: privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
    publicJwk: publicKey.export({ format: "jwk" }),
  };
  const url = `${baseUrl}/v2/auth/oauth2-token`;
  const body = form({
    grant_type: "client_credentials",
    client_id: c.clientId,
    client_secret: c.clientSecret,
    resource: audience,
  });
  const ask = (nonce?: string) => request(url, { headers: { ...FORM, dpop: dpopProof({ ...key, url, nonce }) }, body });
  const nonce = (await ask()).headers["dpop-nonce"];
  const answer = await ask(typeof nonce === "string" ? nonce : undefined);
  const token = answer.status === 200 ? answer.json<{ access_token?: string }>().access_token : undefined;
  if (!token) throw new Error(`DPoP issuance for ${audience} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
  return { bound: token, ...key };
}

function gitCommit(): string {
  try {
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: repoRoot, encoding: "utf8" }).trim();
    const dirty =
      execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], {
        cwd: repoRoot,
        encoding: "utf8",
      }).trim() !== "";
    return dirty ? `${commit} (+ uncommitted changes)` : commit;
  } catch {
    return "unknown";
  }
}

// ---- main ----------------------------------------------------------------------------------

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const started = Date.now();
  const loadScenarioCount = [...options.only].filter((k) => !NOT_LOAD.has(k)).length;
  progress(
    `${loadScenarioCount} load scenarios × ${options.rounds} round(s) × (${options.warmupS} s warm-up + ${options.durationS} s) ≈ ` +
      `${Math.round((loadScenarioCount * (options.rounds * (options.warmupS + options.durationS) + 2 * options.warmupS)) / 6) / 10} min of load, plus start-up and invalidation`,
  );
  const loadAverage = os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(" ");
  const problems: string[] = [];
  const backend: Backend = createBackend(options.embedded);
  // The scaling scenario's own schema and key prefix, created when it runs.
  let scalingBackend: Backend | undefined;
  let loadgen: LoadGenerator | undefined;
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      loadgen?.stop();
      await stopAllServers();
      agent.destroy();
      problems.push(...(await backend.teardown()));
      if (scalingBackend) problems.push(...(await scalingBackend.teardown()));
    })());
  let interrupted = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    progress(
      `${signal}: stopping the servers, dropping schema ${backend.schema ?? "(embedded)"} and Redis keys ${backend.redisKeyPrefix}*` +
        (backend.baseline ? ` (and ${backend.baseline.schema}, ${backend.baseline.redisKeyPrefix}*)` : ""),
    );
    void cleanup().finally(() => {
      for (const p of problems) progress(`problem: ${p}`);
      process.exit(130);
    });
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  const figures = new Map<string, RoundFigures[]>();
  const scenarios: LoadScenario[] = [];
  const invalidationSamples: InvalidationSample[] = [];
  let invalidationSkipped: string | undefined;
  const propagationSamples: InvalidationSample[] = [];
  let propagationSkipped: string | undefined;
  let verifierLocal: VerifierLocalRun | undefined;
  let verifierLocalSkipped: string | undefined;
  const rssAfterRound: number[] = [];
  const logs: Array<[string, LogSummary]> = [];
  let serviceA: ServiceInstance | undefined;
  let serviceB: ServiceInstance | undefined;
  const scalingInstances: ServiceInstance[] = [];
  let scaling: ScalingSummary | undefined;
  let scalingSkipped: string | undefined =
    options.embedded && options.only.has("scaling")
      ? "--embedded runs one instance (PGlite and the in-process Redis stand-in cannot be shared)"
      : !options.only.has("scaling")
        ? "not selected (--only)"
        : undefined;
  try {
    const wants = (key: string) => options.only.has(key);
    const wantsService = [
      "rest-issuance",
      "pkjwt-issuance",
      "dpop-issuance",
      "grpc-issuance",
      "authenticated-read",
      "introspection",
      "rs-introspection",
      "rs-introspection-grpc",
      "rs-introspection-batch",
      "invalidation",
      "propagation",
      "verifier-local",
      "scim-filtered-list",
      "air-credits-list",
      ...AUDIT_VOLUME_SCENARIOS,
    ].some(wants);
    const wantsPropagation = wants("propagation") && options.propagationReps > 0 && !options.embedded;
    const wantsB = (wants("invalidation") && options.invalidationReps > 0 && !options.embedded) || wantsPropagation;
    if (wants("propagation") && options.embedded)
      propagationSkipped = "--embedded runs one instance (PGlite and the in-process Redis stand-in cannot be shared)";
    else if (wants("propagation") && options.propagationReps === 0) propagationSkipped = "--propagation 0";
    else if (!wants("propagation")) propagationSkipped = "not selected (--only)";
    if (!wants("verifier-local")) verifierLocalSkipped = "not selected (--only)";
    if (wants("invalidation") && options.embedded)
      invalidationSkipped = "--embedded runs one instance (PGlite and the in-process Redis stand-in cannot be shared)";
    else if (wants("invalidation") && options.invalidationReps === 0) invalidationSkipped = "--invalidation 0";
    else if (!wants("invalidation")) invalidationSkipped = "not selected (--only)";

    // ---- start everything
    const baselineClients: Credentials[] = Array.from({ length: options.clients }, (_, i) => ({
      clientId: `bench-client-${String(i).padStart(4, "0")}`,
      clientSecret: crypto.randomBytes(32).toString("base64url"),
    }));
    const baselineEnv = { BENCH_CLIENTS: JSON.stringify(baselineClients) };
    progress(
      `starting: ${wantsService ? `service A${wantsB ? " and B" : ""} (${options.embedded ? "embedded PGlite" : `Postgres schema ${backend.schema}, Redis prefix ${backend.redisKeyPrefix}`}), ` : ""}baselines, load generator`,
    );
    const baselineStarts = {
      "bare-fastify":
        wants("bare-fastify") || wants("rest-issuance")
          ? startBaseline("bare-fastify", "bare-fastify.ts", {})
          : undefined,
      "minimal-token-route": startBaseline("minimal-token-route", "minimal-token-route.ts", baselineEnv),
      "same-guarantees-route":
        (wants("same-guarantees-route") || wants("same-guarantees-read")) && backend.baseline
          ? startBaseline("same-guarantees-route", "same-guarantees-route.ts", {
              ...baselineEnv,
              BENCH_DATABASE_URL,
              BENCH_REDIS_URL,
              BENCH_AUDIT_SCHEMA: backend.baseline.schema,
              BENCH_REDIS_KEY_PREFIX: backend.baseline.redisKeyPrefix,
              // The service's budgets, read by the same parser (config/rate-limits.ts).
              TOKEN_RATE_LIMIT_PER_CLIENT: backend.serviceEnv.TOKEN_RATE_LIMIT_PER_CLIENT,
              TOKEN_RATE_LIMIT_PER_ADDRESS: backend.serviceEnv.TOKEN_RATE_LIMIT_PER_ADDRESS,
            })
          : undefined,
      "same-guarantees-grpc":
        wants("same-guarantees-grpc") && backend.grpcBaseline
          ? startBaseline("same-guarantees-grpc", "same-guarantees-grpc.ts", {
              ...baselineEnv,
              BENCH_DATABASE_URL,
              BENCH_REDIS_URL,
              BENCH_AUDIT_SCHEMA: backend.grpcBaseline.schema,
              BENCH_REDIS_KEY_PREFIX: backend.grpcBaseline.redisKeyPrefix,
              TOKEN_RATE_LIMIT_PER_CLIENT: backend.serviceEnv.TOKEN_RATE_LIMIT_PER_CLIENT,
              TOKEN_RATE_LIMIT_PER_ADDRESS: backend.serviceEnv.TOKEN_RATE_LIMIT_PER_ADDRESS,
            })
          : undefined,
      "oidc-provider":
        wants("oidc-provider") || wants("rest-issuance")
          ? startBaseline("oidc-provider", "oidc-provider.ts", baselineEnv)
          : undefined,
    };
    for (const p of Object.values(baselineStarts)) p?.catch(() => {}); // awaited below
    for (const key of ["same-guarantees-route", "same-guarantees-grpc", "same-guarantees-read"])
      if (wants(key) && !backend.baseline) progress(`${key}: not run with --embedded (it needs Postgres and Redis)`);
    if (wantsService) {
      serviceA = await startService(backend, {
        name: "service-A",
        logLevel: options.logLevel,
        cpuProfDir: options.cpuProfDir,
      });
      // B after A: A has applied the migrations.
      if (wantsB) serviceB = await startService(backend, { name: "service-B", logLevel: options.logLevel });
    }
    const baselines: Partial<Record<(typeof BASELINES)[number], ServerProcess>> = {};
    for (const [key, p] of Object.entries(baselineStarts))
      if (p) baselines[key as keyof typeof baselineStarts] = await p;
    loadgen = new LoadGenerator();

    // ---- seed the service and check every scenario's answer
    let victim: Victim | undefined;
    let propagationVictim: Victim | undefined;
    let sample: ServerProcess | undefined;
    let resourceServer: Credentials | undefined;
    let adminToken = "";
    let seededClients: Credentials[] = [];
    if (serviceA) {
      const A = serviceA;
      progress(
        `service A ${A.baseUrl} (pid ${A.pid}, database=${A.databaseKind}, redis=${A.redisKind})${serviceB ? `; B ${serviceB.baseUrl} (pid ${serviceB.pid})` : ""}`,
      );
      const seed = (await operator(A, backend.operatorToken, "Seed", {})) as {
        tmcId?: string;
        clientId?: string;
        clientSecret?: string;
      };
      if (!seed.tmcId || !seed.clientId || !seed.clientSecret)
        throw new Error(`OperatorService.Seed returned no TMC admin: ${JSON.stringify(seed)}`);
      const admin = { clientId: seed.clientId, clientSecret: seed.clientSecret };
      await operator(A, backend.operatorToken, "SetTmcApiUserLimit", {
        tmcId: seed.tmcId,
        // The private_key_jwt scenario's clients come on top (a user with keys has no secret).
        maxApiUsers: 2 * options.clients + 10,
      });
      // TMC admins: their tokens may read /v2/api-users. Two more: the invalidation and propagation probes.
      const created = await createTmcAdmins(A, backend.operatorToken, seed.tmcId, options.clients + 2);
      victim = { ...created.pop()! };
      propagationVictim = { ...created.pop()! };
      const clients = created;
      seededClients = clients;
      progress(
        `seeded: a TMC with ${clients.length} API users for the load (+ 2 for the invalidation and propagation probes)`,
      );
      adminToken = await issueRest(A.baseUrl, admin);

      const issuer = backend.serviceEnv.TOKEN_ISSUER!;
      const tokens = await inParallel(clients.length, 6, (i) => issueRest(A.baseUrl, clients[i]!));
      let restAnswer = "";
      for (const [i, token] of tokens.entries()) {
        restAnswer = await verifyJwt(token, `${A.baseUrl}/.well-known/jwks.json`, {
          issuer,
          subject: clients[i]!.clientId,
        });
      }
      restAnswer = `200 access_token for each of ${clients.length} clients: ${restAnswer}`;
      const host = new URL(A.baseUrl).host;
      const tokenVariants: HttpRequestSpec[] = clients.map((c) => ({
        method: "POST",
        path: "/v2/auth/oauth2-token",
        headers: FORM,
        body: form({ grant_type: "client_credentials", client_id: c.clientId, client_secret: c.clientSecret }),
      }));
      if (wants("rest-issuance")) {
        scenarios.push({
          key: "rest-issuance",
          title: "REST issuance (service)",
          kind: "service",
          face: "REST",
          server: A,
          job: { kind: "http", baseUrl: A.baseUrl, variants: tokenVariants, connections: options.connections },
          expected: ["200"],
          answered: restAnswer,
        });
      }
      if (wants("pkjwt-issuance")) {
        scenarios.push(await privateKeyJwtScenario(A, backend.operatorToken, seed.tmcId, options, issuer));
      }
      if (wants("dpop-issuance")) {
        scenarios.push(await dpopIssuanceScenario(A, tokenVariants, options.connections, issuer, clients[0]!.clientId));
      }
      if (wants("grpc-issuance")) {
        const [probe] = grpcAuthClients(repoRoot, host, 1);
        const answer = await grpcIssue(probe!, {
          grantType: "client_credentials",
          clientId: clients[0]!.clientId,
          clientSecret: clients[0]!.clientSecret,
        }).finally(() => probe!.close());
        if (answer.status !== "OK" || !answer.accessToken)
          throw new Error(`gRPC FetchOauth2Token answered ${answer.status}`);
        const verified = await verifyJwt(answer.accessToken, `${A.baseUrl}/.well-known/jwks.json`, {
          issuer,
          subject: clients[0]!.clientId,
        });
        scenarios.push({
          key: "grpc-issuance",
          title: "gRPC issuance (service)",
          kind: "service",
          face: "gRPC",
          server: A,
          job: {
            kind: "grpc",
            target: host,
            channels: options.grpcChannels,
            concurrency: options.connections,
            requests: clients.map((c) => ({
              grantType: "client_credentials",
              clientId: c.clientId,
              clientSecret: c.clientSecret,
            })),
          },
          expected: ["OK"],
          answered: `OK accessToken: ${verified}`,
        });
      }
      if (wants("authenticated-read")) {
        const answer = await request(`${A.baseUrl}/v2/api-users?limit=10`, {
          headers: { authorization: `Bearer ${tokens[0]}` },
        });
        const list = answer.status === 200 ? answer.json<{ apiUsers?: unknown[]; totalCount?: number }>() : undefined;
        if (!list || !Array.isArray(list.apiUsers) || list.apiUsers.length === 0)
          throw new Error(`GET /v2/api-users answered ${answer.status}: ${answer.text.slice(0, 300)}`);
        scenarios.push({
          key: "authenticated-read",
          title: "authenticated read (service)",
          kind: "service",
          face: "REST",
          server: A,
          job: {
            kind: "http",
            baseUrl: A.baseUrl,
            variants: tokens.map((t) => ({
              method: "GET",
              path: "/v2/api-users?limit=10",
              headers: { authorization: `Bearer ${t}` },
            })),
            connections: options.connections,
          },
          expected: ["200"],
          answered: `200 with ${list.apiUsers.length} of ${list.totalCount} API users`,
        });
      }
      if (wants("introspection")) {
        const variants: HttpRequestSpec[] = clients.map((c, i) => ({
          method: "POST",
          path: "/v2/auth/introspect",
          headers: FORM,
          body: form({ token: tokens[i]!, client_id: c.clientId, client_secret: c.clientSecret }),
        }));
        const answer = await request(`${A.baseUrl}${variants[0]!.path}`, { headers: FORM, body: variants[0]!.body! });
        if (answer.status !== 200 || answer.json<{ active?: boolean }>().active !== true)
          throw new Error(`POST /v2/auth/introspect answered ${answer.status}: ${answer.text.slice(0, 300)}`);
        scenarios.push({
          key: "introspection",
          title: "introspection (service)",
          kind: "service",
          face: "REST",
          server: A,
          job: { kind: "http", baseUrl: A.baseUrl, variants, connections: options.connections },
          expected: ["200"],
          answered: '200 {"active":true,…}',
        });
      }
    }
    if (serviceA && ["rs-introspection", "rs-introspection-grpc", "rs-introspection-batch"].some(wants))
      scenarios.push(
        ...(await resourceServerScenarios(serviceA, backend.operatorToken, seededClients, options)).filter((x) =>
          wants(x.key),
        ),
      );
    if (serviceA && wants("scim-filtered-list"))
      scenarios.push(...(await scimScenarios(serviceA, backend.operatorToken, options.connections)));
    if (serviceA && wants("air-credits-list"))
      scenarios.push(await airCreditScenario(serviceA, backend.operatorToken, options.connections));
    if (serviceA && AUDIT_VOLUME_SCENARIOS.some(wants)) {
      if (!backend.schema) throw new Error("the audit-volume scenarios seed Postgres: not with --embedded");
      scenarios.push(
        ...(await auditVolumeScenarios(serviceA, backend.operatorToken, backend.schema)).filter((x) => wants(x.key)),
      );
    }
    const bare = baselines["bare-fastify"];
    if (bare) {
      const answer = await request(`${bare.baseUrl}/`);
      if (answer.status !== 200 || answer.json<{ hello?: string }>().hello !== "world")
        throw new Error(`bare Fastify answered ${answer.status} ${answer.text}`);
      scenarios.push({
        key: "bare-fastify",
        title: "bare Fastify route (baseline)",
        kind: "baseline",
        face: "REST",
        server: bare,
        job: {
          kind: "http",
          baseUrl: bare.baseUrl,
          variants: [{ method: "GET", path: "/" }],
          connections: options.connections,
        },
        expected: ["200"],
        answered: '200 {"hello":"world"}',
      });
    }
    for (const key of ["minimal-token-route", "same-guarantees-route", "oidc-provider"] as const) {
      const server = baselines[key];
      if (!server) continue;
      const c = baselineClients[0]!;
      const answer = await request(`${server.baseUrl}/token`, {
        headers: FORM,
        body: form({ grant_type: "client_credentials", client_id: c.clientId, client_secret: c.clientSecret }),
      });
      const token = answer.status === 200 ? answer.json<{ access_token?: string }>().access_token : undefined;
      if (!token) throw new Error(`${key} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
      const verified =
        key === "oidc-provider"
          ? await verifyJwt(token, `${server.baseUrl}/jwks`, {
              issuer: "http://oidc-provider.bench.invalid",
              audience: "urn:bench:api",
              subject: c.clientId,
            })
          : await verifyJwt(token, `${server.baseUrl}/jwks`, {
              issuer: `http://${key}.bench.invalid`,
              subject: c.clientId,
            });
      if (!wants(key)) continue; // started only as a reference for the checks and ratios
      scenarios.push({
        key,
        title: {
          "minimal-token-route": "minimal token route (baseline)",
          "same-guarantees-route": "same-guarantees route (baseline)",
          "oidc-provider": "node-oidc-provider, JWT (baseline)",
        }[key],
        kind: "baseline",
        face: "REST",
        server,
        job: {
          kind: "http",
          baseUrl: server.baseUrl,
          variants: baselineClients.map((bc) => ({
            method: "POST",
            path: "/token",
            headers: FORM,
            body: form({ grant_type: "client_credentials", client_id: bc.clientId, client_secret: bc.clientSecret }),
          })),
          connections: options.connections,
        },
        expected: ["200"],
        answered: `200 access_token: ${verified}`,
      });
    }
    const sameGuaranteesGrpc = baselines["same-guarantees-grpc"];
    if (sameGuaranteesGrpc)
      scenarios.push(await sameGuaranteesGrpcScenario(sameGuaranteesGrpc, baselineClients, options));
    const sameGuarantees = baselines["same-guarantees-route"];
    if (sameGuarantees && wants("same-guarantees-read"))
      scenarios.push(await sameGuaranteesReadScenario(sameGuarantees, baselineClients, options.connections));
    for (const s of scenarios) progress(`checked ${s.key}: ${s.answered}`);

    // ---- the protected-services scenarios: a resource server for the sample audience
    if (serviceA && (wantsPropagation || wants("verifier-local"))) {
      const created = (await operator(serviceA, backend.operatorToken, "CreateResourceServer", {
        name: "Bench trips",
        audiences: [SAMPLE_AUDIENCE],
      })) as { clientId?: string; clientSecret?: string };
      if (!created.clientId || !created.clientSecret)
        throw new Error(`OperatorService.CreateResourceServer returned ${JSON.stringify(created)}`);
      resourceServer = { clientId: created.clientId, clientSecret: created.clientSecret };
    }
    const sampleEnv = (authUrl: string) => ({
      AUTH_URL: authUrl,
      ISSUER: backend.serviceEnv.TOKEN_ISSUER!,
      AUDIENCE: SAMPLE_AUDIENCE,
      RS_CLIENT_ID: resourceServer!.clientId,
      RS_CLIENT_SECRET: resourceServer!.clientSecret,
    });
    if (serviceB && wantsPropagation && resourceServer) {
      sample = await startListeningChild("protected-service", "bench/sample-service.ts", sampleEnv(serviceB.baseUrl));
      progress(`sample protected service ${sample.baseUrl} (pid ${sample.pid}) following B's change stream`);
    }

    // ---- rounds
    const perRound = Math.ceil(options.invalidationReps / options.rounds);
    const perPropagationRound = Math.ceil(options.propagationReps / options.rounds);
    const n = scenarios.length;
    for (let round = 0; round < options.rounds; round++) {
      const shift = n ? (round * Math.ceil(n / options.rounds)) % n : 0;
      const order = [...scenarios.slice(shift), ...scenarios.slice(0, shift)];
      progress(
        `round ${round + 1}/${options.rounds}: ${order.map((s) => s.key).join(", ")}${serviceB && wants("invalidation") ? ", invalidation" : ""}${sample ? ", propagation" : ""}`,
      );
      for (const [position, s] of order.entries()) {
        const died = s.server.exitReason() ?? serviceB?.exitReason();
        if (died) throw new Error(`${died} (at ${new Date().toISOString()})\n${s.server.stderr()}`);
        // Round 1 warms up 3× longer: the first load a process sees also compiles its hot code.
        const warmupS = options.warmupS * (round === 0 && !options.quick ? 3 : 1);
        const result = await loadgen.run({
          job: s.job,
          warmupS,
          durationS: options.durationS,
          expected: s.expected,
          serverPid: s.server.pid,
        });
        const f = roundFigures(round, position, s.expected, result);
        const list = figures.get(s.key) ?? [];
        list.push(f);
        figures.set(s.key, list);
        progress(
          `  ${s.key.padEnd(20)} ${fmtRate(f.okPerSecond).padStart(6)} req/s  p50 ${fmtMs(f.p50Ms)} ms  p99 ${fmtMs(f.p99Ms)} ms  errors ${f.errors}` +
            `  CPU ${f.cpuMicrosPerRequest === null ? "-" : f.cpuMicrosPerRequest.toFixed(0)} µs/req (server ${f.serverCpuPercentOfCore?.toFixed(0) ?? "-"}% of a core, generator ${f.loadgenCpuPercentOfCore.toFixed(0)}%)` +
            (f.errors ? `  statuses ${JSON.stringify(f.statuses)} ${JSON.stringify(f.transportErrorKinds)}` : ""),
        );
      }
      if (serviceA && serviceB && victim && wants("invalidation")) {
        const reps = Math.min(perRound, options.invalidationReps - invalidationSamples.length);
        for (let i = 0; i < reps; i++)
          invalidationSamples.push(
            await measureInvalidationOnce(serviceA.baseUrl, readOn(serviceB.baseUrl), adminToken, victim),
          );
        const mine = invalidationSamples.slice(-reps);
        if (reps > 0) {
          progress(
            `  invalidation: ${mine.filter((s) => s.refusedWhenAnswered).length}/${reps} refused on B before the rotate answer; ` +
              `B refusing from ${mine.map((s) => (s.delayMs === null ? "never" : s.delayMs.toFixed(1))).join(", ")} ms relative to it`,
          );
        }
      }
      if (serviceA && sample && propagationVictim) {
        const probe = {
          url: `${sample.baseUrl}/trips`,
          tokenParams: { resource: SAMPLE_AUDIENCE },
          name: "the sample service",
        };
        const reps = Math.min(perPropagationRound, options.propagationReps - propagationSamples.length);
        for (let i = 0; i < reps; i++)
          propagationSamples.push(
            await measureInvalidationOnce(serviceA.baseUrl, probe, adminToken, propagationVictim),
          );
        if (reps > 0)
          progress(
            `  propagation: the sample service refusing from ${propagationSamples
              .slice(-reps)
              .map((x) => (x.delayBoundsMs === null ? "never" : x.delayBoundsMs[1].toFixed(1)))
              .join(", ")} ms after the rotate answer`,
          );
      }
      if (serviceA) rssAfterRound.push(rssBytes(serviceA.pid) ?? NaN);
    }
    if (serviceA && resourceServer && wants("verifier-local")) {
      const clients = seededClients;
      const tokens = await inParallel(VERIFIER_TOKENS, 6, (i) =>
        issueRest(serviceA!.baseUrl, clients[i % clients.length]!, { resource: SAMPLE_AUDIENCE }),
      );
      // One core's figures: start when the work the load left behind (autovacuum, audit flushes) is done.
      const quiet = await quietMachine(0.15, 60_000);
      progress(
        `  verifier-local: machine ${quiet.quiet ? "quiet" : "still busy"} after ${(quiet.waitedMs / 1000).toFixed(0)} s (${quiet.busyCores.toFixed(2)} cores busy)`,
      );
      const bound = await issueBoundRest(serviceA.baseUrl, clients[0]!, SAMPLE_AUDIENCE);
      verifierLocal = await runVerifierLocal(sampleEnv(serviceA.baseUrl), tokens, { ...bound, bearer: tokens[0]! });
      progress(
        `  verifier-local: ${verifierLocal.rounds
          .map(
            (r) => `bare ${fmtRate(r.bare)}/s, first sight ${fmtRate(r.firstSight)}/s, cached ${fmtRate(r.cached)}/s`,
          )
          .join("; ")}`,
      );
    }
    if (loadgen && scalingSkipped === undefined) {
      // Alone on the machine: the other scenarios' servers would only idle, but they are not part of it.
      await stopAllServers();
      scalingBackend = createBackend(false);
      scaling = await scalingRun(loadgen, options, scalingBackend, scalingInstances);
    }
  } catch (error) {
    if (options.only.has("scaling") && !scaling) scalingSkipped ??= "the run aborted";
    problems.push(`bench aborted: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    // Read the logs before teardown deletes them.
    for (const s of [serviceA, serviceB, ...scalingInstances])
      if (s)
        logs.push([
          s.name,
          await s.logSummary().catch(() => ({ bytes: 0, lines: 0, warn: 0, error: 0, samples: [], refusals: {} })),
        ]);
    await cleanup();
  }
  if (interrupted) return 130;

  // ---- report
  const summaries = summarise(
    scenarios.map((s) => ({
      key: s.key,
      title: s.title,
      kind: s.kind,
      face: s.face,
      server: s.server.name,
      answered: s.answered,
      expected: s.expected,
      ...(s.tokensPerRequest ? { tokensPerRequest: s.tokensPerRequest } : {}),
    })),
    figures,
  );
  const invalidation = summariseInvalidation(invalidationSamples, invalidationSkipped);
  const propagation = summarisePropagation(propagationSamples, propagationSkipped);
  const verifierLocalSummary = summariseVerifierLocal(verifierLocal, verifierLocalSkipped);
  const goals = judgeGoals(
    summaries,
    invalidation,
    { rssAfterRoundBytes: rssAfterRound.filter(Number.isFinite) },
    options.connections,
    { propagation, verifierLocal: verifierLocalSummary },
    scaling,
  );
  const cpus = os.cpus();
  const results = {
    service: "auth-api-user-service",
    date: new Date(started).toISOString(),
    wallClockSeconds: Math.round((Date.now() - started) / 1000),
    commit: gitCommit(),
    machine: {
      cpus: cpus.length,
      cpuModel: cpus[0]?.model.trim() ?? "unknown",
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
      loadAverageAtStart: loadAverage,
      loadAverageAtEnd: os
        .loadavg()
        .map((n) => n.toFixed(2))
        .join(" "),
    },
    options: {
      durationS: options.durationS,
      warmupS: options.warmupS,
      rounds: options.rounds,
      connections: options.connections,
      grpcChannels: options.grpcChannels,
      clients: options.clients,
      invalidationRepetitions: options.invalidationReps,
      propagationRepetitions: options.propagationReps,
      scenarios: [...options.only],
      logLevel: options.logLevel,
      backend: options.embedded
        ? "embedded PGlite + in-process Redis stand-in"
        : "Postgres + Redis (fresh schema and key prefix)",
      quick: options.quick,
    },
    setup: {
      service: "node --import tsx src/main.ts (instances A and B), LOG_LEVEL to a file",
      baselines:
        "node --import tsx bench/baselines/<name>.ts, no logging; each same-guarantees route on its own Postgres schema and Redis key prefix",
      loadGenerator: "node --import tsx bench/loadgen.ts (autocannon; grpc-js closed loop), a separate process",
      cpu: "server process tree utime+stime (+cutime+cstime) from /proc over the measured window, all threads included",
    },
    scenarios: summaries,
    invalidation,
    propagation: { ...propagation, samples: propagationSamples },
    verifierLocal: { ...verifierLocalSummary, perRound: verifierLocal?.rounds ?? [] },
    memory: { serviceRssAfterRoundBytes: rssAfterRound },
    scaling: scaling ?? {
      cores: cpus.length,
      durationS: options.durationS,
      warmupS: 0,
      load: "",
      steps: [],
      skipped: scalingSkipped,
    },
    goals,
    serviceLogs: Object.fromEntries(logs),
    problems,
  };

  const out: string[] = [];
  out.push(
    `Benchmark of ${results.service} at ${results.commit} — ${results.date} (${results.wallClockSeconds} s)`,
    `machine: ${results.machine.cpus} × ${results.machine.cpuModel}, node ${results.machine.node}, load average at start ${loadAverage}, at end ${results.machine.loadAverageAtEnd}`,
    `load: ${options.connections} connections (HTTP/1.1, autocannon) or calls in flight on ${options.grpcChannels} HTTP/2 channels (grpc-js), ${options.clients} clients round-robin; ` +
      `${options.rounds} round(s) of ${options.warmupS} s warm-up${options.quick ? "" : ` (${3 * options.warmupS} s in round 1)`} + ${options.durationS} s per scenario, rotated order; the generator is its own process`,
    "",
    scenarioTable(summaries),
    "",
    "req/s, p50, p99, CPU: medians over rounds; spread: ±half the range of req/s over rounds; ÷ baseline: median of same-round req/s ratios;",
    "CPU µs/req: the server's process-tree CPU (all threads) per answered request; CPU × <baseline>: ratio to that baseline's, same round;",
    `${BASELINE_LABEL["same-guarantees-route"]}: the same-guarantees route (the minimal token route + one Redis admission per request + batched Postgres audit); ` +
      `${BASELINE_LABEL["same-guarantees-grpc"]}: the same work served by grpc-js's own gRPC server.`,
    invalidationLine(invalidation),
    ...protectedServicesLines(propagation, verifierLocalSummary),
    credentialRatiosLine(goals, verifierLocalSummary),
    ...(scaling
      ? [scalingLine(scaling), scalingTable(scaling), scalingLimit(scaling)]
      : [`scaling: not measured (${scalingSkipped})`]),
    "",
    "goals:",
    goalsTable(goals),
  );
  for (const [name, l] of logs) out.push("", ...logLine(name, l));
  for (const p of problems) out.push(`problem: ${p}`);
  process.stdout.write(options.json ? `${JSON.stringify(results, null, 2)}\n` : `${out.join("\n")}\n`);
  if (options.out && problems.length === 0) {
    fs.writeFileSync(options.out, `${JSON.stringify(results, null, 2)}\n`);
    progress(`wrote ${path.relative(process.cwd(), options.out) || options.out}`);
  } else if (options.out) progress(`not writing ${options.out}: the run had problems`);
  if (options.markdown && problems.length === 0) {
    writeLatestRun(options.markdown, results);
    progress(`wrote the latest run into ${path.relative(process.cwd(), options.markdown) || options.markdown}`);
    if (options.scalingDoc) {
      writeScaling(options.scalingDoc, results);
      progress(`wrote the scaling figures into ${path.relative(process.cwd(), options.scalingDoc)}`);
    }
  } else if (options.markdown) progress(`not writing ${options.markdown}: the run had problems`);
  if (problems.length > 0) return 1;
  return options.failOnGoals && goals.some((g) => g.met === false) ? 1 : 0;
}

/**
 * scim-filtered-list: a company with SCIM_USERS users, created through SCIM itself (POST
 * /v2/scim/v2/Users, 16 in flight), then two loads on it: an `eq` filter on userName and a `sw`
 * filter matching 10 users, each with request variants spread over the company.
 */
/**
 * The same-guarantees gRPC route: its answer checked over grpc-js (a token verified against its
 * JWKS, a wrong secret UNAUTHENTICATED), then loaded as grpc-issuance is.
 */
async function sameGuaranteesGrpcScenario(
  server: ServerProcess,
  clients: readonly Credentials[],
  options: Options,
): Promise<LoadScenario> {
  const target = server.grpcTarget;
  if (!target) throw new Error("same-guarantees-grpc announced no gRPC address");
  const c = clients[0]!;
  const [probe] = grpcAuthClients(repoRoot, target, 1);
  const [answer, wrong] = await Promise.all([
    grpcIssue(probe!, { grantType: "client_credentials", clientId: c.clientId, clientSecret: c.clientSecret }),
    grpcIssue(probe!, { grantType: "client_credentials", clientId: c.clientId, clientSecret: `${c.clientSecret}x` }),
  ]).finally(() => probe!.close());
  if (answer.status !== "OK" || !answer.accessToken)
    throw new Error(`same-guarantees-grpc FetchOauth2Token answered ${answer.status}`);
  if (wrong.status !== "UNAUTHENTICATED")
    throw new Error(`same-guarantees-grpc answered a wrong secret with ${wrong.status}`);
  const verified = await verifyJwt(answer.accessToken, `${server.baseUrl}/jwks`, {
    issuer: "http://same-guarantees-grpc.bench.invalid",
    subject: c.clientId,
  });
  return {
    key: "same-guarantees-grpc",
    title: "same-guarantees gRPC route, grpc-js server (baseline)",
    kind: "baseline",
    face: "gRPC",
    server,
    job: {
      kind: "grpc",
      target,
      channels: options.grpcChannels,
      concurrency: options.connections,
      requests: clients.map((x) => ({
        grantType: "client_credentials",
        clientId: x.clientId,
        clientSecret: x.clientSecret,
      })),
    },
    expected: ["OK"],
    answered: `OK accessToken: ${verified} (a wrong secret: UNAUTHENTICATED)`,
  };
}

/** The same-guarantees read: a token per baseline client from the route, each reading GET /api-users?limit=10. */
async function sameGuaranteesReadScenario(
  server: ServerProcess,
  clients: readonly Credentials[],
  connections: number,
): Promise<LoadScenario> {
  const tokens = await inParallel(clients.length, 6, async (i) => {
    const c = clients[i]!;
    const answer = await request(`${server.baseUrl}/token`, {
      headers: FORM,
      body: form({ grant_type: "client_credentials", client_id: c.clientId, client_secret: c.clientSecret }),
    });
    const token = answer.status === 200 ? answer.json<{ access_token?: string }>().access_token : undefined;
    if (!token) throw new Error(`same-guarantees route /token answered ${answer.status}: ${answer.text.slice(0, 300)}`);
    return token;
  });
  const read = (token: string) =>
    request(`${server.baseUrl}/api-users?limit=10`, { headers: { authorization: `Bearer ${token}` } });
  const answer = await read(tokens[0]!);
  const list = answer.status === 200 ? answer.json<{ apiUsers?: unknown[]; totalCount?: number }>() : undefined;
  if (!list || !Array.isArray(list.apiUsers) || list.apiUsers.length !== Math.min(10, clients.length))
    throw new Error(`same-guarantees read answered ${answer.status}: ${answer.text.slice(0, 300)}`);
  const forged = await read(`${tokens[0]!.slice(0, -4)}AAAA`);
  if (forged.status !== 401) throw new Error(`same-guarantees read took a forged token: ${forged.status}`);
  return {
    key: "same-guarantees-read",
    title: "same-guarantees read (baseline)",
    kind: "baseline",
    face: "REST",
    server,
    job: {
      kind: "http",
      baseUrl: server.baseUrl,
      variants: tokens.map((t) => ({
        method: "GET",
        path: "/api-users?limit=10",
        headers: { authorization: `Bearer ${t}` },
      })),
      connections,
    },
    expected: ["200"],
    answered: `200 with ${list.apiUsers.length} of ${list.totalCount} API users (a forged signature: 401)`,
  };
}

/**
 * The resource-server scenarios: a resource server registered for RS_AUDIENCE, two tokens per
 * client for that audience, and the server introspecting them over REST (form credentials), over
 * gRPC one by one, and over gRPC in batches of RS_BATCH (each batch a different window of them).
 */
async function resourceServerScenarios(
  A: ServiceInstance,
  operatorToken: string,
  clients: readonly Credentials[],
  options: Options,
): Promise<LoadScenario[]> {
  const server = (await operator(A, operatorToken, "CreateResourceServer", {
    name: "bench gateway",
    audiences: [RS_AUDIENCE],
  })) as { clientId?: string; clientSecret?: string };
  if (!server.clientId || !server.clientSecret)
    throw new Error(`OperatorService.CreateResourceServer returned ${JSON.stringify(server)}`);
  const credentials = { clientId: server.clientId, clientSecret: server.clientSecret };
  const tokens = await inParallel(clients.length * 2, 6, (i) =>
    issueRest(A.baseUrl, clients[i % clients.length]!, { resource: RS_AUDIENCE }),
  );
  const formOf = (token: string) =>
    form({ token, client_id: credentials.clientId, client_secret: credentials.clientSecret });
  const variants: HttpRequestSpec[] = tokens.map((token) => ({
    method: "POST",
    path: "/v2/auth/introspect",
    headers: FORM,
    body: formOf(token),
  }));
  const answer = await request(`${A.baseUrl}/v2/auth/introspect`, { headers: FORM, body: formOf(tokens[0]!) });
  const introspected = answer.status === 200 ? answer.json<{ active?: boolean; aud?: string[] }>() : undefined;
  if (introspected?.active !== true || introspected.aud?.[0] !== RS_AUDIENCE)
    throw new Error(
      `POST /v2/auth/introspect (resource server) answered ${answer.status}: ${answer.text.slice(0, 300)}`,
    );
  const host = new URL(A.baseUrl).host;
  const [probe] = grpcAuthClients(repoRoot, host, 1);
  const single = tokens.map((token) => ({ token, ...credentials }));
  const batches = Array.from({ length: 20 }, (_, k) => ({
    tokens: Array.from({ length: RS_BATCH }, (_, i) => tokens[(k * 7 + i) % tokens.length]!),
    ...credentials,
  }));
  try {
    for (const [method, request] of [
      ["introspectToken", single[0]!],
      ["introspectTokens", batches[0]!],
    ] as const) {
      const checked = await grpcCall(probe!, method, request);
      if (checked.status !== "OK") throw new Error(`gRPC ${method} (resource server) answered ${checked.status}`);
    }
  } finally {
    probe!.close();
  }
  const grpcJob = (method: "introspectToken" | "introspectTokens", requests: readonly object[]): LoadJob => ({
    kind: "grpc",
    target: host,
    channels: options.grpcChannels,
    concurrency: options.connections,
    method,
    requests,
  });
  return [
    {
      key: "rs-introspection",
      title: "introspection by a resource server, REST (service)",
      kind: "service",
      face: "REST",
      server: A,
      job: { kind: "http", baseUrl: A.baseUrl, variants, connections: options.connections },
      expected: ["200"],
      answered: `200 {"active":true,"aud":["${RS_AUDIENCE}"],…}`,
    },
    {
      key: "rs-introspection-grpc",
      title: "introspection by a resource server, gRPC (service)",
      kind: "service",
      face: "gRPC",
      server: A,
      job: grpcJob("introspectToken", single),
      expected: ["OK"],
      answered: "OK active: true",
    },
    {
      key: "rs-introspection-batch",
      title: `batch introspection, ${RS_BATCH} tokens per call, gRPC (service)`,
      kind: "service",
      face: "gRPC",
      server: A,
      job: grpcJob("introspectTokens", batches),
      expected: ["OK"],
      tokensPerRequest: RS_BATCH,
      answered: `OK ${RS_BATCH} results, every one active`,
    },
  ];
}

/**
 * As Entra ID and Okta provision: a 429 waits its Retry-After and tries again. The per-principal
 * budget stays on: a seeder (or the check right after it) faster than the budget is refused, and
 * the service's limits are not raised for the bench.
 */
async function afterRetryAfter(send: () => ReturnType<typeof request>): ReturnType<typeof request> {
  let answer = await send();
  for (let retries = 0; answer.status === 429 && retries < 30; retries++) {
    await new Promise((r) => setTimeout(r, 1000 * Math.max(1, Number(answer.headers["retry-after"] ?? 1))));
    answer = await send();
  }
  return answer;
}

async function scimScenarios(A: ServiceInstance, operatorToken: string, connections: number): Promise<LoadScenario[]> {
  const tmc = (await operator(A, operatorToken, "CreateTmc", { name: "SCIM bench TMC", maxApiUsers: 10 })) as {
    tmcId?: string;
  };
  const company = (await operator(A, operatorToken, "CreateCompany", {
    tmcId: tmc.tmcId,
    name: "SCIM bench company",
  })) as { orgId?: string };
  const scimUser = (await operator(A, operatorToken, "CreateApiUser", {
    tmcId: tmc.tmcId,
    orgId: company.orgId,
    role: "COMPANY_ADMIN",
    credentialType: "SCIM_TOKEN",
  })) as { scimToken?: string };
  if (!scimUser.scimToken)
    throw new Error(`OperatorService.CreateApiUser (SCIM_TOKEN) returned ${JSON.stringify(scimUser)}`);
  const headers = { authorization: `Bearer ${scimUser.scimToken}`, "content-type": "application/scim+json" };
  const userName = (i: number) => `u${String(i).padStart(5, "0")}@scim-bench.example`;
  const started = Date.now();
  await inParallel(SCIM_USERS, 16, async (i) => {
    const body = JSON.stringify({
      schemas: ["urn:ietf:params:scim:schemas:core:2.0:User"],
      userName: userName(i),
      name: { givenName: `Given${i}`, familyName: `Family${i}` },
      externalId: `ext-${i}`,
      active: true,
    });
    const answer = await afterRetryAfter(() => request(`${A.baseUrl}/v2/scim/v2/Users`, { headers, body }));
    if (answer.status !== 201) throw new Error(`SCIM create answered ${answer.status}: ${answer.text.slice(0, 300)}`);
  });
  progress(`seeded: a company with ${SCIM_USERS} users over SCIM in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const get = { authorization: headers.authorization };
  const path = (filter: string) => `/v2/scim/v2/Users?filter=${encodeURIComponent(filter)}`;
  const eqVariants: HttpRequestSpec[] = Array.from({ length: 200 }, (_, k) => ({
    method: "GET",
    path: path(`userName eq "${userName((k * 49) % SCIM_USERS)}"`),
    headers: get,
  }));
  // "u0123" matches u01230 … u01239: 10 users.
  const swVariants: HttpRequestSpec[] = Array.from({ length: 200 }, (_, k) => ({
    method: "GET",
    path: path(`userName sw "u${String((k * 7) % 1000).padStart(4, "0")}"`),
    headers: get,
  }));
  const check = async (variant: HttpRequestSpec, expected: number) => {
    const answer = await afterRetryAfter(() => request(`${A.baseUrl}${variant.path}`, { headers: get }));
    const list = answer.status === 200 ? answer.json<{ totalResults?: number; Resources?: unknown[] }>() : undefined;
    if (list?.totalResults !== expected || list.Resources?.length !== expected)
      throw new Error(`GET ${variant.path} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
    return `200 ListResponse with ${expected} of ${SCIM_USERS} users`;
  };
  const scimConnections = Math.min(connections, SCIM_CONNECTIONS);
  return [
    {
      key: "scim-filtered-list",
      title: `SCIM userName eq, ${SCIM_USERS} users (service)`,
      kind: "service",
      face: "REST",
      server: A,
      job: { kind: "http", baseUrl: A.baseUrl, variants: eqVariants, connections: scimConnections },
      expected: ["200"],
      answered: await check(eqVariants[1]!, 1),
    },
    {
      key: "scim-filtered-list-sw",
      title: `SCIM userName sw, ${SCIM_USERS} users (service)`,
      kind: "service",
      face: "REST",
      server: A,
      job: { kind: "http", baseUrl: A.baseUrl, variants: swVariants, connections: scimConnections },
      expected: ["200"],
      answered: await check(swVariants[1]!, 10),
    },
  ];
}

/**
 * air-credits-list: a company with AIR_CREDITS unused credits (imported AIR_CREDITS_PER_IMPORT at
 * a time through OperatorService.ImportAirCredits, 3 requests in flight: each request is one
 * transaction and must fit BODY_LIMIT_BYTES), then filtered list pages read by a TMC admin.
 */
async function airCreditScenario(
  A: ServiceInstance,
  operatorToken: string,
  connections: number,
): Promise<LoadScenario> {
  const tmc = (await operator(A, operatorToken, "CreateTmc", { name: "Air-credit bench TMC", maxApiUsers: 10 })) as {
    tmcId?: string;
  };
  const company = (await operator(A, operatorToken, "CreateCompany", {
    tmcId: tmc.tmcId,
    name: "Air-credit bench company",
  })) as { orgId?: string };
  const admin = (await operator(A, operatorToken, "CreateApiUser", { tmcId: tmc.tmcId, role: "TMC_ADMIN" })) as {
    clientId?: string;
    clientSecret?: string;
  };
  if (!company.orgId || !admin.clientId || !admin.clientSecret)
    throw new Error("air-credits-list: could not create its tenant");
  const airlines = ["AA", "UA", "DL", "BA", "LH", "AF", "AC", "WN"];
  const sources = ["SABRE", "AMADEUS", "NDC", "TRAVEL_FUSION"];
  const accesses = ["CARD_ACCESS_CENTRAL", "CARD_ACCESS_PERSONAL", "CARD_ACCESS_CORPORATE"];
  const today = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
  const dayAt = (days: number) => new Date(today + days * 86_400_000).toISOString().slice(0, 10);
  const credit = (i: number) => ({
    ticketNumber: `9${String(i).padStart(12, "0")}`,
    airlineCode: airlines[i % airlines.length],
    totalFare: { amount: `${100 + (i % 900)}.${String(i % 100).padStart(2, "0")}`, currencyCode: "USD" },
    issueDate: { iso8601: dayAt(-30 - (i % 300)) },
    // About 5 % expired, 6 % used; the rest spread over two years. Attributes vary independently.
    expiryDate: { iso8601: dayAt(i % 19 === 0 ? -1 - (i % 30) : (i * 37) % 730) },
    pcc: `P${String(Math.floor(i / 7) % 20).padStart(2, "0")}`,
    source: sources[i % sources.length],
    status: i % 17 === 0 ? "USED" : "OPEN",
    fopLabel: `FOP label ${Math.floor(i / 3) % 10}`,
    fopCardAccessType: accesses[i % accesses.length],
    legalEntityName: `Legal entity ${Math.floor(i / 11) % 5}`,
    email: `traveler${i % 500}@air-bench.example`,
  });
  const started = Date.now();
  const batches = Math.ceil(AIR_CREDITS / AIR_CREDITS_PER_IMPORT);
  await inParallel(batches, 3, async (b) => {
    const credits = Array.from(
      { length: Math.min(AIR_CREDITS_PER_IMPORT, AIR_CREDITS - b * AIR_CREDITS_PER_IMPORT) },
      (_, k) => credit(b * AIR_CREDITS_PER_IMPORT + k),
    );
    // An import is one transaction: on 503 (the database busy past its timeout) nothing was written, so retry.
    for (let attempt = 1; ; attempt++) {
      try {
        return await operator(A, operatorToken, "ImportAirCredits", { companyId: company.orgId, credits });
      } catch (error) {
        if (attempt >= 5 || !String(error).includes("answered 503")) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  });
  // One last import on a quiet database: it gathers the statistics a deployment's autovacuum
  // would have by then (the concurrent imports' attempts may have timed out).
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  await operator(A, operatorToken, "ImportAirCredits", { companyId: company.orgId, credits: [credit(0)] });
  progress(
    `seeded: a company with ${AIR_CREDITS} air credits through ImportAirCredits in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  const token = await issueRest(A.baseUrl, { clientId: admin.clientId, clientSecret: admin.clientSecret });
  const headers = { ...JSON_TYPE, authorization: `Bearer ${token}` };
  const variants: HttpRequestSpec[] = Array.from({ length: 200 }, (_, k) => ({
    method: "POST",
    path: "/v3/air/company-transferable-unused-credits/list",
    headers,
    body: JSON.stringify({
      companyId: { id: company.orgId },
      offset: (k % 3) * 100,
      companyCreditFilter: {
        selectedAirlines: [airlines[k % 7], airlines[(k + 3) % 7]],
        expiryDateRange: {
          expiryDateStart: { iso8601: dayAt(k % 300) },
          expiryDateEnd: { iso8601: dayAt((k % 300) + 180) },
        },
        pccs: [
          `P${String(k % 20).padStart(2, "0")}`,
          `P${String((k + 5) % 20).padStart(2, "0")}`,
          `P${String((k + 10) % 20).padStart(2, "0")}`,
        ],
      },
    }),
  }));
  const probe = variants[0]!;
  const answer = await request(`${A.baseUrl}${probe.path}`, { headers, body: probe.body! });
  const page =
    answer.status === 200
      ? answer.json<{
          unusedCreditInfos?: unknown[];
          paginationParams?: { totalRecords?: number };
          companyTransferablePccs?: unknown[];
        }>()
      : undefined;
  if (
    !page?.unusedCreditInfos?.length ||
    !page.paginationParams?.totalRecords ||
    page.companyTransferablePccs?.length !== 20
  ) {
    throw new Error(`air-credits-list: the list answered ${answer.status}: ${answer.text.slice(0, 300)}`);
  }
  return {
    key: "air-credits-list",
    title: `air-credit list, filtered, ${AIR_CREDITS} credits (service)`,
    kind: "service",
    face: "REST",
    server: A,
    job: { kind: "http", baseUrl: A.baseUrl, variants, connections: Math.min(connections, AIR_CREDITS_CONNECTIONS) },
    expected: ["200"],
    answered: `200 with ${page.unusedCreditInfos.length} of ${page.paginationParams.totalRecords} matching credits`,
  };
}

/**
 * audit-volume: a tenant with AUDIT_CLIENTS API users (through OperatorService) whose
 * trail holds AUDIT_EVENTS TOKEN_ISSUED events of the last AUDIT_DAYS days (ids rising with time, as the
 * token endpoint writes them), written with SQL into the
 * service's schema (the token endpoint at the benchmarked rate would take about 7 minutes), then
 * ANALYZEd as autovacuum would have. One real token per user goes through the token endpoint, so
 * the users' last-token times are the audit flush's. Read by the operator as a console would.
 */
async function auditVolumeScenarios(
  A: ServiceInstance,
  operatorToken: string,
  schema: string,
): Promise<LoadScenario[]> {
  const tmc = (await operator(A, operatorToken, "CreateTmc", {
    name: "Audit-volume bench TMC",
    maxApiUsers: AUDIT_CLIENTS,
  })) as { tmcId?: string };
  if (!tmc.tmcId) throw new Error("audit-volume: could not create its tenant");
  const users = await inParallel(AUDIT_CLIENTS, 4, async () => {
    const created = (await operator(A, operatorToken, "CreateApiUser", { tmcId: tmc.tmcId, role: "TMC_ADMIN" })) as {
      clientId?: string;
      clientSecret?: string;
    };
    if (!created.clientId || !created.clientSecret) throw new Error("audit-volume: could not create an API user");
    return { clientId: created.clientId, clientSecret: created.clientSecret };
  });
  const started = Date.now();
  const db = knexPkg.knex({
    client: "pg",
    connection: BENCH_DATABASE_URL,
    searchPath: [schema],
    pool: { min: 1, max: 1 },
  });
  try {
    const slice = 100_000;
    for (let from = 1; from <= AUDIT_EVENTS; from += slice)
      await db.raw(
        `insert into audit_events (occurred_at, action, outcome, actor, tmc_id, target_client_id, debug_identifier, details)
         select now() - interval '1 day' * ? * (1 - i::float8 / ?), 'TOKEN_ISSUED', 'SUCCESS', c, ?::uuid, c,
                'bench-' || i, '{"grantType":"client_credentials"}'::jsonb
           from generate_series(?::int, ?::int) as i, lateral (select (?::text[])[1 + i % ?] as c) as client`,
        [
          AUDIT_DAYS,
          AUDIT_EVENTS,
          tmc.tmcId,
          from,
          Math.min(AUDIT_EVENTS, from + slice - 1),
          `{${users.map((u) => u.clientId).join(",")}}`,
          AUDIT_CLIENTS,
        ],
      );
    await db.raw("analyze audit_events");
  } finally {
    await db.destroy();
  }
  progress(
    `seeded: ${AUDIT_EVENTS} TOKEN_ISSUED audit events of one tenant with SQL in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  for (const user of users) await issueRest(A.baseUrl, user);
  const headers = { ...JSON_TYPE, authorization: `Bearer ${operatorToken}` };
  const rpc = (method: string, body: object): HttpRequestSpec => ({
    method: "POST",
    path: `/travel.operator.v1.OperatorService/${method}`,
    headers,
    body: JSON.stringify(body),
  });
  const sinceHoursAgo = (h: number) => new Date(Date.now() - h * 3_600_000).toISOString();
  const byAction = Array.from({ length: 24 }, (_, h) =>
    rpc("ListAuditEvents", { tmcId: tmc.tmcId, actions: ["TOKEN_ISSUED"], since: sinceHoursAgo(h + 1), limit: 50 }),
  );
  const byClient = users.map((u) => rpc("ListAuditEvents", { tmcId: tmc.tmcId, clientId: u.clientId, limit: 50 }));
  // A past window's newest page: `until` 6-29 days back, where 20-97 % of the trail is newer.
  const untils = Array.from({ length: 24 }, (_, d) => new Date(started - (d + 6) * 86_400_000));
  const byUntil = untils.map((until) =>
    rpc("ListAuditEvents", { tmcId: tmc.tmcId, until: until.toISOString(), limit: 50 }),
  );
  const apiUsers = [rpc("ListApiUsers", { tmcId: tmc.tmcId, limit: 50 })];
  // Checked through the same protocol: full pages of the seeded events, and every user's last
  // token time (the flush runs every 250 ms) no older than the token just issued.
  const ask = async (spec: HttpRequestSpec) => {
    const answer = await request(`${A.operatorUrl}${spec.path}`, { headers, body: spec.body!, timeoutMs: 30_000 });
    if (answer.status !== 200)
      throw new Error(`audit-volume: ${spec.path} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
    return answer.json<Record<string, unknown>>();
  };
  const actionPage = (await ask(byAction[0]!)) as { events?: Array<{ action?: string }> };
  const clientPage = (await ask(byClient[0]!)) as { events?: Array<{ actor?: string; targetClientId?: string }> };
  if (actionPage.events?.length !== 50 || clientPage.events?.length !== 50)
    throw new Error("audit-volume: the audit search did not answer full pages of the seeded events");
  if (!clientPage.events.every((e) => e.actor === users[0]!.clientId || e.targetClientId === users[0]!.clientId))
    throw new Error("audit-volume: the client filter answered another client's events");
  // The window's newest events: all before `until`, the first within two seed intervals of it.
  const seedIntervalMs = (AUDIT_DAYS * 86_400_000) / AUDIT_EVENTS;
  for (const i of [0, untils.length - 1]) {
    const until = untils[i]!;
    const page = (await ask(byUntil[i]!)) as {
      events?: Array<{ occurredAt?: string }>;
      nextPageToken?: string;
    };
    const times = (page.events ?? []).map((e) => Date.parse(e.occurredAt ?? ""));
    if (
      times.length !== 50 ||
      !page.nextPageToken ||
      !times.every((t) => t < until.getTime()) ||
      until.getTime() - times[0]! > 2 * seedIntervalMs
    )
      throw new Error(
        `audit-volume: the search with until ${until.toISOString()} did not answer the window's newest page: ${JSON.stringify(page).slice(0, 300)}`,
      );
  }
  let listed: { apiUsers?: Array<{ lastTokenIssuedAt?: string }> } = {};
  for (let attempt = 0; attempt < 20; attempt++) {
    listed = (await ask(apiUsers[0]!)) as typeof listed;
    if (
      listed.apiUsers?.length === AUDIT_CLIENTS &&
      listed.apiUsers.every((u) => Date.parse(u.lastTokenIssuedAt ?? "") > started)
    )
      break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  if (!listed.apiUsers?.every((u) => Date.parse(u.lastTokenIssuedAt ?? "") > started))
    throw new Error(
      `audit-volume: ListApiUsers did not show the tokens just issued: ${JSON.stringify(listed).slice(0, 300)}`,
    );
  const scenario = (
    key: (typeof AUDIT_VOLUME_SCENARIOS)[number],
    title: string,
    variants: HttpRequestSpec[],
    answered: string,
  ): LoadScenario => ({
    key,
    title,
    kind: "service",
    face: "REST",
    server: A,
    job: {
      kind: "http",
      baseUrl: A.operatorUrl,
      variants,
      connections: AUDIT_VOLUME_READS.find((read) => read.key === key)!.connections,
    },
    expected: ["200"],
    answered,
  });
  return [
    scenario(
      "audit-search-action",
      `operator audit search, TOKEN_ISSUED since 1-24 h, ${AUDIT_EVENTS} events (service)`,
      byAction,
      "200 with 50 events",
    ),
    scenario(
      "audit-search-client",
      `operator audit search by client id, ${AUDIT_EVENTS} events (service)`,
      byClient,
      "200 with 50 events of the client",
    ),
    scenario(
      "audit-search-until",
      `operator audit search with until 6-29 days back, ${AUDIT_EVENTS} events (service)`,
      byUntil,
      "200 with the 50 newest events before until",
    ),
    scenario(
      "operator-api-user-list",
      `operator api-user list with last token times, ${AUDIT_EVENTS} events (service)`,
      apiUsers,
      `200 with ${AUDIT_CLIENTS} users, each with its last token time`,
    ),
  ];
}

/** Instance `n` of the scaling scenario answers each request of the mix (tokens of instance 1 included). */
async function checkScalingInstance(
  instance: ServiceInstance,
  n: number,
  issuer: string,
  clients: readonly Credentials[],
  tokens: readonly string[],
): Promise<void> {
  const c = clients[n % clients.length]!;
  const token = await issueRest(instance.baseUrl, c);
  await verifyJwt(token, `${instance.baseUrl}/.well-known/jwks.json`, { issuer, subject: c.clientId });
  const introspected = await request(`${instance.baseUrl}/v2/auth/introspect`, {
    headers: FORM,
    body: form({ token: tokens[0]!, client_id: clients[0]!.clientId, client_secret: clients[0]!.clientSecret }),
  });
  if (introspected.status !== 200 || introspected.json<{ active?: boolean }>().active !== true)
    throw new Error(
      `scaling: introspection on instance ${n} answered ${introspected.status}: ${introspected.text.slice(0, 300)}`,
    );
  const listed = await request(`${instance.baseUrl}/v2/api-users?limit=10`, {
    headers: { authorization: `Bearer ${tokens[0]}` },
  });
  if (listed.status !== 200 || !listed.json<{ apiUsers?: unknown[] }>().apiUsers?.length)
    throw new Error(
      `scaling: GET /v2/api-users on instance ${n} answered ${listed.status}: ${listed.text.slice(0, 300)}`,
    );
  const [probe] = grpcAuthClients(repoRoot, new URL(instance.baseUrl).host, 1);
  const issued = await grpcIssue(probe!, {
    grantType: "client_credentials",
    clientId: c.clientId,
    clientSecret: c.clientSecret,
  }).finally(() => probe!.close());
  if (issued.status !== "OK")
    throw new Error(`scaling: gRPC FetchOauth2Token on instance ${n} answered ${issued.status}`);
}

/** The scaling mix over `instances`: REST connections and gRPC channels assigned to them round-robin. */
function scalingJob(
  instances: readonly ServiceInstance[],
  clients: readonly Credentials[],
  tokens: readonly string[],
  load: { restConnections: number; grpcConcurrency: number; grpcChannels: number },
): LoadJob {
  const n = instances.length;
  const restVariants: HttpRequestSpec[] = clients.flatMap((client, i) => [
    {
      method: "POST",
      path: "/v2/auth/oauth2-token",
      headers: FORM,
      body: form({
        grant_type: "client_credentials",
        client_id: client.clientId,
        client_secret: client.clientSecret,
      }),
    },
    {
      method: "POST",
      path: "/v2/auth/introspect",
      headers: FORM,
      body: form({ token: tokens[i]!, client_id: client.clientId, client_secret: client.clientSecret }),
    },
    { method: "GET", path: "/v2/api-users?limit=10", headers: { authorization: `Bearer ${tokens[i]!}` } },
  ]);
  return {
    kind: "mixed",
    parts: [
      {
        label: "REST",
        job: {
          kind: "http",
          baseUrl: instances.map((x) => x.baseUrl),
          variants: restVariants,
          connections: load.restConnections,
        },
      },
      {
        label: "gRPC",
        job: {
          kind: "grpc",
          target: instances.map((x) => new URL(x.baseUrl).host),
          // A whole number of channels per instance, so each gets the same share of the calls.
          channels: Math.ceil(load.grpcChannels / n) * n,
          concurrency: load.grpcConcurrency,
          requests: clients.map((x) => ({
            grantType: "client_credentials",
            clientId: x.clientId,
            clientSecret: x.clientSecret,
          })),
        },
      },
    ],
  };
}

/**
 * scaling: the built service started 1, then 2, … SCALING_INSTANCES times on one
 * schema, and at each count the same mixed load spread over the instances by the generator: REST
 * connections and gRPC channels assigned to them round-robin, as a balancer without affinity
 * would. Every new instance answers each request of the mix before the load (tokens verified
 * against its JWKS). CPU is read at the measured window's edges for each instance and for the
 * Postgres and Redis servers (their whole process trees: on a shared machine, everyone's work).
 */
async function scalingRun(
  loadgen: LoadGenerator,
  options: Options,
  backend: Backend,
  instances: ServiceInstance[],
): Promise<ScalingSummary> {
  progress(`scaling: building the service (tsc -p tsconfig.build.json) into ${backend.tmpDir}`);
  const buildStarted = Date.now();
  const buildDir = await buildService(backend);
  progress(`scaling: built in ${((Date.now() - buildStarted) / 1000).toFixed(1)} s`);
  const storage = await storageServerPids();
  if (!storage.postgres || !storage.redis)
    progress(
      `scaling: ${!storage.postgres ? "Postgres " : ""}${!storage.redis ? "Redis " : ""}not on this host: no CPU figure`,
    );
  const grpcConcurrency = Math.max(1, Math.round(options.connections / 4));
  const restConnections = Math.max(1, options.connections - grpcConcurrency);
  const warmupS = options.warmupS * (options.quick ? 1 : 3);
  const expected = ["200", "OK"];
  const issuer = backend.serviceEnv.TOKEN_ISSUER!;
  let clients: Credentials[] = [];
  let tokens: string[] = [];
  const steps: ScalingSummary["steps"] = [];
  for (let n = 1; n <= SCALING_INSTANCES; n++) {
    const instance = await startService(backend, { name: `scaling-${n}`, logLevel: options.logLevel, buildDir });
    instances.push(instance);
    progress(
      `scaling: instance ${n} ${instance.baseUrl} (pid ${instance.pid}, database=${instance.databaseKind}, redis=${instance.redisKind})`,
    );
    if (n === 1) {
      const seed = (await operator(instance, backend.operatorToken, "Seed", {})) as { tmcId?: string };
      if (!seed.tmcId) throw new Error(`scaling: OperatorService.Seed returned ${JSON.stringify(seed)}`);
      await operator(instance, backend.operatorToken, "SetTmcApiUserLimit", {
        tmcId: seed.tmcId,
        maxApiUsers: options.clients + 10,
      });
      clients = await createTmcAdmins(instance, backend.operatorToken, seed.tmcId, options.clients);
      tokens = await inParallel(clients.length, 6, (i) => issueRest(instance.baseUrl, clients[i]!));
    }
    await checkScalingInstance(instance, n, issuer, clients, tokens);
    const job = scalingJob(instances, clients, tokens, {
      restConnections,
      grpcConcurrency,
      grpcChannels: options.grpcChannels,
    });
    const result = await loadgen.run({
      job,
      warmupS,
      durationS: options.durationS,
      expected,
      serverPid: instances[0]!.pid,
      alsoMeasure: {
        ...Object.fromEntries(instances.map((x, i) => [`instance-${i + 1}`, x.pid])),
        ...(storage.postgres ? { postgres: storage.postgres } : {}),
        ...(storage.redis ? { redis: storage.redis } : {}),
      },
    });
    const step = scalingStep(n, expected, result, os.cpus().length);
    steps.push(step);
    const pct = (x: number | null) => (x === null ? "-" : x.toFixed(0));
    progress(
      `  ${n} instance(s): ${fmtRate(step.okPerSecond)} req/s  p50 ${fmtMs(step.p50Ms)} ms  p99 ${fmtMs(step.p99Ms)} ms  errors ${step.errors}` +
        `  CPU % of a core: instances ${step.instanceCpuPercentOfCore.map(pct).join("+")}, Postgres ${pct(step.postgresCpuPercentOfCore)},` +
        ` Redis ${pct(step.redisCpuPercentOfCore)}, generator ${pct(step.loadgenCpuPercentOfCore)}, machine ${pct(step.machineBusyPercentOfCore)}` +
        (step.errors ? `  statuses ${JSON.stringify(step.statuses)}` : ""),
    );
  }
  return {
    cores: os.cpus().length,
    durationS: options.durationS,
    warmupS,
    load:
      `${restConnections} REST connections (issuance, introspection, GET /v2/api-users?limit=10 in turn) and ` +
      `${grpcConcurrency} gRPC FetchOauth2Token calls in flight, ${clients.length} clients round-robin, spread over the instances by the generator (no balancer)`,
    steps,
  };
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
