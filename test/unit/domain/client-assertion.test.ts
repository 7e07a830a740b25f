import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import {
  createLocalJWKSet,
  decodeProtectedHeader,
  errors,
  exportJWK,
  generateKeyPair,
  importJWK,
  jwtVerify,
  SignJWT,
  type CryptoKey,
  type JSONWebKeySet,
  type JWTPayload,
} from "jose";
import {
  ASSERTION_ALGORITHMS,
  ASSERTION_MAX_LIFETIME_SECONDS,
  clientKeySetOf,
  verifyClientAssertion,
  type AssertionRefusal,
  type VerifiedAssertion,
} from "../../../src/domain/shared/client-assertion.js";

/**
 * verifyClientAssertion checks with node:crypto what jose's jwtVerify checked before it (one
 * WebCrypto job per assertion was the largest cost of a private_key_jwt token request). The oracle
 * below is that former implementation, kept here: over assertions signed by jose (an independent
 * signer) with every kind of key and every rule broken once, both must reach the same verdict and
 * name the same reason.
 */
async function joseVerdict(
  assertion: string,
  jwks: JSONWebKeySet,
  expected: { clientId: string; audiences: readonly string[]; now: Date },
): Promise<VerifiedAssertion | AssertionRefusal> {
  let alg: string | undefined;
  try {
    alg = decodeProtectedHeader(assertion).alg;
  } catch {
    return "assertion is not a JWS";
  }
  if (!(ASSERTION_ALGORITHMS as readonly string[]).includes(alg ?? ""))
    return `assertion algorithm not allowed: ${String(alg).slice(0, 20)}`;
  const keySet = createLocalJWKSet({
    keys: jwks.keys.map((key) => (key.kty === "OKP" ? { ...key, alg: undefined } : key)),
  });
  try {
    const { payload } = await jwtVerify(assertion, keySet, {
      algorithms: [...ASSERTION_ALGORITHMS],
      issuer: expected.clientId,
      subject: expected.clientId,
      audience: [...expected.audiences],
      currentDate: expected.now,
      requiredClaims: ["exp", "jti"],
    });
    const nowSeconds = Math.floor(expected.now.getTime() / 1000);
    if (payload.exp! > nowSeconds + ASSERTION_MAX_LIFETIME_SECONDS)
      return `assertion exp more than ${ASSERTION_MAX_LIFETIME_SECONDS} s ahead`;
    if (typeof payload.jti !== "string" || payload.jti === "" || payload.jti.length > 256)
      return "assertion jti missing or too long";
    return { jti: payload.jti, expiresAt: new Date(payload.exp! * 1000) };
  } catch (error) {
    if (error instanceof errors.JWTExpired) return "assertion expired";
    if (error instanceof errors.JWTClaimValidationFailed) return `assertion claim ${error.claim} ${error.reason}`;
    if (error instanceof errors.JWSSignatureVerificationFailed) return "assertion signature does not verify";
    if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys)
      return "assertion signed by no registered key";
    if (error instanceof errors.JOSEAlgNotAllowed) return "assertion algorithm not allowed";
    if (error instanceof errors.JOSEError) return `assertion invalid (${error.code})`;
    return "assertion invalid";
  }
}

const CLIENT = "api-user-1";
const AUDIENCE = "https://auth.example/v2/auth/oauth2-token";
const NOW = new Date("2026-11-29T12:00:00Z");
const NOW_S = Math.floor(NOW.getTime() / 1000);
const expected = { clientId: CLIENT, audiences: [AUDIENCE, "https://auth.example"], now: NOW };

type Signer = { alg: string; key: CryptoKey | Uint8Array; kid?: string };

async function keyPair(alg: string, options: Parameters<typeof generateKeyPair>[1] = {}) {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true, ...options });
  return { publicJwk: await exportJWK(publicKey), privateKey };
}

async function sign(signer: Signer, claims: JWTPayload, header: Record<string, unknown> = {}): Promise<string> {
  // An RSA key signs under RS256 and PS256 alike: WebCrypto ties a key to one, so it is imported for the one used.
  const key = signer.key instanceof Uint8Array ? signer.key : await importJWK(await exportJWK(signer.key), signer.alg);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: signer.alg, ...(signer.kid ? { kid: signer.kid } : {}), ...header })
    .sign(key);
}

