// Compact JWS (RFC 7515) and JWT (RFC 7519) as this service signs and checks its access tokens:
// the one implementation, used by the service itself (src/domain/tokens/access-tokens.ts imports
// this file) and by the verifier package's resource servers, so both refuse the same tokens for
// the same reason. It imports node built-ins only (test/unit/architecture holds that), so the
// package stays self-contained and the service's build compiles it in.
import { isAscii } from "node:buffer";
import crypto from "node:crypto";

/**
 * Why a token was refused: the `code` of the jose error that jose's `jwtVerify` throws for the
 * same token (see `verifyJwt`), and for a claim check the claim (jose's `claim`).
 */
export type JwtRejectionCode =
  | "ERR_JWS_INVALID"
  | "ERR_JOSE_NOT_SUPPORTED"
  | "ERR_JOSE_ALG_NOT_ALLOWED"
  | "ERR_JWKS_NO_MATCHING_KEY"
  | "ERR_JWKS_MULTIPLE_MATCHING_KEYS"
  | "ERR_JWS_SIGNATURE_VERIFICATION_FAILED"
  | "ERR_JWT_INVALID"
  | "ERR_JWT_CLAIM_VALIDATION_FAILED"
  | "ERR_JWT_EXPIRED";

export class JwtRejected extends Error {
  constructor(
    readonly code: JwtRejectionCode,
    message: string,
    /** The claim (or "typ") a claim check refused. */
    readonly claim?: string,
  ) {
    super(message);
    this.name = "JwtRejected";
  }
}

/** What a token must satisfy: the options jose's `jwtVerify` took, written out. */
export interface JwtRules {
  readonly issuer: string;
  /** When set, `aud` must be or contain it; when not, any audience passes. */
  readonly audience?: string;
  /** The `alg` values accepted: only what the key ring signs with (never `none`). */
  readonly algorithms: ReadonlySet<string>;
  /** The expected `typ` header ("at+jwt"), compared as a media type (case-insensitive, "application/" optional). */
  readonly typ: string;
  /** Claims that must be present (whatever their value). */
  readonly requiredClaims: readonly string[];
  readonly clockToleranceSeconds: number;
  /** The moment to judge the time claims at; the system clock's when not given. */
  readonly now?: Date;
}

/** The public keys that verify, by kid, for the token's header `kid` (called once the header has passed). */
export type VerificationKeysFor = (
  kid: unknown,
  payloadSegment: string,
) => ReadonlyMap<string, crypto.KeyObject> | Promise<ReadonlyMap<string, crypto.KeyObject>>;

export type JwtClaims = Record<string, unknown>;

const rejected = (code: JwtRejectionCode, message: string, claim?: string) => new JwtRejected(code, message, claim);

/** A verified token: its protected header and its claims. Both are shared: read them, never change them. */
export interface VerifiedJws {
  readonly header: JwtClaims;
  readonly claims: JwtClaims;
}

/**
 * Verifies a compact JWS JWT signed by one of `keysFor`'s Ed25519 keys with node:crypto (one
 * `crypto.verify` on a cached KeyObject), and returns its claims. It makes exactly the decisions
 * jose 6's `jwtVerify` made with a local JWK set and the same rules, check for check and in the
 * same order, so a token refused by jose is refused here with the same error code
 * (test/unit/domain/jwt-verifier.test.ts compares both over generated tokens):
 *
 * three segments → protected header (base64url, UTF-8, a JSON object) → `crit` (only `b64` is
 * understood; anything else is refused) → `alg` (a non-empty string among `algorithms`) → the key
 * (the header's `kid`, or the only key when there is no `kid`) → signature → payload (base64url;
 * `b64: false` is refused) → claims (a JSON object) → `typ` → required claims → `iss` → `aud` →
 * `iat`/`nbf`/`exp` (numbers; `nbf` not after now + tolerance, `exp` after now − tolerance).
 */
export async function verifyJwt(token: string, keysFor: VerificationKeysFor, rules: JwtRules): Promise<JwtClaims> {
  return (await verifyJws(token, keysFor, rules)).claims;
}

