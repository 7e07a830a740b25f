import crypto from "node:crypto";
import { decodeJwt, importJWK, type JSONWebKeySet, type JWK } from "jose";
import { invalidArgument } from "../../errors/domain-error.js";
import { PRIVATE_JWK_MEMBERS } from "../../../packages/verifier/src/dpop-proof.js";
import { keyTypeFits, signatureHoldsFor, unverifiedJsonOf } from "../../../packages/verifier/src/jws.js";

/**
 * private_key_jwt (RFC 7523 2.2, RFC 7521 4.2, OpenID Connect Core 9): a client proves who it is
 * with a JWT signed by a key whose public half it registered, instead of a shared secret.
 */

/** RFC 7523 2.2: the only client_assertion_type there is. */
export const CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/**
 * The algorithms an assertion may be signed with (RFC 8414 token_endpoint_auth_signing_alg_values_supported):
 * asymmetric only — `none` and HMAC (which a server holding the public key could be tricked into
 * verifying with it as the secret) are refused; RSA keys of at least 2048 bits (jose enforces it).
 * Ed25519 is EdDSA's fully-specified name (RFC 9864), which oauth4webapi signs with.
 */
export const ASSERTION_ALGORITHMS = ["EdDSA", "Ed25519", "ES256", "PS256", "RS256"] as const;

/** The longest an assertion may live from the moment it is presented: its `exp` at most this far ahead. */
export const ASSERTION_MAX_LIFETIME_SECONDS = 300;

/** The key types and curves the allowed algorithms use. */
const KEY_TYPES: Readonly<Record<string, readonly string[] | undefined>> = { OKP: ["Ed25519"], EC: ["P-256"], RSA: [] };
/** Members of a private or symmetric key: a registered set holds public keys only. */
export const MAX_CLIENT_KEYS = 10;

/**
 * A client's registered public key set, checked where it enters: 1 to MAX_CLIENT_KEYS public keys
 * (Ed25519, P-256, RSA ≥ 2048 bits) usable for signatures, distinct `kid`s. What is stored is
 * exactly the keys' public members, never anything else the request carried.
 */
export async function clientKeySetOf(jwks: unknown): Promise<JSONWebKeySet> {
  const kids = new Set<string>();
  const checked: JWK[] = [];
  for (const [index, key] of keySetMembersOf(jwks, MAX_CLIENT_KEYS).entries()) {
    const jwk = key as JWK;
    const at = `jwks.keys[${index}]`;
    if (typeof jwk !== "object" || jwk === null || typeof jwk.kty !== "string")
      throw refusedKeySet(`${at} is not a JWK`);
    if (PRIVATE_JWK_MEMBERS.some((member) => member in jwk))
      throw refusedKeySet(`${at} must be a public key (no private members)`);
    const curves = KEY_TYPES[jwk.kty];
    if (!curves || (curves.length > 0 && !curves.includes(String(jwk.crv))))
      throw refusedKeySet(`${at}: only Ed25519, P-256 and RSA keys are accepted`);
    if (jwk.use !== undefined && jwk.use !== "sig") throw refusedKeySet(`${at}: use must be "sig"`);
    if (jwk.alg !== undefined && !(ASSERTION_ALGORITHMS as readonly string[]).includes(jwk.alg))
      throw refusedKeySet(`${at}: alg must be one of ${ASSERTION_ALGORITHMS.join(", ")}`);
    if (jwk.kid !== undefined && (typeof jwk.kid !== "string" || kids.has(jwk.kid)))
      throw refusedKeySet(`${at}: kid must be a string, distinct within the set`);
    if (jwk.kid !== undefined) kids.add(jwk.kid);
    const alg = jwk.alg ?? (jwk.kty === "OKP" ? "EdDSA" : jwk.kty === "EC" ? "ES256" : "RS256");
    const publicMembers = publicJwk(jwk);
    try {
      await importJWK(publicMembers, alg);
    } catch {
      throw refusedKeySet(`${at} is not a valid ${jwk.kty} public key`);
    }
    if (jwk.kty === "RSA" && Buffer.from(String(jwk.n), "base64url").length * 8 < 2048)
      throw refusedKeySet(`${at}: RSA keys must have at least 2048 bits`);
    checked.push(publicMembers);
  }
  return { keys: checked };
}

