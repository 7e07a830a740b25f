// The work the service's guarantees require on its token path, and nothing else — what the two
// same-guarantees baselines add to the minimal token route, whichever face serves it (the
// Fastify route, same-guarantees-route.ts; grpc-js's own server, same-guarantees-grpc.ts):
// - one Redis EVALSHA per request of the service's own admission script: the caller's credential
//   generation checked, an address point and a client point spent (a failure point for a wrong
//   secret), with the service's key layout, budgets and decisions (TokenRateLimiter) under the
//   process's own key prefix (BENCH_REDIS_KEY_PREFIX, never the service's);
// - every issued token an audit row in Postgres (the columns of the service's audit_events), in
//   the process's own throw-away schema (BENCH_AUDIT_SCHEMA), buffered and written as one
//   statement per 100 ms tick; the schema is dropped on close (and by the bench's teardown).
// Script, key names, budgets and the credential encoding are imported from src/ (domain and
// store modules only, not the composition root), so each exists once.
import crypto from "node:crypto";
import pg from "pg";
import { createClient, type RedisClientType } from "redis";
import { rateLimitsFromEnv } from "../../src/config/rate-limits.js";
import { TokenRateLimiter } from "../../src/domain/rate-limit/token-rate-limiter.js";
import { memoryBudgetCounters } from "../../src/store/memory/budget-counters.js";
import { CircuitBreaker } from "../../src/store/redis/circuit-breaker.js";
import { RedisGenerationCache } from "../../src/store/redis/generation-cache.js";
import { ADMIT_SCRIPT, admissionCall, admissionResult } from "../../src/store/redis/token-admission.js";
import { benchClients, type TokenRouteGuarantees } from "./common.js";

/** A same-guarantees baseline's storage and token-path guarantees, set up. */
export interface SameGuarantees extends Omit<TokenRouteGuarantees, "routes"> {
  readonly schema: string;
  /** The tenant every bench client belongs to (the audit rows' and the read's). */
  readonly tmcId: string;
  /** The service's generation cache over the process's key prefix (every client at generation 1). */
  readonly generations: RedisGenerationCache;
  /** The credential generation every client is held at. */
  readonly heldGeneration: number;
  /** The process's Postgres connection (the audit writer's). */
  readonly db: pg.Client;
  /** Runs before the rest of close (a read pool's end). */
  onClose(task: () => Promise<void>): void;
}

const setting = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (the bench passes it)`);
  return value;
};

// The service's answer to each admission: unknown (the store cannot vouch) would send it to Postgres.
const STATUS = { admitted: 200, "client-limited": 429, limited: 429, refused: 401, unknown: 503 } as const;

/** Connects to Redis and Postgres, creates the schema and holds every bench client at generation 1. */
export async function sameGuarantees(): Promise<SameGuarantees> {
  const [keyPrefix, schema] = [setting("BENCH_REDIS_KEY_PREFIX"), setting("BENCH_AUDIT_SCHEMA")];
  if (!/^bench_\w+$/.test(schema)) throw new Error(`BENCH_AUDIT_SCHEMA must be a bench_… schema, got "${schema}"`);

  // Every client held at generation 1, change 1, as the service's credential cache writes it.
  const redis: RedisClientType = createClient({ url: setting("BENCH_REDIS_URL") });
  await redis.connect();
  const held = { generation: 1, knownChange: 1 };
  const states = new Map(benchClients().map((c) => [c.clientId, { generation: 1, changeSeq: 1 }]));
  const breaker = new CircuitBreaker({ failureThreshold: 1, openMs: 1_000 }); // the cache's write needs one
  const generations = new RedisGenerationCache(redis, keyPrefix, 3600, breaker, 5_000);
  await generations.write(states, { to: 1, ifAtLeast: 0 });
  // The step-by-step counters (memory) are never used: every client is held, so each request takes the one trip.
  const limiter = new TokenRateLimiter(rateLimitsFromEnv(process.env), memoryBudgetCounters(keyPrefix), {
    async admit(request) {
      // The service's own EVALSHA, with its EVAL on NOSCRIPT (src/store/redis/lua-script.ts).
      const { keys, arguments: args } = admissionCall(keyPrefix, request);
      return admissionResult((await ADMIT_SCRIPT.run(redis, keys, args)) as number[]);
    },
  });

  const db = new pg.Client({ connectionString: setting("BENCH_DATABASE_URL") });
  await db.connect();
  const tmcId = crypto.randomUUID();
  await db.query(`create schema "${schema}";
    create table "${schema}".audit_events (id bigserial primary key, occurred_at timestamptz not null default now(),
      action text not null, outcome text not null, actor text, tmc_id uuid, target_client_id text,
      debug_identifier text, details jsonb not null default '{}');
    create index on "${schema}".audit_events (tmc_id, occurred_at)`);
  let rows: object[] = [];
  let writing: Promise<void> | undefined;
  const write = async () => {
    const batch = rows;
    rows = [];
    await db
      .query(
        `insert into "${schema}".audit_events (occurred_at, action, outcome, actor, tmc_id, target_client_id, debug_identifier, details)
         select * from json_to_recordset($1) as r(occurred_at timestamptz, action text, outcome text, actor text,
           tmc_id uuid, target_client_id text, debug_identifier text, details jsonb)`,
        [JSON.stringify(batch)],
      )
      .catch((error: Error) => {
        rows = batch.concat(rows); // kept for the next tick: no issued token goes unaudited
        process.stderr.write(`same-guarantees: audit write failed: ${error.message}\n`);
      });
  };
  const flush = () => (writing ??= rows.length ? write().finally(() => (writing = undefined)) : undefined);
  const ticker = setInterval(() => void flush(), 100); // one statement per tick; a tick during a write waits for the next
  const closing: Array<() => Promise<void>> = [];

  return {
    schema,
    tmcId,
    generations,
    heldGeneration: held.generation,
    db,
    onClose: (task) => void closing.push(task),
    async admit(clientId, secretMatched, address) {
      const admission = await limiter.admitHeldClient(clientId, address, { ...held, authenticated: secretMatched });
      return STATUS[admission.kind];
    },
    issued(clientId, requestId, address) {
      rows.push({
        occurred_at: new Date().toISOString(),
        action: "TOKEN_ISSUED",
        outcome: "SUCCESS",
        actor: clientId,
        tmc_id: tmcId,
        target_client_id: clientId,
        debug_identifier: requestId,
        details: { grantType: "client_credentials", remoteAddress: address },
      });
    },
    async close() {
      clearInterval(ticker);
      await flush();
      if (rows.length) await flush();
      for (const task of closing) await task();
      await db.query(`drop schema "${schema}" cascade`).finally(() => db.end());
      await redis.quit();
    },
  };
}
