// The service and this package verify with one JWS module (src/jws.ts); this test holds the rest of
// their first-sight decisions equal: over generated tokens (random headers, claims, signing keys and
// tamperings, from a seeded PRNG), the service's AccessTokens and the package's verifier accept the
// same tokens and refuse the others for the same reason — the service's `refusalReason`, read in the
// package's words (refusalReasonOfCheck).
//
//   SAME_VERDICT_RUNS=N   cases (default 3000)   SAME_VERDICT_SEED=S   replay a run (the seed is in the title)
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { AccessTokens } from "../../../../src/domain/tokens/access-tokens.js";
import type { CredentialGenerations } from "../../../../src/domain/tokens/credential-generations.js";
import { isTokenCredentialId, TOKEN_NOT_REVOKED } from "../../../../src/domain/tokens/model.js";
import type { SigningKeyRing } from "../../../../src/domain/tokens/signing-key-ring.js";
import { createVerifier, type Verifier } from "../../src/index.js";
import { signCompactJws } from "../../src/jws.js";
import { refusalReasonOfCheck } from "../../src/verifier.js";
import { testKeys } from "../../../../test/helpers/ed25519-test-keys.js";

const RUNS = Number(process.env.SAME_VERDICT_RUNS) > 0 ? Number(process.env.SAME_VERDICT_RUNS) : 3000;
const SEED =
  Number.isInteger(Number(process.env.SAME_VERDICT_SEED)) && process.env.SAME_VERDICT_SEED
    ? Number(process.env.SAME_VERDICT_SEED)
    : (Date.now() ^ (process.pid << 8)) >>> 0;

const ISSUER = "http://auth.test";
const AUDIENCE = "https://bookings.platform.test/api";
// Nothing listens here: the change stream never connects, so every token that passes its own checks is "stale".
const AUTH_URL = "http://127.0.0.1:9";
const JWKS_URL = `${AUTH_URL}/.well-known/jwks.json`;
const GENERATION = 1;

const { k1, k2, outsider } = testKeys();
const published = new Map([k1, k2].map((k) => [k.kid, k.publicKey]));

/** mulberry32: a small seeded PRNG, so a failing run can be replayed from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ABSENT = Symbol("absent");

/** Values of another type than a claim's, for any claim. */
const ANY_WRONG: readonly unknown[] = [ABSENT, null, true, [], {}, "1", 1.5];
/** Values of the right type but wrong for this claim, or of a type a looser check might let through. */
const WRONG: Readonly<Record<string, readonly unknown[]>> = {
  client_id: ["", 5],
  tmc_id: ["", 5],
  role: ["ROOT", "tmc_admin", ""],
  gen: [0, 2, -1, 2.5, "1"],
  iss: ["http://evil.test", `${ISSUER}/`, [ISSUER]],
  sub: ["", 5],
  aud: [[AUDIENCE, "other"], ["other"], [AUDIENCE, 7], "other", [], ""],
  iat: ["0", -1],
  exp: ["1", -1],
  nbf: ["0", -1],
  jti: ["", 5],
  creds: [[["other-client", "1"]], [["other-client"]], "other-client", [[5, 1]], [["other-client", 1.5]]],
  org_id: ["", 5],
  scope: ["", 5],
  sub_kind: ["USER", 5],
  act: [{ sub: "x" }, "x"],
};

/** A generator of one token per call, mostly genuine, often wrong in one or two ways. */
function tokens(random: () => number) {
  const chance = (p: number) => random() < p;
  const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
  /** `usual` most of the time, else one of `others`. */
  const mostly = <T>(usual: T, others: readonly T[], p = 0.85): T => (chance(p) ? usual : pick(others));
  const set = (target: Record<string, unknown>, name: string, value: unknown) => {
    if (value === ABSENT) delete target[name];
    else target[name] = value;
  };
  // Far enough from the tolerance's edge (5 s) that the second the two verdicts are read in cannot matter.
  const offsets = [-86_400, -3600, -60, -8, -2, 0, 2, 8, 60, 3600];
  let n = 0;

  return (): string => {
    const now = Math.floor(Date.now() / 1000);
    const header: Record<string, unknown> = {};
    set(header, "alg", mostly<unknown>("EdDSA", ["none", "HS256", "ES256", "Ed25519", "", 5, null, ABSENT]));
    set(header, "typ", mostly<unknown>("at+jwt", ["application/at+jwt", "AT+JWT", "JWT", "jwt", "", 1, ABSENT]));
    set(header, "kid", mostly<unknown>(k1.kid, [k2.kid, outsider.kid, "", 5, null, ABSENT, "__proto__"], 0.8));
    if (chance(0.03)) Object.assign(header, pick([{ crit: ["b64"], b64: false }, { crit: ["exp"] }, { crit: "b64" }]));

    const clientId = `client-${n++ % 50}`;
    const claims: Record<string, unknown> = {
      client_id: clientId,
      tmc_id: "tmc-1",
      role: "TMC_ADMIN",
      scope: "bookings:read",
      sub_kind: "CLIENT",
      gen: GENERATION,
      iss: ISSUER,
      sub: clientId,
      aud: AUDIENCE,
      iat: now,
      exp: now + 900,
      jti: crypto.randomBytes(16).toString("base64url"),
    };
    if (chance(0.1)) claims.creds = [["other-client", GENERATION]];
    if (chance(0.15)) claims.exp = now + pick(offsets);
    if (chance(0.1)) claims.nbf = now + pick(offsets);
    if (chance(0.1)) claims.iat = now + pick(offsets);
    if (chance(0.3)) {
      // One claim missing, or of another value or type.
      const name = pick(Object.keys(WRONG));
      set(claims, name, pick([...WRONG[name]!, ...ANY_WRONG]));
    }

    const key = mostly(header.kid === k2.kid ? k2 : k1, [k1, k2, outsider], 0.9);
    let token = signCompactJws(header, claims, key.privateKey);
    if (chance(0.2)) token = tampered(token);
    return token;
  };

  function tampered(token: string): string {
    const [h, p, s] = token.split(".") as [string, string, string];
    const flip = (segment: string) => {
      if (segment === "") return "A";
      const i = Math.floor(random() * segment.length);
      const c = segment[i] === "A" ? "B" : "A";
      return segment.slice(0, i) + c + segment.slice(i + 1);
    };
    const b64 = (text: string) => Buffer.from(text).toString("base64url");
    return pick<() => string>([
      () => `${flip(h)}.${p}.${s}`,
      () => `${h}.${flip(p)}.${s}`,
      () => `${h}.${p}.${flip(s)}`,
      () => `${h}.${p}.`,
      () => `${h}.${p}`,
      () => `${h}.${p}.${s}.${s}`,
      () => `${h}..${s}`,
      () => `${h}.${b64("not json")}.${s}`,
      () => `${h}.${b64("[1,2]")}.${s}`,
      () => `${b64("{}")}.${p}.${s}`,
      () => `${b64("not json")}.${p}.${s}`,
      () => `${h}.${p}.${s}==`,
      () => `${h}.${p}.${s.slice(0, -2)}`,
      () => `${h}.${p}é.${s}`,
      () => `${h}.${p.replace(/-/g, "+")}.${s}`,
      () => `${h} .${p}.${s}`,
      () => "",
      () => "not-a-jwt",
    ])();
  }
}