/** A key set refused where it enters: 400 naming `jwks`, with the rule it breaks. */
export function refusedKeySet(message: string) {
  return invalidArgument(message, [{ name: "jwks", value: "invalid" }]);
}

/** The members of a JWK Set document holding 1 to `max` keys (each still to check), or refusedKeySet. */
export function keySetMembersOf(jwks: unknown, max: number): readonly unknown[] {
  const keys = (jwks as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0 || keys.length > max)
    throw refusedKeySet(`jwks must be a JWK Set with 1 to ${max} keys`);
  return keys as unknown[];
}

/** A key set given as a JSON document (the operator's commands): the document, or 400 naming `jwks`. */
export function jwksDocumentOf(jwks: string): unknown {
  try {
    return JSON.parse(jwks);
  } catch {
    throw invalidArgument("jwks must be a JSON document", [{ name: "jwks", value: "not JSON" }]);
  }
}

/** The keys of a registered set as the answers name them: each key's kid, or its place in the set (#index). */
export function registeredKeyIds(jwks: JSONWebKeySet): string[] {
  return jwks.keys.map((key, index) => key.kid ?? `#${index}`);
}

/** A key's public members (what a verifier needs), nothing else it carried: no x5c, no key_ops, no extra members. */
export function publicJwk(jwk: JWK): JWK {
  const members = ["kty", "kid", "use", "alg", "crv", "x", "y", "n", "e"] as const;
  return Object.fromEntries(members.filter((m) => jwk[m] !== undefined).map((m) => [m, jwk[m]])) as JWK;
}

/** The client id an assertion names (its `sub`, else its `iss`), unverified: who it claims to be. */
export function assertionSubject(assertion: string): string {
  try {
    const claims = decodeJwt(assertion);
    const sub = typeof claims.sub === "string" ? claims.sub : typeof claims.iss === "string" ? claims.iss : "";
    return sub.slice(0, 256);
  } catch {
    return "";
  }
}

/** What a verified assertion leaves to check once: its id, until it expires. */
export interface VerifiedAssertion {
  readonly jti: string;
  readonly expiresAt: Date;
}

/** Why an assertion was refused, for the log only (never the assertion itself). */
export type AssertionRefusal = `assertion ${string}`;

/** A registered key imported once, with what selecting it by a header's `alg` and `kid` reads. */
interface PreparedKey {
  readonly jwk: JWK;
  readonly key: crypto.KeyObject;
}

/** Each registered set's keys imported once (a set is replaced, never changed, when keys rotate). */
const preparedSets = new WeakMap<JSONWebKeySet, readonly PreparedKey[]>();

function preparedKeysOf(jwks: JSONWebKeySet): readonly PreparedKey[] {
  let prepared = preparedSets.get(jwks);
  if (!prepared) {
    prepared = jwks.keys.flatMap((jwk) => {
      try {
        return [{ jwk, key: crypto.createPublicKey({ key: jwk as crypto.JsonWebKey, format: "jwk" }) }];
      } catch {
        return []; // checked at registration (clientKeySetOf): only a set that bypassed it has such a key
      }
    });
    preparedSets.set(jwks, prepared);
  }
  return prepared;
}

/**
 * The registered keys that may have signed under `alg` and `kid`, as jose's local JWK Set picks
 * them: the algorithm's key type and curve, the same `kid` when the header names one, the key's
 * own `alg` when it has one (an Ed25519 key's EdDSA and Ed25519 are one algorithm), `use` sig.
 */
function candidatesFor(keys: readonly PreparedKey[], alg: string, kid: unknown): PreparedKey[] {
  return keys.filter(({ jwk }) => {
    if (!keyTypeFits(jwk, alg)) return false;
    if (kid !== undefined && (typeof kid !== "string" || kid !== jwk.kid)) return false;
    if (jwk.alg !== undefined && jwk.kty !== "OKP" && jwk.alg !== alg) return false;
    return jwk.use === undefined || jwk.use === "sig";
  });
}

const BASE64URL = /^[A-Za-z0-9_-]+$/;