/**
 * `verifyJwt`, header included, synchronous while `keysFor` answers synchronously (a known key:
 * no promise on the hot path); it throws `JwtRejected` then, and rejects with it otherwise.
 */
export function verifyJws(
  token: string,
  keysFor: VerificationKeysFor,
  rules: JwtRules,
): VerifiedJws | Promise<VerifiedJws> {
  const first = token.indexOf(".");
  const second = first < 0 ? -1 : token.indexOf(".", first + 1);
  if (second < 0 || token.indexOf(".", second + 1) !== -1) throw rejected("ERR_JWS_INVALID", "Invalid Compact JWS");
  const header = protectedHeaderOf(token.slice(0, first));
  const payloadSegment = token.slice(first + 1, second);
  const b64 = checkCritical(header);
  checkAlgorithm(header.alg, rules.algorithms);
  // The base64url alphabet is ASCII: only a segment outside it needs the ASCII check.
  const plain = BASE64URL.test(payloadSegment);
  // Unencoded (b64: false) payloads are checked for ASCII before the key is looked up, encoded ones after.
  if (!b64 && !plain) asciiSegment(payloadSegment);
  const keys = keysFor(header.kid, payloadSegment);
  if (keys instanceof Promise)
    return keys.then((found) => verifiedWith(token, payloadSegment, second, header, b64, plain, found, rules));
  return verifiedWith(token, payloadSegment, second, header, b64, plain, keys, rules);
}

function verifiedWith(
  token: string,
  payloadSegment: string,
  second: number,
  header: JwtClaims,
  b64: boolean,
  plain: boolean,
  keys: ReadonlyMap<string, crypto.KeyObject>,
  rules: JwtRules,
): VerifiedJws {
  const key = selectKey(keys, header.kid);
  if (!plain) asciiSegment(payloadSegment);
  const signature = decodeSegment(token.slice(second + 1), "signature");
  if (!signatureHolds(token.slice(0, second), key, signature))
    throw rejected("ERR_JWS_SIGNATURE_VERIFICATION_FAILED", "signature verification failed");
  if (!b64) throw rejected("ERR_JWT_INVALID", "JWTs MUST NOT use unencoded payload");
  const claims = jsonObjectOf(decodeSegment(payloadSegment, "payload", plain));
  if (claims === undefined) throw rejected("ERR_JWT_INVALID", "JWT Claims Set must be a top-level JSON object");
  checkClaims(header, claims, rules);
  return { header, claims };
}

/** Distinct protected headers are few (one per signing key): each is parsed once, up to a bound. */
const HEADER_CACHE_SIZE = 64;
const headers = new Map<string, JwtClaims>();

function protectedHeaderOf(segment: string): JwtClaims {
  const known = headers.get(segment);
  if (known !== undefined) return known;
  let header: JwtClaims | undefined;
  try {
    header = jsonObjectOf(decodeBase64url(segment));
  } catch {
    header = undefined;
  }
  if (header === undefined) throw rejected("ERR_JWS_INVALID", "JWS Protected Header is invalid");
  if (headers.size >= HEADER_CACHE_SIZE) headers.clear();
  headers.set(segment, header);
  return header;
}

/** RFC 7515 `crit`: only RFC 7797's `b64` is understood (as jose does); returns whether the payload is base64url. */
function checkCritical(header: JwtClaims): boolean {
  const crit = header.crit;
  if (crit === undefined) return true;
  if (!Array.isArray(crit) || crit.length === 0 || crit.some((p) => typeof p !== "string" || p.length === 0))
    throw rejected("ERR_JWS_INVALID", '"crit" (Critical) Header Parameter MUST be an array of non-empty strings');
  for (const parameter of crit as string[]) {
    if (parameter !== "b64")
      throw rejected("ERR_JOSE_NOT_SUPPORTED", `Extension Header Parameter "${parameter}" is not recognized`);
    if (!Object.hasOwn(header, parameter) || header[parameter] === undefined)
      throw rejected("ERR_JWS_INVALID", `Extension Header Parameter "${parameter}" is missing`);
  }
  if (typeof header.b64 !== "boolean")
    throw rejected("ERR_JWS_INVALID", 'The "b64" (base64url-encode payload) Header Parameter must be a boolean');
  return header.b64;
}

