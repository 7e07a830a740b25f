import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import fc from "fast-check";
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from "jose";
import { ACCESS_TOKEN_RULES } from "../../../src/domain/tokens/access-tokens.js";
import { verifyJwt, type JwtRules } from "../../../packages/verifier/src/jws.js";
import { testKeys, type TestKey } from "../../helpers/ed25519-test-keys.js";

/**
 * The access-token verifier on node:crypto (packages/verifier/src/jws.ts, shared by the service and the verifier package) against jose's
 * jwtVerify, which it replaced: over generated tokens — valid, expired, not yet valid, tampered
 * in header, payload or signature, signed by another key, `alg: none`, wrong `typ`, `crit`,
 * malformed (base64url, segments, JSON, UTF-8) and huge — both must accept the same tokens with
 * the same claims and refuse the others with the same jose error code (and claim).
 *
 *   FUZZ_RUNS=N   cases (default 1000)   FUZZ_SEED=S   replay a run (the seed is in the title)
 */

const RUNS = Number(process.env.FUZZ_RUNS) > 0 ? Number(process.env.FUZZ_RUNS) : 1000;
const SEED =
  Number.isInteger(Number(process.env.FUZZ_SEED)) && process.env.FUZZ_SEED
    ? Number(process.env.FUZZ_SEED)
    : (Date.now() ^ (process.pid << 8)) | 0;

const ISSUER = "http://auth.test";
const AUDIENCE = "http://auth.test/v2";
const NOW = 1_900_000_000;
const TOLERANCE = ACCESS_TOKEN_RULES.clockToleranceSeconds;

type Key = TestKey;
const { k1, k2, outsider } = testKeys();
const KEY_SETS = { one: [k1], two: [k1, k2] } as const;

/** The same keys as jose's local JWK set (what the ring published) and as the new verifier's map. */
const jwksOf = (keys: readonly Key[]): JSONWebKeySet => ({
  keys: keys.map((k) => ({ ...k.publicKey.export({ format: "jwk" }), kid: k.kid, alg: "EdDSA", use: "sig" })),
});
const joseKeys = { one: createLocalJWKSet(jwksOf(KEY_SETS.one)), two: createLocalJWKSet(jwksOf(KEY_SETS.two)) };
const mapKeys = {
  one: new Map(KEY_SETS.one.map((k) => [k.kid, k.publicKey])),
  two: new Map(KEY_SETS.two.map((k) => [k.kid, k.publicKey])),
};

// ---- generated tokens ------------------------------------------------------------------------

const ABSENT = Symbol("absent");
/** `weighted(a, [b, c])`: mostly a (the valid choice), sometimes one of the others. */
const weighted = <T>(usual: T, others: readonly T[]) =>
  fc.oneof({ arbitrary: fc.constant(usual), weight: 8 }, { arbitrary: fc.constantFrom(...others), weight: 1 });

const header = fc.record({
  alg: weighted<unknown>("EdDSA", ["none", "HS256", "ES256", "RS256", "Ed25519", "eddsa", "", 5, null, ABSENT]),
  typ: weighted<unknown>("at+jwt", [
    "AT+JWT",
    "application/at+jwt",
    "Application/At+Jwt",
    "JWT",
    "jwt",
    "application/jwt",
    "at+jwt ",
    "",
    1,
    ABSENT,
  ]),
  kid: fc.oneof(
    { arbitrary: fc.constant<unknown>(k1.kid), weight: 6 },
    { arbitrary: fc.constant<unknown>(ABSENT), weight: 2 },
    { arbitrary: fc.constantFrom<unknown>(k2.kid, outsider.kid, "", 5, null, "__proto__"), weight: 1 },
  ),
  /** RFC 7515 `crit` and RFC 7797 `b64`, in pairs: nothing (mostly), `b64: false`, or something jose refuses or ignores. */
  critical: fc.oneof(
    { arbitrary: fc.constant({ crit: ABSENT as unknown, b64: ABSENT as unknown }), weight: 6 },
    { arbitrary: fc.constant({ crit: ["b64"] as unknown, b64: false as unknown }), weight: 1 },
    {
      arbitrary: fc.record({
        crit: fc.constantFrom<unknown>(
          ABSENT,
          [],
          ["b64"],
          ["b64", "b64"],
          ["exp"],
          ["b64", "x"],
          ["x", "b64"],
          "b64",
          [""],
          [1],
          null,
        ),
        b64: fc.constantFrom<unknown>(ABSENT, true, false, "false"),
      }),
      weight: 1,
    },
  ),
});
const headerObject = (h: typeof header extends fc.Arbitrary<infer T> ? T : never) => {
  const { critical, ...rest } = h;
  return withoutAbsent({ ...rest, ...critical });
};

