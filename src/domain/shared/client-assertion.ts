import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  errors,
  importJWK,
  jwtVerify,
  type JSONWebKeySet,
  type JWK,
} from "jose";
import { invalidArgument } from "../../errors/domain-error.js";
import { PRIVATE_JWK_MEMBERS } from "../../../packages/verifier/src/dpop-proof.js";

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
  const refuse = (message: string) => invalidArgument(message, [{ name: "jwks", value: "invalid" }]);
  const keys = (jwks as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0 || keys.length > MAX_CLIENT_KEYS)
    throw refuse(`jwks must be a JWK Set with 1 to ${MAX_CLIENT_KEYS} keys`);
  const kids = new Set<string>();
  const checked: JWK[] = [];
  for (const [index, key] of (keys as unknown[]).entries()) {
    const jwk = key as JWK;
    const at = `jwks.keys[${index}]`;
    if (typeof jwk !== "object" || jwk === null || typeof jwk.kty !== "string") throw refuse(`${at} is not a JWK`);
    if (PRIVATE_JWK_MEMBERS.some((member) => member in jwk))
      throw refuse(`${at} must be a public key (no private members)`);
    const curves = KEY_TYPES[jwk.kty];
    if (!curves || (curves.length > 0 && !curves.includes(String(jwk.crv))))
      throw refuse(`${at}: only Ed25519, P-256 and RSA keys are accepted`);
    if (jwk.use !== undefined && jwk.use !== "sig") throw refuse(`${at}: use must be "sig"`);
    if (jwk.alg !== undefined && !(ASSERTION_ALGORITHMS as readonly string[]).includes(jwk.alg))
      throw refuse(`${at}: alg must be one of ${ASSERTION_ALGORITHMS.join(", ")}`);
    if (jwk.kid !== undefined && (typeof jwk.kid !== "string" || kids.has(jwk.kid)))
      throw refuse(`${at}: kid must be a string, distinct within the set`);
    if (jwk.kid !== undefined) kids.add(jwk.kid);
    const alg = jwk.alg ?? (jwk.kty === "OKP" ? "EdDSA" : jwk.kty === "EC" ? "ES256" : "RS256");
    const publicMembers = publicJwk(jwk);
    try {
      await importJWK(publicMembers, alg);
    } catch {
      throw refuse(`${at} is not a valid ${jwk.kty} public key`);
    }
    if (jwk.kty === "RSA" && Buffer.from(String(jwk.n), "base64url").length * 8 < 2048)
      throw refuse(`${at}: RSA keys must have at least 2048 bits`);
    checked.push(publicMembers);
  }
  return { keys: checked };
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

function publicJwk(jwk: JWK): JWK {
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

/** A key set prepared once per registered set: jose imports each key at first use and keeps it. */
const keySets = new WeakMap<JSONWebKeySet, ReturnType<typeof createLocalJWKSet>>();

/**
 * Verifies `assertion` for `clientId`: signed by a key of `jwks` with an allowed algorithm,
 * `iss` = `sub` = the client id, `aud` one of `audiences`, an `exp` in the future and at most
 * ASSERTION_MAX_LIFETIME_SECONDS ahead, a `jti`. The refusal names which rule failed.
 */
export async function verifyClientAssertion(
  assertion: string,
  jwks: JSONWebKeySet,
  expected: { readonly clientId: string; readonly audiences: readonly string[]; readonly now: Date },
): Promise<VerifiedAssertion | AssertionRefusal> {
  let alg: string | undefined;
  try {
    alg = decodeProtectedHeader(assertion).alg;
  } catch {
    return "assertion is not a JWS";
  }
  if (!(ASSERTION_ALGORITHMS as readonly string[]).includes(alg ?? ""))
    return `assertion algorithm not allowed: ${String(alg).slice(0, 20)}`;
  let keySet = keySets.get(jwks);
  if (!keySet) keySets.set(jwks, (keySet = createLocalJWKSet(verificationSet(jwks))));
  const nowSeconds = Math.floor(expected.now.getTime() / 1000);
  try {
    const { payload } = await jwtVerify(assertion, keySet, {
      algorithms: [...ASSERTION_ALGORITHMS],
      issuer: expected.clientId,
      subject: expected.clientId,
      audience: [...expected.audiences],
      currentDate: expected.now,
      requiredClaims: ["exp", "jti"],
    });
    if (payload.exp! > nowSeconds + ASSERTION_MAX_LIFETIME_SECONDS)
      return `assertion exp more than ${ASSERTION_MAX_LIFETIME_SECONDS} s ahead`;
    if (typeof payload.jti !== "string" || payload.jti === "" || payload.jti.length > 256)
      return "assertion jti missing or too long";
    return { jti: payload.jti, expiresAt: new Date(payload.exp! * 1000) };
  } catch (error) {
    return refusalOf(error);
  }
}

/**
 * The set as jose matches it: an Ed25519 key registered with alg EdDSA also verifies what is
 * signed under the algorithm's fully-specified name, Ed25519 (and the other way round).
 */
function verificationSet(jwks: JSONWebKeySet): JSONWebKeySet {
  return { keys: jwks.keys.map((key) => (key.kty === "OKP" ? { ...key, alg: undefined } : key)) };
}

function refusalOf(error: unknown): AssertionRefusal {
  if (error instanceof errors.JWTExpired) return "assertion expired";
  if (error instanceof errors.JWTClaimValidationFailed) return `assertion claim ${error.claim} ${error.reason}`;
  if (error instanceof errors.JWSSignatureVerificationFailed) return "assertion signature does not verify";
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys)
    return "assertion signed by no registered key";
  if (error instanceof errors.JOSEAlgNotAllowed) return "assertion algorithm not allowed";
  if (error instanceof errors.JOSEError) return `assertion invalid (${error.code})`;
  return "assertion invalid";
}
