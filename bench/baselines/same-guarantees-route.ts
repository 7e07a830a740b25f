// Baseline: the same-guarantees route, "the limit for our guarantees" — the minimal token route
// (serveTokenRoute, common.ts) plus exactly the work the service's guarantees need on its hot
// path (sameGuarantees, same-guarantees.ts: one Redis admission per request, every token an audit
// row in Postgres), signing as the service does (node:crypto's one-shot Ed25519), and nothing
// else. Its gRPC twin, the same work behind grpc-js's own server, is same-guarantees-grpc.ts.
// And "the same-guarantees read", GET /api-users?limit=N with one of its tokens: what the
// service's authenticated read (GET /v2/api-users) must do and nothing else — the EdDSA JWT
// verified with node:crypto and its claims checked (alg, typ, iss, aud, exp; a token seen before
// is not verified again, as the service keeps it, but its expiry is checked), the client's
// credential generation and the token's own revocation read in the service's one MGET
// (RedisGenerationCache), and the page with its total in one Postgres statement (the shape of
// src/store/postgres/paging.ts) over a table of the bench's clients, from a pool of the
// service's default size (DATABASE_POOL_MAX 10).
import crypto from "node:crypto";
import pg from "pg";
import { tokenCredentialId } from "../../src/domain/tokens/model.js";
import { benchClients, serveTokenRoute } from "./common.js";
import { sameGuarantees } from "./same-guarantees.js";

const guarantees = await sameGuarantees();
const { schema, tmcId, db, generations } = guarantees;
await db.query(`create table "${schema}".api_users (client_id text primary key, tmc_id uuid not null, org_id uuid,
    role text not null, credential_type text not null, created_at timestamptz not null default now(), created_by text,
    rotated_at timestamptz, revoked_at timestamptz);
  create index on "${schema}".api_users (tmc_id, created_at, client_id) where revoked_at is null`);
await db.query(
  `insert into "${schema}".api_users (client_id, tmc_id, role, credential_type, created_by)
   select id, $1, 'TMC_ADMIN', 'CLIENT_SECRET', 'operator' from unnest($2::text[]) as id`,
  [tmcId, benchClients().map((c) => c.clientId)],
);
const reads = new pg.Pool({ connectionString: process.env.BENCH_DATABASE_URL, max: 10 });
guarantees.onClose(() => reads.end());

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

await serveTokenRoute("http://same-guarantees-route.bench.invalid", "same-guarantees-ed25519", "node:crypto", {
  ...guarantees,
  routes(app, verificationKey, issuer) {
    app.get("/api-users", async (request, reply) => {
      const claims = verifiedClaims(request.headers.authorization, verificationKey, issuer);
      if (!claims) return reply.code(401).send({ errorCode: "UNAUTHENTICATED" });
      const [credential, token] = (await generations.read([claims.sub, tokenCredentialId(claims.jti)])).states;
      if (credential?.generation !== guarantees.heldGeneration || token !== undefined)
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
});
