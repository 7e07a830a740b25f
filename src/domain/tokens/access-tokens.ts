import crypto from "node:crypto";
import type { CryptoKey, JWTPayload } from "jose";
import { DomainError } from "../../errors/domain-error.js";
import type { Clock } from "../shared/clock.js";
import { RandomBytePool } from "../shared/random-pool.js";
import type { CredentialGenerations } from "./credential-generations.js";
import { TOKEN_NOT_REVOKED, tokenCredentialId, type BoundCredential, type Principal } from "./model.js";
// The one JWS implementation, shared with the verifier package (CONTRIBUTING.md, "The JWS module").
import {
  JwtRejected,
  refusalCheckOf,
  signCompactJws,
  verifyJws,
  type JwtRules,
} from "../../../packages/verifier/src/jws.js";
import { hasRequiredClaims, PRESENCE_CHECKED_CLAIMS } from "../../../packages/verifier/src/token-format.js";
import type { VerifiedTokens } from "./verified-tokens.js";
import { SIGNING_ALG, VERIFICATION_CLOCK_TOLERANCE_SECONDS, type SigningKeyRing } from "./signing-key-ring.js";

/** 128 random bits per `jti`, from a pooled CSPRNG buffer. */
const TOKEN_IDS = new RandomBytePool();

export interface NewAccessToken {
  clientId: string;
  tmcId: string;
  orgId: string | undefined;
  role: "TMC_ADMIN" | "COMPANY_ADMIN";
  scopes: readonly string[];
  subject: string;
  subjectKind: "CLIENT" | "USER";
  audience: readonly string[];
  act?: Record<string, unknown>;
  /** First entry: the obtaining client's own credential (the `gen` claim). */
  credentials: readonly BoundCredential[];
  ttlSeconds: number;
  /** The thumbprint of the DPoP proof key the token is bound to (`cnf.jkt`); undefined for a bearer token. */
  boundKey?: string;
}

/** What every access token of this service must carry and be (RFC 9068), but the moment and the audience. */
export const ACCESS_TOKEN_RULES = {
  algorithms: new Set([SIGNING_ALG]),
  typ: "at+jwt",
  clockToleranceSeconds: VERIFICATION_CLOCK_TOLERANCE_SECONDS,
  requiredClaims: PRESENCE_CHECKED_CLAIMS,
} as const satisfies Omit<JwtRules, "issuer" | "audience" | "now">;

interface Claims extends JWTPayload {
  client_id: string;
  tmc_id: string;
  org_id?: string;
  role: "TMC_ADMIN" | "COMPANY_ADMIN";
  scope: string;
  sub_kind: "CLIENT" | "USER";
  gen: number;
  creds?: Array<[string, number]>;
  act?: Record<string, unknown>;
  cnf?: { jkt: string };
}

/**
 * Access tokens: JWTs in the RFC 9068 profile (`typ: at+jwt`), signed EdDSA with the shared
 * key ring. Verification checks signature, algorithm, type, issuer, audience and expiry, then
 * that every credential the token is bound to still has the generation it was issued under.
 */
export class AccessTokens {
  constructor(
    private readonly keys: SigningKeyRing,
    private readonly credentials: CredentialGenerations,
    private readonly issuer: string,
    private readonly now: Clock,
    /** Tokens already verified (their signature and claims), so a token seen again is not verified twice. */
    private readonly verified?: VerifiedTokens,
  ) {}

  async issue(token: NewAccessToken): Promise<{ accessToken: string; expiresIn: number }> {
    const [own, ...others] = token.credentials;
    if (!own || own[0] !== token.clientId) throw new Error("the first bound credential must be the client's own");
    const { kid, key } = this.keys.signingKey;
    const iat = Math.floor(this.now().getTime() / 1000);
    const claims: Claims = {
      client_id: token.clientId,
      tmc_id: token.tmcId,
      ...(token.orgId ? { org_id: token.orgId } : {}),
      role: token.role,
      scope: token.scopes.join(" "),
      sub_kind: token.subjectKind,
      gen: own[1],
      ...(others.length ? { creds: others.map(([id, g]) => [id, g] as [string, number]) } : {}),
      ...(token.act ? { act: token.act } : {}),
      ...(token.boundKey !== undefined ? { cnf: { jkt: token.boundKey } } : {}),
    };
    const payload: Claims = {
      ...claims,
      iss: this.issuer,
      sub: token.subject,
      aud: token.audience.length === 1 ? token.audience[0]! : [...token.audience],
      iat,
      exp: iat + token.ttlSeconds,
      jti: TOKEN_IDS.base64url(16),
    };
    const accessToken = signCompactJws({ alg: SIGNING_ALG, typ: "at+jwt", kid }, payload, keyObjectOf(key));
    return { accessToken, expiresIn: token.ttlSeconds };
  }

  /**
   * Verifies a token this service issued. `audience` limits the accepted `aud` (this service's
   * own when it guards its RPCs); omitted, any audience is accepted (exchange, introspection).
   */
  async verify(token: string, audience?: string): Promise<Principal> {
    const principal = await this.signedPrincipal(token, audience);
    const current = await this.credentials.current(credentialIdsOf(principal));
    if (!stillValid(principal, current)) throw refused("The access token has been revoked", "revocation");
    return principal;
  }