function checkAlgorithm(alg: unknown, algorithms: ReadonlySet<string>): void {
  if (typeof alg !== "string" || alg === "")
    throw rejected("ERR_JWS_INVALID", 'JWS "alg" (Algorithm) Header Parameter missing or invalid');
  if (!algorithms.has(alg))
    throw rejected("ERR_JOSE_ALG_NOT_ALLOWED", '"alg" (Algorithm) Header Parameter value not allowed');
}

/** The key the header names; without a `kid`, the only key there is (more than one: ambiguous, refused). */
export function selectKey(keys: ReadonlyMap<string, crypto.KeyObject>, kid: unknown): crypto.KeyObject {
  if (kid === undefined) {
    if (keys.size === 1) return keys.values().next().value!;
    if (keys.size === 0) throw rejected("ERR_JWKS_NO_MATCHING_KEY", "no applicable key found in the JSON Web Key Set");
    throw rejected("ERR_JWKS_MULTIPLE_MATCHING_KEYS", "multiple matching keys found in the JSON Web Key Set");
  }
  const key = typeof kid === "string" ? keys.get(kid) : undefined;
  if (!key) throw rejected("ERR_JWKS_NO_MATCHING_KEY", "no applicable key found in the JSON Web Key Set");
  return key;
}

function asciiSegment(segment: string): void {
  // eslint-disable-next-line no-control-regex -- the ASCII range is what is tested
  if (/[^\x00-\x7f]/.test(segment)) throw rejected("ERR_JWS_INVALID", "The payload is not a valid base64url string");
}

function signatureHolds(signingInput: string, key: crypto.KeyObject, signature: Buffer): boolean {
  try {
    return crypto.verify(null, Buffer.from(signingInput, "latin1"), key, signature);
  } catch {
    return false;
  }
}

/**
 * The asymmetric JWS algorithms (RFC 7518 3, RFC 8037, RFC 9864) clients sign with here — DPoP
 * proofs and client assertions — and the key type and curve each takes. `none` and HMAC are not
 * among them: nothing verified here is signed with a shared secret.
 */
const SIGNATURE_KEYS: Readonly<Record<string, { readonly kty: string; readonly crv?: string }>> = {
  EdDSA: { kty: "OKP", crv: "Ed25519" },
  Ed25519: { kty: "OKP", crv: "Ed25519" },
  ES256: { kty: "EC", crv: "P-256" },
  ES384: { kty: "EC", crv: "P-384" },
  PS256: { kty: "RSA" },
  RS256: { kty: "RSA" },
};

/** Whether `jwk` is of the key type (and curve) `alg` signs with; false for an algorithm not in SIGNATURE_KEYS. */
export function keyTypeFits(jwk: { readonly kty?: unknown; readonly crv?: unknown }, alg: string): boolean {
  const wanted = SIGNATURE_KEYS[alg];
  return wanted !== undefined && jwk.kty === wanted.kty && (wanted.crv === undefined || jwk.crv === wanted.crv);
}

/**
 * Whether `signature` over `signingInput` (header.payload, ASCII) holds for `key` under `alg`, with
 * node:crypto's one-shot verify (synchronous, no WebCrypto job): ECDSA signatures in JWS's
 * fixed-length form (IEEE P1363), RSA-PSS with a salt of the hash's length. An algorithm not in
 * SIGNATURE_KEYS, or a key of another type, does not hold.
 */
export function signatureHoldsFor(
  alg: string,
  key: crypto.KeyObject,
  signingInput: string,
  signature: Buffer,
): boolean {
  const data = Buffer.from(signingInput, "latin1");
  try {
    switch (alg) {
      case "EdDSA":
      case "Ed25519":
        return key.asymmetricKeyType === "ed25519" && crypto.verify(null, data, key, signature);
      case "ES256":
        return crypto.verify("sha256", data, { key, dsaEncoding: "ieee-p1363" }, signature);
      case "ES384":
        return crypto.verify("sha384", data, { key, dsaEncoding: "ieee-p1363" }, signature);
      case "PS256":
        return crypto.verify(
          "sha256",
          data,
          { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 },
          signature,
        );
      case "RS256":
        return crypto.verify("sha256", data, key, signature);
      default:
        return false;
    }
  } catch {
    return false;
  }
}

