// DPoP (RFC 9449) proofs as this service and the verifier package check them: the one
// implementation, used by the service (its token endpoint and its own protected RPCs import this
// file) and by the verifier package's resource servers, so both accept and refuse the same proofs
// for the same reason. Like jws.ts it imports node built-ins only: the package stays
// self-contained. test/unit/domain/dpop-proof.test.ts holds the thumbprint to jose's and the
// verdicts to proofs made by the `dpop` package and oauth4webapi.
import crypto from "node:crypto";
import { keyTypeFits, signatureHoldsFor, unverifiedJsonOf } from "./jws.js";

/**
 * The proof algorithms accepted (RFC 9449 4.3 step 5: asymmetric only; `none` and HMAC never).
 * Ed25519 under both names: RFC 8037's EdDSA, and the fully specified Ed25519 (RFC 9864) that
 * oauth4webapi and the `dpop` package send.
 */
export const DPOP_ALGORITHMS = ["EdDSA", "Ed25519", "ES256", "ES384", "PS256", "RS256"] as const;
const ALGORITHMS: ReadonlySet<string> = new Set(DPOP_ALGORITHMS);

/** The smallest RSA modulus a proof key may have. */
const MIN_RSA_BITS = 2048;

/**
 * How old a proof may be (its `iat`), and how far ahead of this clock: a proof is made for one
 * request, so a minute covers the slowest client; the replay cache holds each proof that long.
 */
export const PROOF_LIFETIME_SECONDS = 60;
export const PROOF_CLOCK_TOLERANCE_SECONDS = 5;

/** How long a server-provided nonce is offered before the next (it is accepted one window either side). */
export const NONCE_WINDOW_SECONDS = 60;

/** RFC 9449 7.1 and 12.2: the error a refusal names in its `error` (token endpoint) or WWW-Authenticate. */
export type DpopError = "invalid_dpop_proof" | "use_dpop_nonce";

/**
 * A proof refused: the wire error and a message safe for the caller, and the check that failed for
 * the operator's log (never the proof or its key).
 */
export class DpopRejected extends Error {
  constructor(
    readonly error: DpopError,
    message: string,
    readonly check: string,
  ) {
    super(message);
    this.name = "DpopRejected";
  }
}

const invalid = (check: string, message: string) => new DpopRejected("invalid_dpop_proof", message, check);

/** What a proof must match: the request it came with, and the token it is bound to when there is one. */
export interface ProofRules {
  /** The request's method (`htm`). */
  readonly method: string;
  /** The request's URL as the client addressed it (`htu`); query and fragment are ignored. */
  readonly url: string;
  /** Now, in ms since the epoch. */
  readonly nowMs: number;
  /** The nonces this server offers; the proof must carry a current one. */
  readonly nonces: DpopNonces;
  /** With an access token: the token (its hash is `ath`) and the key thumbprint it is bound to (`cnf.jkt`). */
  readonly boundTo?: { readonly token: string; readonly jkt: string };
}

/** A proof that passed: its key's thumbprint, and what the replay cache keeps until it expires. */
export interface VerifiedProof {
  /** RFC 7638 SHA-256 thumbprint of the proof's public key (what `cnf.jkt` carries). */
  readonly jkt: string;
  /** The replay cache's key: one per key and `jti`, bounded in length whatever the client sent. */
  readonly replayId: string;
  /** When the proof can no longer be accepted anyway (ms since the epoch): the replay cache may forget it then. */
  readonly expiresAtMs: number;
}

/**
 * Checks a DPoP proof (RFC 9449 4.3), synchronously, in this order: one compact JWS → header
 * (`typ: dpop+jwt`, an allowed `alg`, a public `jwk` of that algorithm's key type) → signature
 * → claims (`jti`, `htm`, `htu`, `iat`) → `htm` and `htu` against the request → `iat` within
 * [now − lifetime − tolerance, now + tolerance] → `ath` and the key thumbprint against the token
 * → the nonce last, so a client told to use one has a proof otherwise right. The replay check
 * (`replayId` used once until `expiresAtMs`) is the caller's: the service's store is shared by its
 * instances, a resource server's is in its process.
 */
