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

/**
 * Prints the address line the bench waits for (with `also`, more addresses of the same process:
 * a gRPC port), and closes the server on SIGTERM/SIGINT.
 */
export function announce(
  server: Server,
  close: () => Promise<void> = () => new Promise((r) => server.close(() => r())),
  also: Record<string, string> = {},
): void {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ listening: `http://127.0.0.1:${port}`, ...also })}\n`);
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
 * minimal route as the first bench defined it, which the read goal is stated against), or
 * with node:crypto's one-shot Ed25519, the cheapest known way and the service's (the
 * same-guarantees route: the service's guarantees on the cheapest signing).
 */
export type TokenSigning = "jose" | "node:crypto";

/** A token request's fields, whatever face carried them (a form, a protobuf message). */
export interface TokenForm {
  readonly grantType: string | undefined;
  readonly clientId: string | undefined;
  readonly clientSecret: string | undefined;
}

/** What the token core answers: a token, or the status (HTTP's) and OAuth error of a refusal. */
export type TokenAnswer =
  | { readonly status: 200; readonly accessToken: string }
  | { readonly status: 400 | 401 | 429 | 503; readonly error: string };

/** The token work of a baseline, whichever face serves it (serveTokenRoute's Fastify route, a grpc-js server). */
export interface TokenCore {
  readonly jwks: { keys: object[] };
  readonly verificationKey: crypto.KeyObject;
  issue(form: TokenForm, requestId: string, address: string): Promise<TokenAnswer>;
}

/** The expiry and scope every baseline token carries. */
export const TOKEN_LIFETIME_S = 3600;
export const TOKEN_SCOPE = "api";

/**
 * The least a client-credentials token endpoint can do — the bench's clients in memory
 * (HMAC-SHA-256 of each secret under a random pepper, as the service stores them), one hash and
 * one constant-time compare per request, an EdDSA JWT access token signed as `signing` says —
 * plus `guarantees`, if given.
 */
export async function tokenCore(
  issuer: string,
  kid: string,
  signing: TokenSigning,
  guarantees?: Omit<TokenRouteGuarantees, "routes" | "close">,
): Promise<TokenCore> {
  // A KeyObject key: node:crypto checks a Buffer key the slow way on every call.
  const pepper = crypto.createSecretKey(crypto.randomBytes(32));
  const hmac = (secret: string) => crypto.createHmac("sha256", pepper).update(secret).digest();
  const secretHashes = new Map(benchClients().map((c) => [c.clientId, hmac(c.clientSecret)]));
  const signer = await tokenSigner(signing, issuer, kid);
  return {
    jwks: { keys: [{ ...signer.publicJwk, kid, alg: "EdDSA", use: "sig" }] },
    verificationKey: signer.verificationKey,
    async issue(form, requestId, address) {
      if (form.grantType !== "client_credentials") return { status: 400, error: "unsupported_grant_type" };
      const clientId = form.clientId ?? "";
      const given = hmac(form.clientSecret ?? "");
      const stored = secretHashes.get(clientId);
      const matched = stored !== undefined && crypto.timingSafeEqual(stored, given);
      const status = stored && guarantees ? await guarantees.admit(clientId, matched, address) : matched ? 200 : 401;
      if (status !== 200) return { status, error: ERRORS[status] };
      const accessToken = await signer.sign(clientId);
      guarantees?.issued(clientId, requestId, address);
      return { status, accessToken };
    },
  };
}

/**
 * tokenCore served by Fastify, no logging: POST /token (form: grant_type, client_id,
 * client_secret) and GET /jwks; announces itself once listening.
 */
export async function serveTokenRoute(
  issuer: string,
  kid: string,
  signing: TokenSigning,
  guarantees?: TokenRouteGuarantees,
): Promise<void> {
  const core = await tokenCore(issuer, kid, signing, guarantees);
  const app = Fastify({ logger: false });
  await app.register(formbody);
  app.get("/jwks", async () => core.jwks);
  app.post("/token", async (request, reply) => {
    const form = (request.body ?? {}) as Record<string, string | undefined>;
    const answer = await core.issue(
      { grantType: form.grant_type, clientId: form.client_id, clientSecret: form.client_secret },
      request.id,
      request.ip,
    );
    if (answer.status !== 200) return reply.code(answer.status).send({ error: answer.error });
    reply.header("cache-control", "no-store");
    return { access_token: answer.accessToken, token_type: "Bearer", expires_in: TOKEN_LIFETIME_S, scope: TOKEN_SCOPE };
  });
  guarantees?.routes?.(app, core.verificationKey, issuer);
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
  const claims = (clientId: string) => ({ client_id: clientId, scope: TOKEN_SCOPE, sub: clientId });
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
          .setExpirationTime(now + TOKEN_LIFETIME_S)
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
        exp: now + TOKEN_LIFETIME_S,
        jti: crypto.randomUUID(),
      });
      return `${header}.${payload}.${crypto.sign(null, Buffer.from(`${header}.${payload}`), privateKey).toString("base64url")}`;
    },
  };
}