/** An instant (epoch seconds) `edge` seconds from NOW give or take 3, or anywhere within a day or so. */
const around = (edge: number) =>
  fc
    .oneof(fc.integer({ min: edge - 3, max: edge + 3 }), fc.integer({ min: -100_000, max: 100_000 }))
    .map((seconds) => NOW + seconds);

const CLAIM_NAMES = ["iss", "sub", "aud", "iat", "exp", "jti", "client_id", "tmc_id", "role", "gen", "nbf"] as const;
const claims = fc.record({
  iss: weighted<unknown>(ISSUER, ["http://evil.test", `${ISSUER}/`, 7, null]),
  sub: fc.constant("client-1"),
  aud: weighted<unknown>(AUDIENCE, [[AUDIENCE, "http://other"], ["http://other"], "http://other", [], 5, [5], null]),
  iat: fc.oneof(
    { arbitrary: around(0), weight: 8 },
    { arbitrary: fc.constantFrom<unknown>("1900000000", null), weight: 1 },
  ),
  exp: fc.oneof(
    { arbitrary: fc.integer({ min: NOW + 1, max: NOW + 100_000 }), weight: 4 },
    { arbitrary: around(-TOLERANCE), weight: 4 },
    { arbitrary: fc.constantFrom<unknown>("1", null, true), weight: 1 },
  ),
  nbf: fc.oneof(
    { arbitrary: fc.constant<unknown>(ABSENT), weight: 3 },
    { arbitrary: around(TOLERANCE), weight: 2 },
    { arbitrary: fc.constant<unknown>("0"), weight: 1 },
  ),
  jti: fc.constant("jti-1"),
  client_id: fc.constant("client-1"),
  tmc_id: fc.constant("tmc-1"),
  role: fc.constant("TMC_ADMIN"),
  gen: fc.constant(1),
  removed: fc.oneof(
    { arbitrary: fc.constant([] as string[]), weight: 4 },
    { arbitrary: fc.subarray([...CLAIM_NAMES], { maxLength: 3 }), weight: 1 },
  ),
  huge: fc.oneof({ arbitrary: fc.constant(0), weight: 20 }, { arbitrary: fc.constant(300_000), weight: 1 }),
});

/** Segments that are not base64url of a JSON object. */
const RAW_SEGMENTS = [
  "",
  "e30", // {}
  "W10", // []
  "bnVsbA", // null
  "MQ", // 1
  "Ins", // "{
  "e30=", // padded
  "e3 0",
  "e\n30",
  "e+30",
  "e/30",
  "e30.",
  "é30",
  "%e30",
  "A",
  Buffer.from([0xef, 0xbb, 0xbf, ...Buffer.from("{}")]).toString("base64url"), // BOM + {}
  Buffer.from([0x7b, 0xff, 0x7d]).toString("base64url"), // invalid UTF-8
  Buffer.from('{"a":1e999}').toString("base64url"),
];

const signing = fc.oneof(
  { arbitrary: fc.constant("named" as const), weight: 12 },
  {
    arbitrary: fc.constantFrom(
      "k1" as const,
      "k2" as const,
      "outsider" as const,
      "empty" as const,
      "garbage" as const,
      "short" as const,
    ),
    weight: 3,
  },
);
const mutation = fc.oneof(
  { arbitrary: fc.constant({ kind: "none" as const }), weight: 20 },
  {
    arbitrary: fc.record({ kind: fc.constant("raw-header" as const), raw: fc.constantFrom(...RAW_SEGMENTS) }),
    weight: 1,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant("raw-payload" as const),
      raw: fc.constantFrom(...RAW_SEGMENTS),
      resign: fc.boolean(),
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ kind: fc.constant("tamper-payload" as const) }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant("tamper-header" as const) }), weight: 1 },
  {
    arbitrary: fc.record({
      kind: fc.constant("char" as const),
      at: fc.nat(),
      insert: fc.boolean(),
      char: fc.constantFrom("A", "-", "_", "=", "+", "/", " ", "\n", "\t", ".", "é", "\u0000", "~", "\u{1F600}"),
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ kind: fc.constant("segments" as const), count: fc.constantFrom(1, 2, 4, 5) }), weight: 1 },
);

const caseOf = fc.record({
  header,
  claims,
  signing,
  mutation,
  keySet: fc.constantFrom("one" as const, "two" as const),
  audience: fc.constantFrom<string | undefined>(AUDIENCE, undefined),
});
type Case = typeof caseOf extends fc.Arbitrary<infer T> ? T : never;

const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64url");
const withoutAbsent = (record: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(record).filter(([, v]) => v !== ABSENT));