export function verifyDpopProof(proof: string | undefined, rules: ProofRules): VerifiedProof {
  if (proof === undefined || proof === "") throw invalid("missing", "A DPoP proof is required (DPoP header)");
  const parts = proof.split(".");
  if (parts.length !== 3) throw invalid("format", "The DPoP proof is not a compact JWS");
  const [headerSegment, payloadSegment, signatureSegment] = parts as [string, string, string];
  const { key, jkt, alg } = proofKeyOf(headerSegment);
  const signature = Buffer.from(signatureSegment, "base64url");
  if (!signatureHoldsFor(alg, key, `${headerSegment}.${payloadSegment}`, signature))
    throw invalid("signature", "The DPoP proof's signature does not verify with its key");
  const claims = unverifiedJsonOf(payloadSegment);
  if (!claims) throw invalid("format", "The DPoP proof's claims are not a JSON object");
  const { jti, htm, htu, iat } = claims;
  if (typeof jti !== "string" || jti === "" || jti.length > 256)
    throw invalid("claims", "The DPoP proof needs a jti (1 to 256 characters)");
  if (typeof htm !== "string" || typeof htu !== "string" || typeof iat !== "number" || !Number.isFinite(iat))
    throw invalid("claims", "The DPoP proof needs htm, htu and a numeric iat");
  if (htm !== rules.method) throw invalid("method", "The DPoP proof's htm is not this request's method");
  if (!sameResource(htu, rules.url)) throw invalid("url", "The DPoP proof's htu is not this request's URL");
  const now = rules.nowMs / 1000;
  if (iat > now + PROOF_CLOCK_TOLERANCE_SECONDS) throw invalid("issued at", "The DPoP proof's iat is in the future");
  if (iat < now - PROOF_LIFETIME_SECONDS - PROOF_CLOCK_TOLERANCE_SECONDS)
    throw invalid("issued at", "The DPoP proof is too old (iat)");
  if (rules.boundTo) {
    if (claims.ath !== tokenHashOf(rules.boundTo.token))
      throw invalid("token hash", "The DPoP proof's ath is not this access token's hash");
    if (!equalText(jkt, rules.boundTo.jkt))
      throw invalid("key binding", "The DPoP proof is signed by a key the access token is not bound to");
  }
  if (!rules.nonces.accepts(claims.nonce, rules.nowMs))
    throw new DpopRejected(
      "use_dpop_nonce",
      claims.nonce === undefined ? "A DPoP nonce is required" : "The DPoP nonce is not current",
      "nonce",
    );
  return {
    jkt,
    replayId: crypto.createHash("sha256").update(`${jkt}.${jti}`).digest("base64url"),
    expiresAtMs: (iat + PROOF_LIFETIME_SECONDS + PROOF_CLOCK_TOLERANCE_SECONDS) * 1000,
  };
}

interface ProofKey {
  readonly key: crypto.KeyObject;
  readonly jkt: string;
  readonly alg: string;
}

/**
 * A client signs every proof with one key, so its protected header is the same text each time:
 * each header's key is imported and its thumbprint computed once, up to a bound (cleared when full).
 */
const KEY_CACHE_SIZE = 1024;
const keysByHeader = new Map<string, ProofKey>();

function proofKeyOf(segment: string): ProofKey {
  const known = keysByHeader.get(segment);
  if (known) return known;
  const header = unverifiedJsonOf(segment);
  if (!header) throw invalid("format", "The DPoP proof's header is not a JSON object");
  if (typeof header.typ !== "string" || header.typ.toLowerCase() !== "dpop+jwt")
    throw invalid("type", "The DPoP proof's typ must be dpop+jwt");
  const alg = header.alg;
  if (typeof alg !== "string" || !ALGORITHMS.has(alg))
    throw invalid("algorithm", `The DPoP proof's alg must be one of ${DPOP_ALGORITHMS.join(", ")}`);
  const jwk = header.jwk;
  if (typeof jwk !== "object" || jwk === null || Array.isArray(jwk))
    throw invalid("key", "The DPoP proof's header needs its public key (jwk)");
  const found = { key: publicKeyOf(jwk as Record<string, unknown>, alg), jkt: jwkThumbprint(jwk), alg };
  if (keysByHeader.size >= KEY_CACHE_SIZE) keysByHeader.clear();
  keysByHeader.set(segment, found);
  return found;
}

/** JWK members that only a private or symmetric key has (RFC 7518 6.2.2, 6.3.2, 6.4.1): never in a public key. */
export const PRIVATE_JWK_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

function publicKeyOf(jwk: Record<string, unknown>, alg: string): crypto.KeyObject {
  if (PRIVATE_JWK_MEMBERS.some((member) => member in jwk))
    throw invalid("key", "The DPoP proof's jwk must be a public key");
  if (!keyTypeFits(jwk, alg)) throw invalid("key", `The DPoP proof's jwk is not a key for ${alg}`);
  let key: crypto.KeyObject;
  try {
    key = crypto.createPublicKey({ key: jwk as crypto.JsonWebKey, format: "jwk" });
  } catch {
    throw invalid("key", "The DPoP proof's jwk is not a valid public key");
  }
  if (jwk.kty === "RSA" && (key.asymmetricKeyDetails?.modulusLength ?? 0) < MIN_RSA_BITS)
    throw invalid("key", `The DPoP proof's RSA key must have at least ${MIN_RSA_BITS} bits`);
  return key;
}

/** The members RFC 7638 3.2 hashes for each key type, in lexicographic order. */
const THUMBPRINT_MEMBERS: Readonly<Record<string, readonly string[]>> = {
  EC: ["crv", "kty", "x", "y"],
  OKP: ["crv", "kty", "x"],
  RSA: ["e", "kty", "n"],
};

