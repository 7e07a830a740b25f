// The verifier package's local verification rate on one core, a child process
// of `npm run bench` (one JavaScript thread: node:crypto's Ed25519 verify runs on it). Reads the
// service's tokens for the sample audience from VERIFIER_TOKENS_FILE (a JSON array of distinct
// tokens) and, per round, measures over all of them:
//   bare         crypto.verify on the signing input and signature, decoded beforehand, with the
//                service's public key imported beforehand: the floor of any local verification
//   first-sight  verifier.verify on a verifier whose cache is empty (a fresh one each round)
//   cached       verifier.verify on the same tokens again (every one a cache hit)
// (bare and first sight alternate in chunks of the same tokens, so drift hits both alike; each
// round starts from a collected heap (--expose-gc), so the garbage of setting up its verifier and
// of the round before is not charged to the first sights that happen to trigger its collection)
//   bearer request  verifier.verifyRequest on a cached Bearer token (Authorization parsed, scheme checked)
//   dpop request    verifier.verifyRequest on a cached DPoP-bound token, each with a fresh proof
//                   (made beforehand: a client's cost), all of it checked, its jti remembered
// (the two request checks alternate in chunks too), read from VERIFIER_DPOP_FILE
// and prints one JSON line: {"rounds": [{bare, firstSight, cached, bearerRequest, dpopRequest} in
// verifications per second]}.
// The verifier follows the service's change stream as in production (AUTH_URL, RS_CLIENT_ID…).
import crypto from "node:crypto";
import fs from "node:fs";
import { setting, verifierOptionsFromEnv } from "../examples/protected-service/service.js";
import { createVerifier, type Verifier } from "../packages/verifier/src/index.js";
import { dpopProof } from "./client-proofs.js";
import type { VerifierDpopInput, VerifierLocalRound } from "./protected-services.js";

// The same settings as the sample protected service's.
const options = verifierOptionsFromEnv();
const tokens = JSON.parse(fs.readFileSync(setting("VERIFIER_TOKENS_FILE"), "utf8")) as string[];
const rounds = Number(process.env.VERIFIER_ROUNDS ?? 9);
const cachedPasses = 20;
/** Tokens per chunk of the bare and first-sight measurements. */
const CHUNK = 50;
/** Request checks per round, of each kind, and per chunk (the verifier's change stream is read between chunks). */
const REQUEST_CHECKS = 4_000;
const REQUEST_CHUNK = 200;
const dpopInput = JSON.parse(fs.readFileSync(setting("VERIFIER_DPOP_FILE"), "utf8")) as VerifierDpopInput;
/** The URL the request checks name (no publicOrigin: the request's own). */
const RESOURCE_URL = "https://trips.bench.invalid/trips";

/** The service's signing keys as node:crypto KeyObjects, by kid (the bare baseline's only preparation). */
async function publicKeys(): Promise<Map<string, crypto.KeyObject>> {
  const response = await fetch(`${options.authUrl}/.well-known/jwks.json`);
  const { keys } = (await response.json()) as { keys: Array<crypto.JsonWebKey & { kid: string }> };
  return new Map(keys.map((jwk) => [jwk.kid, crypto.createPublicKey({ key: jwk, format: "jwk" })]));
}

/**
 * The request checks of one round: Bearer and DPoP on cached tokens, side by side in chunks (the
 * order swapped each chunk), each DPoP check with its own proof, signed before the clock starts.
 */