function tokenOf(c: Case): string {
  const { removed, huge, ...claimValues } = c.claims;
  const payloadObject = withoutAbsent(claimValues);
  for (const name of removed) delete payloadObject[name];
  if (huge) payloadObject.padding = "x".repeat(huge);
  let h = b64(JSON.stringify(headerObject(c.header)));
  let p = b64(JSON.stringify(payloadObject));
  const m = c.mutation;
  if (m.kind === "raw-header") h = m.raw;
  if (m.kind === "raw-payload" && m.resign) p = m.raw;
  const s = signatureOf(c, `${h}.${p}`);
  if (m.kind === "raw-payload" && !m.resign) p = m.raw;
  if (m.kind === "tamper-payload") p = b64(JSON.stringify({ ...payloadObject, role: "COMPANY_ADMIN", gen: 2 }));
  if (m.kind === "tamper-header") h = b64(JSON.stringify({ ...headerObject(c.header), kid: k2.kid }));
  let token = `${h}.${p}.${s}`;
  if (m.kind === "char") {
    const at = m.at % (token.length + 1);
    token = token.slice(0, at) + m.char + token.slice(m.insert ? at : at + 1);
  }
  if (m.kind === "segments") {
    const parts = token.split(".");
    token = m.count < 3 ? parts.slice(0, m.count).join(".") : [...parts, ...Array(m.count - 3).fill(s)].join(".");
  }
  return token;
}

function signatureOf(c: Case, input: string): string {
  const sign = (key: Key) => crypto.sign(null, Buffer.from(input), key.privateKey).toString("base64url");
  switch (c.signing) {
    case "named":
      return sign(c.header.kid === k2.kid ? k2 : c.header.kid === outsider.kid ? outsider : k1);
    case "k1":
      return sign(k1);
    case "k2":
      return sign(k2);
    case "outsider":
      return sign(outsider);
    case "empty":
      return "";
    case "garbage":
      return crypto.randomBytes(64).toString("base64url");
    case "short":
      return sign(k1).slice(0, 40);
  }
}

// ---- the two verifiers -----------------------------------------------------------------------

type Outcome = { accepted: true; claims: unknown } | { accepted: false; code: string; claim: string | undefined };

function refusal(error: unknown): Outcome {
  const e = error as { code?: unknown; claim?: unknown; name?: unknown };
  return {
    accepted: false,
    code: typeof e.code === "string" ? e.code : `not a jose error: ${String(e.name)}`,
    claim: typeof e.claim === "string" ? e.claim : undefined,
  };
}

async function byJose(token: string, c: Case): Promise<Outcome> {
  try {
    const { payload } = await jwtVerify(token, joseKeys[c.keySet], {
      issuer: ISSUER,
      ...(c.audience ? { audience: c.audience } : {}),
      algorithms: [...ACCESS_TOKEN_RULES.algorithms],
      typ: ACCESS_TOKEN_RULES.typ,
      currentDate: new Date(NOW * 1000),
      clockTolerance: ACCESS_TOKEN_RULES.clockToleranceSeconds,
      requiredClaims: [...ACCESS_TOKEN_RULES.requiredClaims],
    });
    return { accepted: true, claims: payload };
  } catch (error) {
    return refusal(error);
  }
}

async function byNodeCrypto(token: string, c: Case): Promise<Outcome> {
  const rules: JwtRules = {
    ...ACCESS_TOKEN_RULES,
    issuer: ISSUER,
    ...(c.audience ? { audience: c.audience } : {}),
    now: new Date(NOW * 1000),
  };
  try {
    return { accepted: true, claims: await verifyJwt(token, () => mapKeys[c.keySet], rules) };
  } catch (error) {
    return refusal(error);
  }
}

const outcomeName = (o: Outcome) => (o.accepted ? "accepted" : `${o.code}${o.claim ? `:${o.claim}` : ""}`);