const good = (overrides: JWTPayload = {}): JWTPayload => ({
  iss: CLIENT,
  sub: CLIENT,
  aud: AUDIENCE,
  jti: "jti-1",
  iat: NOW_S,
  exp: NOW_S + 60,
  ...overrides,
});

describe("client assertions: node:crypto decides as jose's jwtVerify did", async () => {
  const ed = await keyPair("EdDSA");
  const ec = await keyPair("ES256");
  const rsa = await keyPair("RS256", { modulusLength: 2048 });
  const stranger = await keyPair("EdDSA");
  const jwks = await clientKeySetOf({
    keys: [
      { ...ed.publicJwk, kid: "ed" },
      { ...ec.publicJwk, kid: "ec", alg: "ES256" },
      { ...rsa.publicJwk, kid: "rsa" },
    ],
  });
  const single = await clientKeySetOf({ keys: [ed.publicJwk] });
  const twoUnnamed = await clientKeySetOf({ keys: [ed.publicJwk, stranger.publicJwk] });
  const rsaOnlyRs256 = await clientKeySetOf({ keys: [{ ...rsa.publicJwk, kid: "rsa", alg: "RS256" }] });

  const ES = { alg: "EdDSA", key: ed.privateKey, kid: "ed" };
  const cases: Array<[string, Promise<string> | string, JSONWebKeySet?]> = [
    ["EdDSA", sign(ES, good())],
    ["Ed25519 (RFC 9864 name)", sign({ ...ES, alg: "Ed25519" }, good())],
    ["ES256", sign({ alg: "ES256", key: ec.privateKey, kid: "ec" }, good())],
    ["RS256", sign({ alg: "RS256", key: rsa.privateKey, kid: "rsa" }, good())],
    ["PS256", sign({ alg: "PS256", key: rsa.privateKey, kid: "rsa" }, good())],
    [
      "PS256 with a key registered for RS256",
      sign({ alg: "PS256", key: rsa.privateKey, kid: "rsa" }, good()),
      rsaOnlyRs256,
    ],
    ["no kid, one key", sign({ alg: "EdDSA", key: ed.privateKey }, good()), single],
    ["no kid, two keys", sign({ alg: "EdDSA", key: ed.privateKey }, good()), twoUnnamed],
    ["no kid, one key of the algorithm's type among three", sign({ alg: "ES256", key: ec.privateKey }, good())],
    ["unknown kid", sign({ ...ES, kid: "other" }, good())],
    ["a kid that is a number", sign(ES, good(), { kid: 7 })],
    ["signed by a stranger", sign({ alg: "EdDSA", key: stranger.privateKey, kid: "ed" }, good())],
    ["ES256 header on the Ed25519 key's kid", sign({ alg: "ES256", key: ec.privateKey, kid: "ed" }, good())],
    ["alg none", `${b64({ alg: "none", kid: "ed" })}.${b64(good())}.`],
    ["alg HS256 (HMAC confusion)", sign({ alg: "HS256", key: new Uint8Array(32), kid: "ed" }, good())],
    ["alg ES384 (not allowed)", sign({ alg: "ES384", key: (await keyPair("ES384")).privateKey, kid: "ec" }, good())],
    ["no alg", `${b64({ kid: "ed" })}.${b64(good())}.c2ln`],
    ["tampered payload", sign(ES, good()).then((t) => swapPayload(t, good({ sub: "someone-else" })))],
    ["signature not base64url", sign(ES, good()).then((t) => `${t.slice(0, t.lastIndexOf("."))}.a+b/`)],
    ["payload not JSON (signed)", signRaw(ed.privateKey, { alg: "EdDSA", kid: "ed" }, Buffer.from("not json"))],
    ["payload a JSON array (signed)", signRaw(ed.privateKey, { alg: "EdDSA", kid: "ed" }, Buffer.from("[1]"))],
    ["header not JSON", `${Buffer.from("{nope").toString("base64url")}.${b64(good())}.c2ln`],
    ["two segments", sign(ES, good()).then((t) => t.slice(0, t.lastIndexOf(".")))],
    ["missing jti", sign(ES, good({ jti: undefined }))],
    ["missing exp", sign(ES, good({ exp: undefined }))],
    ["missing aud", sign(ES, good({ aud: undefined }))],
    ["missing sub", sign(ES, good({ sub: undefined }))],
    ["missing iss", sign(ES, good({ iss: undefined }))],
    ["wrong iss", sign(ES, good({ iss: "someone-else" }))],
    ["wrong sub", sign(ES, good({ sub: "someone-else" }))],
    ["wrong aud", sign(ES, good({ aud: "https://elsewhere.example/token" }))],
    ["aud an array with the issuer", sign(ES, good({ aud: ["https://x.example", "https://auth.example"] }))],
    ["aud an empty array", sign(ES, good({ aud: [] }))],
    ["expired", sign(ES, good({ exp: NOW_S - 1 }))],
    ["exp now", sign(ES, good({ exp: NOW_S }))],
    ["exp too far ahead", sign(ES, good({ exp: NOW_S + ASSERTION_MAX_LIFETIME_SECONDS + 1 }))],
    ["exp at the limit", sign(ES, good({ exp: NOW_S + ASSERTION_MAX_LIFETIME_SECONDS }))],
    ["nbf in the future", sign(ES, good({ nbf: NOW_S + 30 }))],
    [
      "nbf in the future and exp a string",
      signRaw(
        ed.privateKey,
        { alg: "EdDSA", kid: "ed" },
        json(good({ nbf: NOW_S + 30, exp: "soon" as unknown as number })),
      ),
    ],
    [
      "iat a string",
      signRaw(ed.privateKey, { alg: "EdDSA", kid: "ed" }, json(good({ iat: "now" as unknown as number }))),
    ],
    ["jti empty", sign(ES, good({ jti: "" }))],
    ["jti 257 characters", sign(ES, good({ jti: "j".repeat(257) }))],
    ["jti a number", signRaw(ed.privateKey, { alg: "EdDSA", kid: "ed" }, json(good({ jti: 7 as unknown as string })))],
  ];

  for (const [name, made, set] of cases) {
    test(name, async () => {
      const assertion = await made;
      const keys = set ?? jwks;
      const verdict = verifyClientAssertion(assertion, keys, expected);
      if (process.env.SHOW_VERDICTS) console.log(name, "→", verdict);
      assert.deepEqual(verdict, await joseVerdict(assertion, keys, expected));
    });
  }

  test("the cases cover both verdicts: accepted assertions and every kind of refusal", async () => {
    const verdicts = await Promise.all(
      cases.map(async ([, made, set]) => verifyClientAssertion(await made, set ?? jwks, expected)),
    );
    const refusals = new Set(verdicts.filter((v): v is AssertionRefusal => typeof v === "string"));
    assert.equal(
      verdicts.filter((v) => typeof v === "object").length,
      9,
      "EdDSA, Ed25519, ES256, RS256, PS256, two without kid, aud array, exp at the limit",
    );
    for (const reason of [
      "assertion signed by no registered key",
      "assertion signature does not verify",
      "assertion algorithm not allowed: none",
      "assertion algorithm not allowed: HS256",
      "assertion expired",
      "assertion claim aud check_failed",
      "assertion jti missing or too long",
    ])
      assert.ok(refusals.has(reason as AssertionRefusal), reason);
  });

  test("where it departs from jose on purpose: any `crit` header is refused (jose understands b64: true)", async () => {
    const assertion = await sign(ES, good(), { crit: ["b64"], b64: true });
    assert.equal(typeof (await joseVerdict(assertion, jwks, expected)), "object", "jose accepts it");
    assert.equal(verifyClientAssertion(assertion, jwks, expected), "assertion invalid (ERR_JOSE_NOT_SUPPORTED)");
  });
});

function b64(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString("base64url");
}

function json(value: object): Buffer {
  return Buffer.from(JSON.stringify(value));
}

function swapPayload(token: string, claims: object): string {
  const [header, , signature] = token.split(".");
  return `${header}.${b64(claims)}.${signature}`;
}

/** A JWS over arbitrary payload bytes (jose's SignJWT only signs JSON objects), signed with node:crypto. */
async function signRaw(privateKey: CryptoKey, header: object, payload: Buffer): Promise<string> {
  const key = crypto.KeyObject.from(privateKey);
  const input = `${b64(header)}.${payload.toString("base64url")}`;
  return `${input}.${crypto.sign(null, Buffer.from(input), key).toString("base64url")}`;
}