async function requestChecks(verifier: Verifier): Promise<{ bearerRequest: number; dpopRequest: number }> {
  const bearer = { authorization: `Bearer ${dpopInput.bearer}`, dpop: undefined, method: "GET", url: RESOURCE_URL };
  const bound = { authorization: `DPoP ${dpopInput.bound}`, method: "GET", url: RESOURCE_URL };
  // Current again first: the cached passes before never yield to the change stream's heartbeats.
  await verifier.ready(30_000);
  const asked = await verifier.verifyRequest({ ...bound, dpop: undefined });
  if (asked.ok || asked.dpopNonce === undefined)
    throw new Error("verifier-local: a proofless DPoP request got no nonce");
  const spec = {
    ...dpopInput,
    method: "GET" as const,
    url: RESOURCE_URL,
    nonce: asked.dpopNonce,
    accessToken: dpopInput.bound,
  };
  const proofs = Array.from({ length: REQUEST_CHECKS }, () => dpopProof(spec));
  await verifier.ready(30_000); // signing the proofs did not yield either
  const first = await verifier.verifyRequest(bearer);
  if (!first.ok) throw new Error(`verifier-local: the Bearer token was refused (${first.reason})`);
  let bearerMs = 0;
  let dpopMs = 0;
  for (let from = 0; from < REQUEST_CHECKS; from += REQUEST_CHUNK) {
    const to = Math.min(REQUEST_CHECKS, from + REQUEST_CHUNK);
    const bearerChunk = async () => {
      const started = performance.now();
      for (let i = from; i < to; i++)
        if (!(await verifier.verifyRequest(bearer)).ok)
          throw new Error("verifier-local: a cached Bearer check refused");
      bearerMs += performance.now() - started;
    };
    const dpopChunk = async () => {
      const started = performance.now();
      for (let i = from; i < to; i++) {
        const outcome = await verifier.verifyRequest({ ...bound, dpop: proofs[i] });
        if (!outcome.ok) throw new Error(`verifier-local: a cached DPoP check refused (${outcome.reason})`);
      }
      dpopMs += performance.now() - started;
    };
    if ((from / REQUEST_CHUNK) % 2 === 0) await bearerChunk().then(dpopChunk);
    else await dpopChunk().then(bearerChunk);
    await new Promise((resolve) => setImmediate(resolve));
  }
  return { bearerRequest: REQUEST_CHECKS / (bearerMs / 1000), dpopRequest: REQUEST_CHECKS / (dpopMs / 1000) };
}

function perSecond(count: number, startedMs: number): number {
  return count / ((performance.now() - startedMs) / 1000);
}

async function main(): Promise<void> {
  const keys = await publicKeys();
  const prepared = tokens.map((token) => {
    const [header, payload, signature] = token.split(".");
    const { kid } = JSON.parse(Buffer.from(header!, "base64url").toString("utf8")) as { kid: string };
    const key = keys.get(kid);
    if (!key) throw new Error(`verifier-local: no published key ${kid}`);
    return { input: Buffer.from(`${header}.${payload}`), signature: Buffer.from(signature!, "base64url"), key };
  });
  const results: VerifierLocalRound[] = [];
  // One more round first, not counted: the warm-up (the first sight's code compiling), as every load scenario has.
  for (let round = -1; round < rounds; round++) {
    const verifier = await createVerifier(options);
    try {
      await verifier.ready(30_000);
      globalThis.gc?.();
      // Bare and first sight side by side in small chunks of the same tokens, the order swapped
      // each chunk, so the machine's drift during the round weighs on both alike.
      let bareMs = 0;
      let firstSightMs = 0;
      for (let from = 0; from < tokens.length; from += CHUNK) {
        const to = Math.min(tokens.length, from + CHUNK);
        const bare = () => {
          const started = performance.now();
          for (let i = from; i < to; i++) {
            const { input, signature, key } = prepared[i]!;
            if (!crypto.verify(null, input, key, signature)) throw new Error("verifier-local: a token does not verify");
          }
          bareMs += performance.now() - started;
        };
        const firstSight = async () => {
          const started = performance.now();
          for (let i = from; i < to; i++) {
            const outcome = await verifier.verify(tokens[i]!);
            if (!outcome.ok) throw new Error(`verifier-local: first sight refused a token (${outcome.reason})`);
          }
          firstSightMs += performance.now() - started;
        };
        if ((from / CHUNK) % 2 === 0) {
          bare();
          await firstSight();
        } else {
          await firstSight();
          bare();
        }
        // Outside the clock: the verifier reads its change stream (heartbeats) between chunks, as a
        // server does between requests; a busy machine otherwise starves it into "stale".
        await new Promise((resolve) => setImmediate(resolve));
      }
      const started = performance.now();
      for (let pass = 0; pass < cachedPasses; pass++)
        for (const token of tokens) {
          const outcome = await verifier.verify(token);
          if (!outcome.ok) throw new Error(`verifier-local: a cached verification refused a token (${outcome.reason})`);
        }
      const cached = perSecond(tokens.length * cachedPasses, started);
      const requests = await requestChecks(verifier);
      if (round >= 0)
        results.push({
          bare: tokens.length / (bareMs / 1000),
          firstSight: tokens.length / (firstSightMs / 1000),
          cached,
          ...requests,
        });
    } finally {
      await verifier.close();
    }
  }
  process.stdout.write(`${JSON.stringify({ rounds: results })}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