describe(`jwt-verifier: the same decisions as jose's jwtVerify (seed ${SEED})`, () => {
  test("generated tokens: the same acceptance, claims, error code and claim", async () => {
    const seen = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(caseOf, async (c) => {
        const token = tokenOf(c);
        const [jose, ours] = [await byJose(token, c), await byNodeCrypto(token, c)];
        assert.deepEqual(ours, jose, `token ${token.length > 300 ? `${token.slice(0, 300)}…` : token}`);
        seen.set(outcomeName(jose), (seen.get(outcomeName(jose)) ?? 0) + 1);
      }),
      { numRuns: RUNS, seed: SEED },
    );
    if (process.env.FUZZ_VERBOSE === "1") console.log(Object.fromEntries(seen));
    // The generator reached every decision: each refusal class and acceptance.
    const reached = [...seen.keys()];
    const expected = [
      "accepted",
      "ERR_JWS_INVALID",
      "ERR_JOSE_NOT_SUPPORTED",
      "ERR_JOSE_ALG_NOT_ALLOWED",
      "ERR_JWKS_NO_MATCHING_KEY",
      "ERR_JWKS_MULTIPLE_MATCHING_KEYS",
      "ERR_JWS_SIGNATURE_VERIFICATION_FAILED",
      "ERR_JWT_INVALID",
      "ERR_JWT_CLAIM_VALIDATION_FAILED:typ",
      "ERR_JWT_CLAIM_VALIDATION_FAILED:iss",
      "ERR_JWT_CLAIM_VALIDATION_FAILED:aud",
      "ERR_JWT_CLAIM_VALIDATION_FAILED:nbf",
      "ERR_JWT_EXPIRED:exp",
    ];
    if (RUNS >= 1000) {
      assert.deepEqual(
        expected.filter((name) => !reached.includes(name)),
        [],
        `outcomes reached: ${JSON.stringify(Object.fromEntries(seen))}`,
      );
    }
  });

  test("named cases: alg none, another key, wrong typ, crit, b64 false, expiry and nbf at the tolerance's edge", async () => {
    const base: Case = {
      header: { alg: "EdDSA", typ: "at+jwt", kid: k1.kid, critical: { crit: ABSENT, b64: ABSENT } },
      claims: {
        iss: ISSUER,
        sub: "client-1",
        aud: AUDIENCE,
        iat: 0,
        exp: 0,
        nbf: ABSENT,
        jti: "jti-1",
        client_id: "client-1",
        tmc_id: "tmc-1",
        role: "TMC_ADMIN",
        gen: 1,
        removed: [],
        huge: 0,
      },
      signing: "named",
      mutation: { kind: "none" },
      keySet: "two",
      audience: AUDIENCE,
    };
    const at = (exp: number, nbf: unknown = ABSENT): Case => ({
      ...base,
      claims: { ...base.claims, iat: NOW - 60, exp: NOW + exp, nbf: typeof nbf === "number" ? NOW + nbf : nbf },
    });
    const valid = at(60);
    const cases: Array<[string, Case, string]> = [
      ["valid", valid, "accepted"],
      ["exp at now - tolerance + 1", at(-TOLERANCE + 1), "accepted"],
      ["exp at now - tolerance", at(-TOLERANCE), "ERR_JWT_EXPIRED:exp"],
      ["nbf at now + tolerance", at(60, TOLERANCE), "accepted"],
      ["nbf at now + tolerance + 1", at(60, TOLERANCE + 1), "ERR_JWT_CLAIM_VALIDATION_FAILED:nbf"],
      [
        "alg none, no signature",
        { ...valid, header: { ...valid.header, alg: "none" }, signing: "empty" },
        "ERR_JOSE_ALG_NOT_ALLOWED",
      ],
      ["another key under a known kid", { ...valid, signing: "outsider" }, "ERR_JWS_SIGNATURE_VERIFICATION_FAILED"],
      ["an unknown kid", { ...valid, header: { ...valid.header, kid: outsider.kid } }, "ERR_JWKS_NO_MATCHING_KEY"],
      ["no kid, two keys", { ...valid, header: { ...valid.header, kid: ABSENT } }, "ERR_JWKS_MULTIPLE_MATCHING_KEYS"],
      ["no kid, one key", { ...valid, header: { ...valid.header, kid: ABSENT }, keySet: "one" }, "accepted"],
      ["typ JWT", { ...valid, header: { ...valid.header, typ: "JWT" } }, "ERR_JWT_CLAIM_VALIDATION_FAILED:typ"],
      ["typ application/AT+JWT", { ...valid, header: { ...valid.header, typ: "application/AT+JWT" } }, "accepted"],
      [
        "crit naming an unknown extension",
        { ...valid, header: { ...valid.header, critical: { crit: ["exp"], b64: ABSENT } } },
        "ERR_JOSE_NOT_SUPPORTED",
      ],
      [
        "crit b64 with b64 false",
        { ...valid, header: { ...valid.header, critical: { crit: ["b64"], b64: false } } },
        "ERR_JWT_INVALID",
      ],
      ["tampered payload", { ...valid, mutation: { kind: "tamper-payload" } }, "ERR_JWS_SIGNATURE_VERIFICATION_FAILED"],
      [
        "a missing gen",
        { ...valid, claims: { ...valid.claims, removed: ["gen"] } },
        "ERR_JWT_CLAIM_VALIDATION_FAILED:gen",
      ],
      [
        "another audience",
        { ...valid, claims: { ...valid.claims, aud: ["http://other"] } },
        "ERR_JWT_CLAIM_VALIDATION_FAILED:aud",
      ],
    ];
    for (const [name, c, expected] of cases) {
      const token = tokenOf(c);
      const [jose, ours] = [await byJose(token, c), await byNodeCrypto(token, c)];
      assert.equal(outcomeName(jose), expected, `jose, ${name}`);
      assert.deepEqual(ours, jose, name);
    }
  });
});