function decodeSegment(segment: string, label: string, plain?: boolean): Buffer {
  try {
    return decodeBase64url(segment, plain);
  } catch {
    throw rejected("ERR_JWS_INVALID", `Failed to base64url decode the ${label}`);
  }
}

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/**
 * base64url as jose decodes it: the plain alphabet without padding (every token this service
 * signs) straight through Buffer; anything else the way jose does — `Uint8Array.fromBase64` where
 * the runtime has it, else `+` and `/` refused and the rest through the forgiving `atob`
 * (whitespace skipped, `=` padding allowed). Throws on what jose refuses.
 */
function decodeBase64url(text: string, plain = BASE64URL.test(text)): Buffer {
  if (plain && text.length % 4 !== 1) return Buffer.from(text, "base64url");
  const fromBase64 = (Uint8Array as { fromBase64?: (s: string, o: { alphabet: string }) => Uint8Array }).fromBase64;
  if (fromBase64) return Buffer.from(fromBase64(text, { alphabet: "base64url" }));
  if (text.includes("+") || text.includes("/")) throw new TypeError("Invalid base64url");
  return Buffer.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), "latin1");
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** UTF-8 (strict, a leading BOM dropped, as jose's TextDecoder does) → JSON → a plain object, or undefined. */
function jsonObjectOf(bytes: Buffer): JwtClaims | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(isAscii(bytes) ? bytes.toString("latin1") : strictUtf8.decode(bytes));
  } catch {
    return undefined;
  }
  return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as JwtClaims) : undefined;
}

/** RFC 8725 3.11 explicit typing, compared as jose does: lower case, "application/" added when there is no "/". */
const mediaType = (value: string) => {
  const lower = value.toLowerCase();
  return value.includes("/") ? lower : `application/${lower}`;
};

function checkClaims(header: JwtClaims, claims: JwtClaims, rules: JwtRules): void {
  if (header.typ !== rules.typ && (typeof header.typ !== "string" || mediaType(header.typ) !== mediaType(rules.typ)))
    throw refuse("typ", 'unexpected "typ" JWT header value');
  for (const claim of presenceOrder(rules)) {
    if (!Object.hasOwn(claims, claim)) throw refuse(claim, `missing required "${claim}" claim`);
  }
  if (claims.iss !== rules.issuer) throw refuse("iss", 'unexpected "iss" claim value');
  if (rules.audience !== undefined && !audienceIncludes(claims.aud, rules.audience))
    throw refuse("aud", 'unexpected "aud" claim value');
  numericDate(claims, "iat");
  const now = rules.now ?? Date.now();
  const nbf = numericDate(claims, "nbf");
  if (nbf !== undefined && timeCheck({ nbf }, now, rules.clockToleranceSeconds) === "nbf")
    throw refuse("nbf", '"nbf" claim timestamp check failed');
  const exp = numericDate(claims, "exp");
  if (exp !== undefined && timeCheck({ exp }, now, rules.clockToleranceSeconds) === "exp")
    throw rejected("ERR_JWT_EXPIRED", '"exp" claim timestamp check failed', "exp");
}

/**
 * The time claims of a token (numbers, or absent) against `now`, as jose compares them: "nbf"
 * when `nbf` is after now + tolerance, "exp" when `exp` is not after now − tolerance (whole
 * seconds of now), undefined when both pass. A verified token seen again is judged by this alone.
 */
export function timeCheck(
  claims: { readonly nbf?: number; readonly exp?: number },
  now: Date | number,
  toleranceSeconds: number,
): "nbf" | "exp" | undefined {
  const seconds = Math.floor((typeof now === "number" ? now : now.getTime()) / 1000);
  if (claims.nbf !== undefined && claims.nbf > seconds + toleranceSeconds) return "nbf";
  if (claims.exp !== undefined && claims.exp <= seconds - toleranceSeconds) return "exp";
  return undefined;
}