  /**
   * Many tokens at once: each token's principal, or undefined where the token is not valid
   * (signature, claims, expiry), its `aud` names none of `audiences`, or it has been revoked.
   * Every credential of every token left is checked in one round trip.
   */
  async verifyMany(tokens: readonly string[], audiences: readonly string[]): Promise<Array<Principal | undefined>> {
    const signed = await Promise.all(
      tokens.map((token) =>
        this.signedPrincipal(token).catch((error: unknown) => {
          if (error instanceof DomainError) return undefined;
          throw error;
        }),
      ),
    );
    const addressed = signed.map((p) => (p?.audience.some((a) => audiences.includes(a)) ? p : undefined));
    const ids = [...new Set(addressed.flatMap((p) => (p ? credentialIdsOf(p) : [])))];
    if (ids.length === 0) return addressed;
    const current = await this.credentials.current(ids);
    return addressed.map((p) => (p && stillValid(p, current) ? p : undefined));
  }

  /** The token's principal if its signature and claims are valid now (not yet whether it was revoked). */
  private async signedPrincipal(token: string, audience?: string): Promise<Principal> {
    const known = this.knownPrincipal(token, audience);
    if (known) return known;
    let verified: { header: Record<string, unknown>; claims: Record<string, unknown> };
    try {
      verified = await verifyJws(token, (kid, segment) => this.keys.verificationKeysFor(kid, segment), {
        ...ACCESS_TOKEN_RULES,
        issuer: this.issuer,
        ...(audience ? { audience } : {}),
        now: this.now(),
      });
    } catch (error) {
      throw refused(reasonOf(error), refusalCheckOf(error));
    }
    const principal = toPrincipal(verified.claims as Claims);
    const kid = verified.header.kid;
    if (typeof kid === "string" && kid !== "") this.verified?.remember(token, { principal, kid });
    return principal;
  }

  /**
   * A token verified before, if it still passes what can change since: its key still verifies,
   * it has not expired (with the same tolerance), and its `aud` names `audience` when one is asked.
   * Anything else goes through the full verification again, which gives the refusal its reason.
   */
  private knownPrincipal(token: string, audience: string | undefined): Principal | undefined {
    const entry = this.verified?.get(token);
    if (!entry) return undefined;
    const nowSeconds = this.now().getTime() / 1000;
    const current =
      this.keys.verifies(entry.kid) &&
      entry.principal.expiresAt > nowSeconds - VERIFICATION_CLOCK_TOLERANCE_SECONDS &&
      (audience === undefined || entry.principal.audience.includes(audience));
    if (current) return entry.principal;
    this.verified?.forget(token);
    return undefined;
  }
}

/**
 * What a token's validity depends on besides its signature: every credential it is bound to must
 * still have the generation it was issued under, and the token itself must not have been revoked
 * (RFC 7009, its own `jti:` credential).
 */
function credentialIdsOf(principal: Principal): string[] {
  return [...principal.credentials.map(([id]) => id), tokenCredentialId(principal.tokenId)];
}

function stillValid(principal: Principal, current: ReadonlyMap<string, number | undefined>): boolean {
  return (
    principal.credentials.every(([id, generation]) => current.get(id) === generation) &&
    current.get(tokenCredentialId(principal.tokenId)) === TOKEN_NOT_REVOKED
  );
}

/** The KeyObject of each WebCrypto key, converted once (keys live as long as the key ring keeps them). */
const keyObjects = new WeakMap<CryptoKey, crypto.KeyObject>();
function keyObjectOf(key: CryptoKey): crypto.KeyObject {
  let found = keyObjects.get(key);
  if (!found) {
    found = crypto.KeyObject.from(key as unknown as Parameters<typeof crypto.KeyObject.from>[0]);
    keyObjects.set(key, found);
  }
  return found;
}

function toPrincipal(p: Claims): Principal {
  // The claims' shape as the verifier package checks it too (token-format.ts).
  if (!hasRequiredClaims(p)) throw refused("The access token is malformed", "claims");
  const creds = p.creds ?? [];
  return {
    clientId: p.client_id,
    tmcId: p.tmc_id,
    orgId: typeof p.org_id === "string" ? p.org_id : undefined,
    role: p.role,
    scopes: typeof p.scope === "string" && p.scope !== "" ? p.scope.split(" ") : [],
    subject: p.sub!,
    subjectKind: p.sub_kind === "USER" ? "USER" : "CLIENT",
    audience: Array.isArray(p.aud) ? p.aud : [p.aud!],
    act: typeof p.act === "object" && p.act !== null ? p.act : undefined,
    credentials: [[p.client_id, p.gen], ...creds.map(([id, g]) => [id, g] as BoundCredential)],
    tokenId: p.jti!,
    issuer: p.iss!,
    issuedAt: p.iat!,
    expiresAt: p.exp!,
    confirmation: p.cnf ? { jkt: p.cnf.jkt } : undefined,
  };
}

/**
 * An access token refused: the caller reads the message; the operator's log line also names the
 * check that failed (`refusalReason`), never the token or its claims.
 */
function refused(message: string, check: string): DomainError {
  return new DomainError("USER_NOT_AUTHENTICATED", message, { logged: { refusalReason: check } });
}

/** Says why, in words safe for the caller: never key material or claims. */
function reasonOf(error: unknown): string {
  if (!(error instanceof JwtRejected)) return "The access token is not valid";
  if (error.code === "ERR_JWT_EXPIRED") return "The access token has expired";
  if (error.code === "ERR_JWT_CLAIM_VALIDATION_FAILED" && error.claim === "aud")
    return "The access token is not meant for this service";
  return "The access token is not valid";
}
