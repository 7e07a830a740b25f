// Shared by the baseline servers: each runs as its own child process (`node --import tsx
// bench/baselines/<name>.ts`), so the bench measures its CPU and memory exactly as the service's.
// Clients come from BENCH_CLIENTS (JSON [{clientId, clientSecret}], generated per run by the
// bench); the process listens on 127.0.0.1:0 and prints one line, {"listening": "http://…"},
// on stdout once it accepts connections. SIGTERM and SIGINT close it, and so does the bench's exit.
import crypto from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import formbody from "@fastify/formbody";
import Fastify, { type FastifyInstance } from "fastify";
import { SignJWT, exportJWK, generateKeyPair } from "jose";

export interface BenchClient {
  readonly clientId: string;
  readonly clientSecret: string;
}

export function benchClients(): BenchClient[] {
  const raw = process.env.BENCH_CLIENTS;
  if (!raw) throw new Error("BENCH_CLIENTS is not set (the bench passes the generated clients)");
  const clients = JSON.parse(raw) as BenchClient[];
  if (!Array.isArray(clients) || clients.length === 0) throw new Error("BENCH_CLIENTS holds no clients");
  return clients;
}

/** Prints the address line the bench waits for, and closes the server on SIGTERM/SIGINT. */
export function announce(
  server: Server,
  close: () => Promise<void> = () => new Promise((r) => server.close(() => r())),
): void {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ listening: `http://127.0.0.1:${port}` })}\n`);
  let closing = false;
  const stop = () => {
    if (closing) return;
    closing = true;
    server.closeAllConnections?.();
    void close().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 3_000).unref();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  // Orphaned (the bench was killed with SIGKILL): do not linger.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) stop();
  }, 1_000).unref();
}

/** What a token route adds to the minimal one (the same-guarantees route's Redis and Postgres work). */
export interface TokenRouteGuarantees {
  /** For a known client, before signing: 200 to issue a token, else the status to answer. */
  admit(clientId: string, secretMatched: boolean, address: string): Promise<200 | 401 | 429 | 503>;
  /** After signing, before answering. */
  issued(clientId: string, requestId: string, address: string): void;
  /** More routes on the same server, given the key that verifies the route's tokens. */
  routes?(app: FastifyInstance, verificationKey: crypto.KeyObject, issuer: string): void;
  close(): Promise<void>;
}

const ERRORS = { 401: "invalid_client", 429: "slow_down", 503: "temporarily_unavailable" } as const;

/**
 * How a baseline signs its EdDSA (Ed25519) access tokens: with jose's SignJWT (WebCrypto; the
 * minimal route as the first bench defined it, which issue 21's read goal is stated against), or
 * with node:crypto's one-shot Ed25519, the cheapest known way and the service's (the
 * same-guarantees route, as issue 21 describes it).
 */
export type TokenSigning = "jose" | "node:crypto";

/**
 * The least a client-credentials token endpoint can do in Fastify — the bench's clients in memory
 * (HMAC-SHA-256 of each secret under a random pepper, as the service stores them), one hash and
 * one constant-time compare per request, an EdDSA JWT access token signed as `signing` says, no
 * logging — plus `guarantees`, if given. POST /token (form: grant_type, client_id,
 * client_secret) and GET /jwks; announces itself once listening.
 */
export async function serveTokenRoute(
  issuer: string,
  kid: string,
  signing: TokenSigning,
  guarantees?: TokenRouteGuarantees,
): Promise<void> {
  // A KeyObject key: node:crypto checks a Buffer key the slow way on every call.
  const pepper = crypto.createSecretKey(crypto.randomBytes(32));
  const hmac = (secret: string) => crypto.createHmac("sha256", pepper).update(secret).digest();
  const secretHashes = new Map(benchClients().map((c) => [c.clientId, hmac(c.clientSecret)]));
  const signer = await tokenSigner(signing, issuer, kid);
  const jwks = { keys: [{ ...signer.publicJwk, kid, alg: "EdDSA", use: "sig" }] };
  const app = Fastify({ logger: false });
  await app.register(formbody);
  app.get("/jwks", async () => jwks);
  app.post("/token", async (request, reply) => {
    const form = (request.body ?? {}) as Record<string, string | undefined>;
    if (form.grant_type !== "client_credentials") return reply.code(400).send({ error: "unsupported_grant_type" });
    const clientId = form.client_id ?? "";
    const given = hmac(form.client_secret ?? "");
    const stored = secretHashes.get(clientId);
    const matched = stored !== undefined && crypto.timingSafeEqual(stored, given);
    const status = stored && guarantees ? await guarantees.admit(clientId, matched, request.ip) : matched ? 200 : 401;
    if (status !== 200) return reply.code(status).send({ error: ERRORS[status] });
    const accessToken = await signer.sign(clientId);
    guarantees?.issued(clientId, request.id, request.ip);
    reply.header("cache-control", "no-store");
    return { access_token: accessToken, token_type: "Bearer", expires_in: 3600, scope: "api" };
  });
  guarantees?.routes?.(app, signer.verificationKey, issuer);
  await app.listen({ host: "127.0.0.1", port: 0 });
  announce(app.server, async () => {
    await app.close();
    await guarantees?.close();
  });
}

const base64url = (json: object) => Buffer.from(JSON.stringify(json), "utf8").toString("base64url");

/** Signs a client's access token (iss, sub, aud, iat, exp, jti, client_id, scope; typ at+jwt) one way or the other. */
async function tokenSigner(
  signing: TokenSigning,
  issuer: string,
  kid: string,
): Promise<{ publicJwk: object; verificationKey: crypto.KeyObject; sign(clientId: string): Promise<string> | string }> {
  const claims = (clientId: string) => ({ client_id: clientId, scope: "api", sub: clientId });
  if (signing === "jose") {
    const { privateKey, publicKey } = await generateKeyPair("EdDSA", { crv: "Ed25519" });
    return {
      publicJwk: await exportJWK(publicKey),
      verificationKey: crypto.KeyObject.from(publicKey as unknown as Parameters<typeof crypto.KeyObject.from>[0]),
      sign: (clientId) => {
        const now = Math.floor(Date.now() / 1000);
        return new SignJWT(claims(clientId))
          .setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid })
          .setIssuer(issuer)
          .setAudience(`${issuer}/api`)
          .setIssuedAt(now)
          .setExpirationTime(now + 3600)
          .setJti(crypto.randomUUID())
          .sign(privateKey);
      },
    };
  }
  const { privateKey, publicKey } = crypto.generateKeyPairSync("ed25519");
  const header = base64url({ alg: "EdDSA", typ: "at+jwt", kid });
  return {
    publicJwk: publicKey.export({ format: "jwk" }),
    verificationKey: publicKey,
    sign: (clientId) => {
      const now = Math.floor(Date.now() / 1000);
      const payload = base64url({
        ...claims(clientId),
        iss: issuer,
        aud: `${issuer}/api`,
        iat: now,
        exp: now + 3600,
        jti: crypto.randomUUID(),
      });
      return `${header}.${payload}.${crypto.sign(null, Buffer.from(`${header}.${payload}`), privateKey).toString("base64url")}`;
    },
  };
}