const refuse = (claim: string, message: string) => rejected("ERR_JWT_CLAIM_VALIDATION_FAILED", message, claim);

/** The order jose checks presence in: iss, aud (when an audience is required), then the required claims, last first. */
function presenceOrder(rules: JwtRules): readonly string[] {
  // Rules are built per verification around the same required claims: the order is made once for them.
  const cache = rules.audience !== undefined ? presenceWithAudience : presenceWithoutAudience;
  let order = cache.get(rules.requiredClaims);
  if (order === undefined) {
    const checks = [...rules.requiredClaims, ...(rules.audience !== undefined ? ["aud"] : []), "iss"];
    order = [...new Set(checks.reverse())];
    cache.set(rules.requiredClaims, order);
  }
  return order;
}
const presenceWithAudience = new WeakMap<readonly string[], readonly string[]>();
const presenceWithoutAudience = new WeakMap<readonly string[], readonly string[]>();

function audienceIncludes(aud: unknown, audience: string): boolean {
  return typeof aud === "string" ? aud === audience : Array.isArray(aud) && aud.includes(audience);
}

function numericDate(claims: JwtClaims, claim: "iat" | "nbf" | "exp"): number | undefined {
  const value = claims[claim];
  if (value === undefined) return undefined;
  if (typeof value !== "number")
    throw rejected("ERR_JWT_CLAIM_VALIDATION_FAILED", `"${claim}" claim must be a number`, claim);
  return value;
}

/**
 * Which check refused a token, in the words of the service's log (`refusalReason`): format,
 * algorithm, key, signature, expiry, audience, type, issuer, not yet valid, issued at, or the
 * claim; "verification" for anything that is not a `JwtRejected`. The package maps these to its
 * own refusal reasons; one list, so the service and the package refuse for the same reason.
 */
export function refusalCheckOf(error: unknown): string {
  if (!(error instanceof JwtRejected)) return "verification";
  switch (error.code) {
    case "ERR_JWS_INVALID":
    case "ERR_JWT_INVALID":
    case "ERR_JOSE_NOT_SUPPORTED":
      return "format";
    case "ERR_JOSE_ALG_NOT_ALLOWED":
      return "algorithm";
    case "ERR_JWKS_NO_MATCHING_KEY":
    case "ERR_JWKS_MULTIPLE_MATCHING_KEYS":
      return "key";
    case "ERR_JWS_SIGNATURE_VERIFICATION_FAILED":
      return "signature";
    case "ERR_JWT_EXPIRED":
      return "expiry";
    case "ERR_JWT_CLAIM_VALIDATION_FAILED":
      return CLAIM_CHECKS[error.claim ?? ""] ?? `claim ${error.claim ?? "unknown"}`;
  }
}

/** The claim checks by the claim jose names. */
const CLAIM_CHECKS: Readonly<Record<string, string>> = {
  aud: "audience",
  typ: "type",
  iss: "issuer",
  nbf: "not yet valid",
  iat: "issued at",
};

// ---- signing ---------------------------------------------------------------------------------

/**
 * A compact JWS signed with node:crypto's one-shot Ed25519 signature: synchronous and several
 * times cheaper per token than WebCrypto's job queue. The header and claims are JSON, UTF-8,
 * base64url without padding — the form `verifyJws` reads straight through Buffer.
 */
export function signCompactJws(header: JwtClaims, claims: object, key: crypto.KeyObject): string {
  const input = `${encodeSegment(header)}.${encodeSegment(claims)}`;
  const signature = crypto.sign(null, Buffer.from(input), key);
  return `${input}.${signature.toString("base64url")}`;
}

const encodeSegment = (value: object) => Buffer.from(JSON.stringify(value), "utf8").toString("base64url");

/**
 * A segment's JSON object read without any check (undefined when it is not one): for what is
 * needed before or without verification — the `iat` that may justify a key reload, the `kid` or
 * `client_id` of a token already verified or refused. Never a verdict.
 */
export function unverifiedJsonOf(segment: string): JwtClaims | undefined {
  try {
    return jsonObjectOf(Buffer.from(segment, "base64url"));
  } catch {
    return undefined;
  }
}
