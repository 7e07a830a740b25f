// Baseline: the same-guarantees minimal route, "the limit for our guarantees" — the minimal token
// route (serveTokenRoute, common.ts) plus exactly the work the service's guarantees need on its
// hot path, signing as the service does (node:crypto's one-shot Ed25519), and nothing else:
// - one Redis EVALSHA per request of the service's own admission script: the caller's credential
//   generation checked, an address point and a client point spent (a failure point for a wrong
//   secret), with the service's key layout, budgets and decisions (TokenRateLimiter) under the
//   run's own key prefix (BENCH_REDIS_KEY_PREFIX, never the service's);
// - every issued token an audit row in Postgres (the columns of the service's audit_events), in
//   its own throw-away schema (BENCH_AUDIT_SCHEMA), buffered and written as one statement per
//   100 ms tick; the schema is dropped on close (and by the bench's teardown).
// And "the same-guarantees read", GET /api-users?limit=N with one of its tokens: what the
// service's authenticated read (GET /v2/api-users) must do and nothing else — the EdDSA JWT
// verified with node:crypto and its claims checked (alg, typ, iss, aud, exp; a token seen before
// is not verified again, as the service keeps it, but its expiry is checked), the client's
// credential generation and the token's own revocation read in the service's one MGET
// (RedisGenerationCache), and the page with its total in one Postgres statement (the shape of
// src/store/postgres/paging.ts) over a table of the bench's clients, from a pool of the
// service's default size (DATABASE_POOL_MAX 10).
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
import { tokenCredentialId } from "../../src/domain/tokens/model.js";
import { ADMIT_SCRIPT, admissionCall, admissionResult } from "../../src/store/redis/token-admission.js";
import { benchClients, serveTokenRoute } from "./common.js";

const setting = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (the bench passes it)`);
  return value;
};
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

// The service's list statement: the total and the page in one round trip (paging.ts).
const PAGE_SQL = `select page.*, total.page_total
  from (select count(*) as page_total from "${schema}".api_users where tmc_id = $1 and revoked_at is null) as total
  left join (select client_id, org_id, role, credential_type, created_at, created_by, rotated_at
    from "${schema}".api_users where tmc_id = $1 and revoked_at is null
    order by created_at, client_id limit $2 offset 0) as page on true
  order by page.created_at, page.client_id`;

/** Tokens whose signature was checked, as the service keeps them (src/domain/tokens/verified-tokens.ts): expiry is checked on every use. */
const verified = new Map<string, { sub: string; jti: string; exp: number }>();

/** The claims of a valid bearer token of this route, or undefined: EdDSA, at+jwt, our issuer and audience, not expired. */
function verifiedClaims(
  authorization: string | undefined,
  key: crypto.KeyObject,
  issuer: string,
): { sub: string; jti: string } | undefined {
  const parts = /^Bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/.exec(authorization ?? "");
  if (!parts) return undefined;
  const known = verified.get(parts[0]);
  if (known) return known.exp > Date.now() / 1000 - 5 ? known : undefined;
  const [, header, payload, signature] = parts as unknown as [string, string, string, string];
  if (!crypto.verify(null, Buffer.from(`${header}.${payload}`), key, Buffer.from(signature, "base64url")))
    return undefined;
  const h = JSON.parse(Buffer.from(header, "base64url").toString()) as Record<string, unknown>;
  const c = JSON.parse(Buffer.from(payload, "base64url").toString()) as Record<string, unknown>;
  const now = Date.now() / 1000;
  const valid =
    h.alg === "EdDSA" && h.typ === "at+jwt" && h.crit === undefined && c.iss === issuer && c.aud === `${issuer}/api`;
  if (!valid || typeof c.exp !== "number" || c.exp <= now - 5 || typeof c.sub !== "string" || typeof c.jti !== "string")
    return undefined;
  const claims = { sub: c.sub, jti: c.jti, exp: c.exp };
  verified.set(parts[0], claims);
  if (verified.size > 20_000) verified.delete(verified.keys().next().value!);
  return claims;
}

// The service's answer to each admission: unknown (the store cannot vouch) would send it to Postgres.
const STATUS = { admitted: 200, "client-limited": 429, limited: 429, refused: 401, unknown: 503 } as const;

const db = new pg.Client({ connectionString: setting("BENCH_DATABASE_URL") });
await db.connect();
const tmcId = crypto.randomUUID();
await db.query(`create schema "${schema}";
  create table "${schema}".audit_events (id bigserial primary key, occurred_at timestamptz not null default now(),
    action text not null, outcome text not null, actor text, tmc_id uuid, target_client_id text,
    debug_identifier text, details jsonb not null default '{}');
  create index on "${schema}".audit_events (tmc_id, occurred_at);
  create table "${schema}".api_users (client_id text primary key, tmc_id uuid not null, org_id uuid, role text not null,
    credential_type text not null, created_at timestamptz not null default now(), created_by text,
    rotated_at timestamptz, revoked_at timestamptz);
  create index on "${schema}".api_users (tmc_id, created_at, client_id) where revoked_at is null`);
await db.query(
  `insert into "${schema}".api_users (client_id, tmc_id, role, credential_type, created_by)
   select id, $1, 'TMC_ADMIN', 'CLIENT_SECRET', 'operator' from unnest($2::text[]) as id`,
  [tmcId, benchClients().map((c) => c.clientId)],
);
const reads = new pg.Pool({ connectionString: setting("BENCH_DATABASE_URL"), max: 10 });
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
      process.stderr.write(`same-guarantees-route: audit write failed: ${error.message}\n`);
    });
};
const flush = () => (writing ??= rows.length ? write().finally(() => (writing = undefined)) : undefined);
const ticker = setInterval(() => void flush(), 100); // one statement per tick; a tick during a write waits for the next

await serveTokenRoute("http://same-guarantees-route.bench.invalid", "same-guarantees-ed25519", "node:crypto", {
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
  routes(app, verificationKey, issuer) {
    app.get("/api-users", async (request, reply) => {
      const claims = verifiedClaims(request.headers.authorization, verificationKey, issuer);
      if (!claims) return reply.code(401).send({ errorCode: "UNAUTHENTICATED" });
      const [credential, token] = (await generations.read([claims.sub, tokenCredentialId(claims.jti)])).states;
      if (credential?.generation !== held.generation || token !== undefined)
        return reply.code(401).send({ errorCode: "UNAUTHENTICATED" });
      const limit = Math.min(Math.max(Number((request.query as { limit?: string }).limit) || 10, 1), 100);
      const { rows: page } = await reads.query<Record<string, unknown>>(PAGE_SQL, [tmcId, limit]);
      const listed = page.filter((r) => r.client_id !== null);
      return {
        apiUsers: listed.map((r) => ({
          clientId: r.client_id,
          role: r.role,
          credentialType: r.credential_type,
          createdAt: (r.created_at as Date).toISOString(),
          createdBy: r.created_by,
        })),
        totalCount: Number(page[0]?.page_total ?? 0),
      };
    });
  },
  async close() {
    clearInterval(ticker);
    await flush();
    if (rows.length) await flush();
    await reads.end();
    await db.query(`drop schema "${schema}" cascade`).finally(() => db.end());
    await redis.quit();
  },
});