describe(`the service and the verifier package: the same verdict on every token (seed ${SEED})`, () => {
  let verifier: Verifier;
  const realFetch = globalThis.fetch;

  // The service: its real AccessTokens over a key ring and credential generations that know the same two keys
  // and see every generation as issued and every token as not revoked.
  const ring = {
    verificationKeysFor: () => published,
    verifies: (kid: string) => published.has(kid),
  } as unknown as SigningKeyRing;
  const generations = {
    current: async (ids: readonly string[]) =>
      new Map(ids.map((id) => [id, isTokenCredentialId(id) ? TOKEN_NOT_REVOKED : GENERATION])),
  } as unknown as CredentialGenerations;
  const service = new AccessTokens(ring, generations, ISSUER, () => new Date());

  before(async () => {
    // The package fetches its JWKS with the global fetch: it gets the same two keys, without a port.
    const jwks = {
      keys: [k1, k2].map((k) => ({ ...k.publicKey.export({ format: "jwk" }), kid: k.kid, alg: "EdDSA", use: "sig" })),
    };
    globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) =>
      String(input) === JWKS_URL ? Response.json(jwks) : realFetch(input, init)) as typeof fetch;
    verifier = await createVerifier({
      authUrl: AUTH_URL,
      issuer: ISSUER,
      audience: AUDIENCE,
      clientId: "rs-test",
      clientSecret: "unused",
      jwksCooldownMs: 60_000,
    });
  });
  after(async () => {
    await verifier.close();
    globalThis.fetch = realFetch;
  });

  /** "accepted" (the token passed every check of its own), or the refusal in the package's words. */
  async function byService(token: string): Promise<string> {
    try {
      await service.verify(token, AUDIENCE);
      return "accepted";
    } catch (error) {
      const check = (error as { logged?: { refusalReason?: string } }).logged?.refusalReason;
      assert.ok(check, `the service's refusal names its check: ${String(error)}`);
      // A generation other than the one the stub knows: the token passed its own checks; revocation is the stream's part.
      return check === "revocation" ? "accepted" : refusalReasonOfCheck(check);
    }
  }
  async function byPackage(token: string): Promise<string> {
    const outcome = await verifier.verify(token);
    // Not connected to a stream: a token that passed its own checks is refused as stale, never accepted.
    assert.ok(!outcome.ok);
    return outcome.reason === "stale" ? "accepted" : outcome.reason;
  }

  test(`${RUNS} generated tokens: accepted by both or refused by both for the same reason`, async () => {
    const next = tokens(prng(SEED));
    const seen = new Map<string, number>();
    for (let i = 0; i < RUNS; i++) {
      const token = next();
      const [ours, theirs] = [await byService(token), await byPackage(token)];
      assert.equal(theirs, ours, `case ${i}, token ${token}`);
      // A token seen again (the package's cache) is judged the same way.
      assert.equal(await byPackage(token), ours, `case ${i} again, token ${token}`);
      seen.set(ours, (seen.get(ours) ?? 0) + 1);
    }
    // The generator reached every verdict a token can have on its own.
    assert.deepEqual(
      [...seen.keys()].sort(),
      [
        "accepted",
        "bad_signature",
        "expired",
        "malformed",
        "not_yet_valid",
        "unknown_key",
        "wrong_audience",
        "wrong_issuer",
      ],
      JSON.stringify(Object.fromEntries(seen)),
    );
  });
});