/** RFC 7638: the SHA-256 thumbprint of a public JWK, base64url (what `cnf.jkt` holds, RFC 9449 6.1). */
export function jwkThumbprint(jwk: object): string {
  const members = jwk as Record<string, unknown>;
  const names = typeof members.kty === "string" ? THUMBPRINT_MEMBERS[members.kty] : undefined;
  if (!names) throw invalid("key", "The DPoP proof's jwk has an unsupported kty");
  const required: Record<string, string> = {};
  for (const name of names) {
    const value = members[name];
    if (typeof value !== "string") throw invalid("key", `The DPoP proof's jwk lacks "${name}"`);
    required[name] = value;
  }
  return crypto.createHash("sha256").update(JSON.stringify(required)).digest("base64url");
}

/** RFC 9449 4.2 `ath`: base64url of the SHA-256 of the access token's ASCII text. */
export function tokenHashOf(token: string): string {
  return crypto.createHash("sha256").update(token, "latin1").digest("base64url");
}

/**
 * RFC 9449 4.3 step 9: `htu` names the request's URL without query and fragment, compared after
 * RFC 3986 syntax- and scheme-based normalisation (case of scheme and host, default port, dot
 * segments), which WHATWG URL parsing does.
 */
function sameResource(htu: string, url: string): boolean {
  const a = resourceOf(htu);
  return a !== undefined && a === resourceOf(url);
}

/** A URL without its query and fragment, normalised; undefined when it does not parse as an absolute http(s) URL. */
export function resourceOf(url: string): string | undefined {
  if (!URL.canParse(url)) return undefined;
  const parsed = new URL(url);
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return undefined;
  return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
}

function equalText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

/**
 * Server-provided nonces (RFC 9449 8 and 9) without server state: the nonce of a time window is an
 * HMAC of the window's number under a key every instance shares, so any instance accepts what any
 * other offered. A nonce is offered for NONCE_WINDOW_SECONDS and accepted one window either side
 * (a client that just got it, an instance whose clock is a little ahead).
 */
export class DpopNonces {
  private readonly cached = new Map<number, string>();

  constructor(private readonly key: crypto.KeyObject) {}

  /** The nonce to offer now (the DPoP-Nonce response header). */
  current(nowMs: number): string {
    return this.ofWindow(windowOf(nowMs));
  }

  accepts(nonce: unknown, nowMs: number): boolean {
    if (typeof nonce !== "string") return false;
    const window = windowOf(nowMs);
    return [window - 1, window, window + 1].some((w) => equalText(nonce, this.ofWindow(w)));
  }

  private ofWindow(window: number): string {
    let nonce = this.cached.get(window);
    if (nonce === undefined) {
      nonce = crypto.createHmac("sha256", this.key).update(`dpop-nonce/${window}`).digest("base64url").slice(0, 22);
      if (this.cached.size >= 8) this.cached.clear();
      this.cached.set(window, nonce);
    }
    return nonce;
  }
}

const windowOf = (nowMs: number) => Math.floor(nowMs / 1000 / NONCE_WINDOW_SECONDS);

/** An `Authorization` value's scheme and token (RFC 6750 2.1 and RFC 9449 7.1 share the token68 form); undefined otherwise. */
export function authorizationOf(
  authorization: string | null | undefined,
): { readonly scheme: "Bearer" | "DPoP"; readonly token: string } | undefined {
  if (!authorization) return undefined;
  const match = /^(Bearer|DPoP) +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(authorization);
  if (!match) return undefined;
  return { scheme: match[1]!.toLowerCase() === "dpop" ? "DPoP" : "Bearer", token: match[2]! };
}

/**
 * The one verdict on how a verified token was presented, for the service and every verifier: a
 * token bound to a key (its `cnf`, RFC 9449 6.1) only under the DPoP scheme with a proof by that
 * key; an unbound token only as Bearer. Returns the proof that passed (for the replay check) or
 * undefined for a Bearer token; throws DpopRejected (the proof's fault) or BindingRefused (the
 * scheme's, or a `cnf` without a thumbprint: refused, never taken as unbound).
 */
export function checkPresentation(
  presented: { readonly scheme: "Bearer" | "DPoP"; readonly token: string },
  cnf: unknown,
  proof: string | undefined,
  rules: Omit<ProofRules, "boundTo">,
): VerifiedProof | undefined {
  if (cnf === undefined) {
    if (presented.scheme === "DPoP") throw new BindingRefused("The access token is not DPoP-bound: send it as Bearer");
    return undefined;
  }
  const jkt = typeof cnf === "object" && cnf !== null ? (cnf as Record<string, unknown>).jkt : undefined;
  if (typeof jkt !== "string") throw new BindingRefused("The access token's confirmation is malformed");
  if (presented.scheme !== "DPoP")
    throw new BindingRefused("The access token is DPoP-bound: send it as DPoP with a proof");
  return verifyDpopProof(proof, { ...rules, boundTo: { token: presented.token, jkt } });
}

/** A token presented under the wrong scheme for its binding (RFC 9449 7.1): invalid_token. */
export class BindingRefused extends Error {
  readonly check = "binding";
  constructor(message: string) {
    super(message);
    this.name = "BindingRefused";
  }
}
