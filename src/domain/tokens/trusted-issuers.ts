import { createLocalJWKSet, createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, type JSONWebKeySet, type JWTVerifyGetKey } from "jose";
import type { Knex } from "knex";
import { findTrustedIssuer, upsertTrustedIssuer } from "../../store/trusted-issuer-store.js";
import { findTmc } from "../../store/tenant-store.js";
import { invalidArgument, notFound } from "../errors.js";
import { invalidRequest } from "./oauth-errors.js";

/** Algorithms accepted from external issuers (the platform documents RS256; ES256 too). */
const EXTERNAL_ALGORITHMS = ["RS256", "ES256"];

export interface TrustedIssuerInput {
  issuer: string;
  jwksUri: string | undefined;
  jwks: string | undefined;
  audience: string | undefined;
}

/**
 * External identity providers a TMC trusts for token exchange: their JWTs are verified against
 * the issuer's JWKS (fetched and cached by jose, or configured inline) and name a user by email.
 */
export class TrustedIssuers {
  private readonly remoteKeySets = new Map<string, JWTVerifyGetKey>();

  constructor(
    private readonly db: Knex,
    private readonly now: () => Date,
  ) {}

  async add(tmcId: string, input: TrustedIssuerInput): Promise<void> {
    if (!(await findTmc(this.db, tmcId))) throw notFound("TMC", [{ name: "tmcId", value: tmcId }]);
    if (Boolean(input.jwksUri) === Boolean(input.jwks)) throw invalidArgument("Give exactly one of jwksUri and jwks");
    let jwks: JSONWebKeySet | null = null;
    if (input.jwks) {
      try {
        jwks = JSON.parse(input.jwks) as JSONWebKeySet;
        if (!Array.isArray(jwks.keys) || jwks.keys.length === 0) throw new Error("no keys");
        createLocalJWKSet(jwks);
      } catch {
        throw invalidArgument("jwks must be a JWKS document", [{ name: "jwks", value: "invalid" }]);
      }
    }
    await upsertTrustedIssuer(this.db, {
      tmc_id: tmcId,
      issuer: input.issuer,
      jwks_uri: input.jwksUri ?? null,
      jwks,
      audience: input.audience ?? null,
    });
  }

  /** Verifies a subject token from an issuer the TMC trusts; returns the email it names. */
  async verify(tmcId: string, token: string): Promise<{ issuer: string; email: string }> {
    const bad = (why: string) => invalidRequest(`The subject_token is not acceptable: ${why}`, "subject_token");
    let issuer: unknown;
    let kid: unknown;
    try {
      issuer = decodeJwt(token).iss;
      kid = decodeProtectedHeader(token).kid;
    } catch {
      throw bad("not a JWT");
    }
    if (typeof issuer !== "string") throw bad("no issuer");
    if (typeof kid !== "string" || kid === "") throw bad("no key id (kid)");
    const trusted = await findTrustedIssuer(this.db, tmcId, issuer);
    if (!trusted) throw bad("its issuer is not trusted by the caller's TMC");
    const keys = trusted.jwks ? createLocalJWKSet(trusted.jwks as JSONWebKeySet) : this.remoteKeySet(trusted.jwks_uri!);
    let email: unknown;
    try {
      const { payload } = await jwtVerify(token, keys, {
        issuer,
        algorithms: EXTERNAL_ALGORITHMS,
        currentDate: this.now(),
        clockTolerance: 30,
        requiredClaims: ["exp"],
        ...(trusted.audience ? { audience: trusted.audience } : {}),
      });
      email = payload.email;
    } catch {
      throw bad("its signature or claims do not verify");
    }
    if (typeof email !== "string" || email === "") throw bad("no email claim");
    return { issuer, email };
  }

  private remoteKeySet(uri: string): JWTVerifyGetKey {
    let keySet = this.remoteKeySets.get(uri);
    if (!keySet) {
      keySet = createRemoteJWKSet(new URL(uri), { timeoutDuration: 3_000, cooldownDuration: 30_000, cacheMaxAge: 600_000 });
      this.remoteKeySets.set(uri, keySet);
    }
    return keySet;
  }
}