/**
 * Verifies `assertion` for `clientId`: signed by a key of `jwks` with an allowed algorithm,
 * `iss` = `sub` = the client id, `aud` one of `audiences`, an `exp` in the future and at most
 * ASSERTION_MAX_LIFETIME_SECONDS ahead, a `jti`. The refusal names which rule failed.
 *
 * Synchronous, with node:crypto on keys imported once per registered set (the verifier
 * package's signature check, jws.ts): jose's `jwtVerify` went through WebCrypto's job queue, the
 * largest cost of a private_key_jwt token request. It decides as `jwtVerify` did with these rules,
 * check for check (test/unit/domain/client-assertion.test.ts compares both), except that any
 * `crit` header is refused (jose understands `b64`; no client assertion uses it).
 */
export function verifyClientAssertion(
  assertion: string,
  jwks: JSONWebKeySet,
  expected: { readonly clientId: string; readonly audiences: readonly string[]; readonly now: Date },
): VerifiedAssertion | AssertionRefusal {
  const parts = assertion.split(".");
  if (parts.length !== 3) return "assertion is not a JWS";
  const [headerSegment, payloadSegment, signatureSegment] = parts as [string, string, string];
  const header = BASE64URL.test(headerSegment) ? unverifiedJsonOf(headerSegment) : undefined;
  if (!header) return "assertion is not a JWS";
  const alg = header.alg;
  if (typeof alg !== "string" || !(ASSERTION_ALGORITHMS as readonly string[]).includes(alg))
    return `assertion algorithm not allowed: ${String(alg).slice(0, 20)}`;
  if (header.crit !== undefined) return "assertion invalid (ERR_JOSE_NOT_SUPPORTED)";
  const candidates = candidatesFor(preparedKeysOf(jwks), alg, header.kid);
  // None, or more than one without a kid to tell them apart (jose: JWKSMultipleMatchingKeys).
  if (candidates.length !== 1) return "assertion signed by no registered key";
  if (!BASE64URL.test(signatureSegment)) return "assertion invalid (ERR_JWS_INVALID)";
  const signature = Buffer.from(signatureSegment, "base64url");
  if (!signatureHoldsFor(alg, candidates[0]!.key, `${headerSegment}.${payloadSegment}`, signature))
    return "assertion signature does not verify";
  const claims = BASE64URL.test(payloadSegment) ? unverifiedJsonOf(payloadSegment) : undefined;
  if (!claims) return "assertion invalid (ERR_JWT_INVALID)";
  return claimsRefusal(claims, expected) ?? acceptedClaims(claims, expected.now);
}

/** jose's claim checks for these rules, in its order: presence (jti, exp, aud, sub, iss), iss, sub, aud, iat, nbf, exp. */
function claimsRefusal(
  claims: Record<string, unknown>,
  expected: { readonly clientId: string; readonly audiences: readonly string[]; readonly now: Date },
): AssertionRefusal | undefined {
  for (const claim of ["jti", "exp", "aud", "sub", "iss"])
    if (!Object.hasOwn(claims, claim)) return `assertion claim ${claim} missing`;
  if (claims.iss !== expected.clientId) return "assertion claim iss check_failed";
  if (claims.sub !== expected.clientId) return "assertion claim sub check_failed";
  const aud = claims.aud;
  const audiences = typeof aud === "string" ? [aud] : Array.isArray(aud) ? aud : [];
  if (!audiences.some((a) => expected.audiences.includes(a as string))) return "assertion claim aud check_failed";
  const notNumber = (claim: string) => claims[claim] !== undefined && typeof claims[claim] !== "number";
  const now = Math.floor(expected.now.getTime() / 1000);
  if (notNumber("iat")) return "assertion claim iat invalid";
  if (notNumber("nbf")) return "assertion claim nbf invalid";
  if (claims.nbf !== undefined && (claims.nbf as number) > now) return "assertion claim nbf check_failed";
  if (notNumber("exp")) return "assertion claim exp invalid";
  if ((claims.exp as number) <= now) return "assertion expired";
  return undefined;
}

/** The limits of this service on top of jose's rules: `exp` not too far ahead, a usable `jti`. */
function acceptedClaims(claims: Record<string, unknown>, now: Date): VerifiedAssertion | AssertionRefusal {
  const exp = claims.exp as number;
  if (exp > Math.floor(now.getTime() / 1000) + ASSERTION_MAX_LIFETIME_SECONDS)
    return `assertion exp more than ${ASSERTION_MAX_LIFETIME_SECONDS} s ahead`;
  const jti = claims.jti;
  if (typeof jti !== "string" || jti === "" || jti.length > 256) return "assertion jti missing or too long";
  return { jti, expiresAt: new Date(exp * 1000) };
}
