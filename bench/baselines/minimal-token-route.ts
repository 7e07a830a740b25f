// Baseline: the least a client-credentials token endpoint can do in Fastify — the bench's
// clients in memory (HMAC-SHA-256 of each secret under a random pepper, as the service stores
// them), one hash and one constant-time compare per request, an EdDSA (Ed25519) JWT access token
// signed with jose (as the first bench defined it). No storage, no rate limit, no audit, no logging (serveTokenRoute, common.ts).
// POST /token (form: grant_type, client_id, client_secret) and GET /jwks.
import { serveTokenRoute } from "./common.js";

await serveTokenRoute("http://minimal-token-route.bench.invalid", "minimal-ed25519", "jose");
