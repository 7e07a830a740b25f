// Baseline: the least a client-credentials token endpoint can do in Fastify — the bench's
// clients in memory (HMAC-SHA-256 of each secret under a random pepper, as the service stores
// them), one hash and one constant-time compare per request, an EdDSA (Ed25519) JWT access token
// signed with jose. No storage, no rate limit, no audit, no logging.
// POST /token (form: grant_type, client_id, client_secret) and GET /jwks.
import crypto from "node:crypto";
import formbody from "@fastify/formbody";
import Fastify from "fastify";
import { SignJWT, exportJWK, generateKeyPair } from "jose";
import { announce, benchClients } from "./common.js";

const ISSUER = "http://minimal-token-route.bench.invalid";
const KID = "minimal-ed25519";
const pepper = crypto.randomBytes(32);
const hmac = (secret: string) => crypto.createHmac("sha256", pepper).update(secret).digest();
const secretHashes = new Map(benchClients().map((c) => [c.clientId, hmac(c.clientSecret)]));
const { privateKey, publicKey } = await generateKeyPair("EdDSA", { crv: "Ed25519" });
const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: KID, alg: "EdDSA", use: "sig" }] };

const app = Fastify({ logger: false });
await app.register(formbody);
app.get("/jwks", async () => jwks);
app.post("/token", async (request, reply) => {
  const form = (request.body ?? {}) as Record<string, string | undefined>;
  if (form.grant_type !== "client_credentials") return reply.code(400).send({ error: "unsupported_grant_type" });
  const clientId = form.client_id ?? "";
  const given = hmac(form.client_secret ?? "");
  const stored = secretHashes.get(clientId);
  if (!stored || !crypto.timingSafeEqual(stored, given)) return reply.code(401).send({ error: "invalid_client" });
  const now = Math.floor(Date.now() / 1000);
  const accessToken = await new SignJWT({ client_id: clientId, scope: "api" })
    .setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid: KID })
    .setIssuer(ISSUER)
    .setSubject(clientId)
    .setAudience(`${ISSUER}/api`)
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .setJti(crypto.randomUUID())
    .sign(privateKey);
  reply.header("cache-control", "no-store");
  return { access_token: accessToken, token_type: "Bearer", expires_in: 3600, scope: "api" };
});
await app.listen({ host: "127.0.0.1", port: 0 });
announce(app.server, () => app.close());
