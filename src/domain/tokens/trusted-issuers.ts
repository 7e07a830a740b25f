import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  errors,
  jwtVerify,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
} from "jose";
import { DomainError, invalidArgument, notFound } from "../../errors/domain-error.js";
import { jwksDocumentOf } from "../shared/client-assertion.js";
import type { Clock } from "../shared/clock.js";
import type { Logger } from "../shared/observability.js";
import type { RemoteKeySets } from "../shared/remote-key-sets.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { User } from "../tenants/model.js";
import type { TenantRepository } from "../tenants/ports.js";
import { invalidRequest } from "./oauth-errors.js";
import { EXTERNAL_ALGORITHMS, issuerKeySetOf } from "./issuer-key-set.js";
import type { TokenConfig, TrustedIssuer } from "./model.js";
import type { TrustedIssuerRepository } from "./ports.js";

export interface TrustedIssuerInput {
  issuer: string;
  jwksUri: string | undefined;
  jwks: string | undefined;
  audience: string | undefined;
  /** Binds the issuer to one company of the TMC: its tokens name that company's users only. */
  companyId?: string | undefined;
}

/** What a verified subject token from a trusted issuer says: who issued it, the e-mail it names, the issuer's company. */
export interface VerifiedIdpToken {
  readonly issuer: string;
  readonly email: string;
  /** The company the issuer is bound to; undefined: TMC-wide. */
  readonly companyId: string | undefined;
}

/** Where an e-mail is looked up: one company, and whose it is (for the messages and the log). */
export interface EmailScope {
  readonly companyId: string;
  readonly whose: "issuer's company" | "caller's company";
}

/** Users of other companies returned with the one looked for: enough to log who shares the e-mail. */
const EMAIL_CANDIDATES = 10;

/** Why a subject token is refused when the issuer's key set cannot be had (the reason is logged only). */
const NOT_VERIFIED = "its signature or claims do not verify";

/**
 * External identity providers a TMC trusts for token exchange: their JWTs are verified against
 * the issuer's JWKS (configured inline, or registered by URL and fetched as RemoteKeySets allows:
 * the rules and limits of a client's `jwks_uri`, an IdP's lenient key check) and name a user by
 * email.
 */
export class TrustedIssuers {
  /** A jose verifier per held key set (a set is replaced, never changed, when it is refetched). */
  readonly #localSets = new WeakMap<JSONWebKeySet, JWTVerifyGetKey>();

  constructor(
    private readonly deps: {
      readonly uow: UnitOfWork;
      readonly tenants: TenantRepository;
      readonly issuers: TrustedIssuerRepository;
      readonly now: Clock;
      readonly logger: Logger;
      /** Issuers' key sets registered by URL: the URL rules (uriOf) and the held, fetched sets (keySetOf). */
      readonly keySets: Pick<RemoteKeySets, "uriOf" | "keySetOf">;
      /** The longest lifetime (exp − iat, or exp − now without iat) accepted from an external token. */
      readonly settings: Pick<TokenConfig, "externalTokenMaxLifetimeSeconds">;
    },
  ) {}

  async add(tmcId: string, input: TrustedIssuerInput): Promise<void> {
    const scope = tenantScope(tmcId);
    if (!(await this.deps.tenants.findTmc(this.deps.uow.direct, scope)))
      throw notFound("TMC", [{ name: "tmcId", value: tmcId }]);
    if (
      input.companyId !== undefined &&
      !(await this.deps.tenants.findCompany(this.deps.uow.direct, scope, input.companyId))
    ) {
      throw notFound("Company of this TMC", [{ name: "companyId", value: input.companyId }]);
    }
    if (Boolean(input.jwksUri) === Boolean(input.jwks)) throw invalidArgument("Give exactly one of jwksUri and jwks");
    // A token minted by the issuer for another relying party must never be exchangeable here.
    if (!input.audience)
      throw invalidArgument("audience is required: the audience the issuer's tokens carry for this platform", [
        { name: "audience", value: "" },
      ]);
    // The rules of a client's jwks_uri (https only, …). Not fetched here, as Keycloak's identity
    // providers are not at save: an unreachable or unusable URL refuses the exchanges (logged).
    const jwksUri = input.jwksUri ? this.deps.keySets.uriOf(input.jwksUri) : undefined;
    // An inline set passes the rule of a fetched one (issuerKeySetOf): a private or symmetric key
    // is refused, never stored; of the rest, only the public members of usable keys are kept.
    const jwks = input.jwks ? await issuerKeySetOf(jwksDocumentOf(input.jwks)) : undefined;
    await this.deps.issuers.upsert(this.deps.uow.direct, scope, {
      issuer: input.issuer,
      jwksUri,
      jwks: jwks as { keys: unknown[] } | undefined,
      audience: input.audience,
      companyId: input.companyId,
    });
  }

  /** Verifies a subject token from an issuer the TMC trusts; returns the email it names and the issuer's company. */
  async verify(tmcId: string, token: string): Promise<VerifiedIdpToken> {
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
    const trusted = await this.deps.issuers.find(this.deps.uow.direct, tenantScope(tmcId), issuer);
    if (!trusted) throw bad("its issuer is not trusted by the caller's TMC");
    // Issuers registered before the audience became required have none: refused, never "any audience".
    if (!trusted.audience) throw bad("its issuer is registered without an audience");
    const expected: JWTVerifyOptions = {
      issuer,
      audience: trusted.audience,
      algorithms: [...EXTERNAL_ALGORITHMS],
      currentDate: this.deps.now(),
      clockTolerance: 30,
      requiredClaims: ["exp"],
    };
    let payload: JWTPayload | undefined;
    try {
      payload = trusted.jwks
        ? (await jwtVerify(token, createLocalJWKSet(trusted.jwks as JSONWebKeySet), expected)).payload
        : await this.verifiedByUri(tmcId, trusted, token, expected);
    } catch {
      throw bad(NOT_VERIFIED);
    }
    if (!payload) throw bad(NOT_VERIFIED);
    // An iat in the future must not stretch the allowed lifetime: count from now at the latest.
    const now = Math.floor(this.deps.now().getTime() / 1000);
    const issuedAt = typeof payload.iat === "number" ? Math.min(payload.iat, now) : now;
    const maxLifetimeSeconds = this.deps.settings.externalTokenMaxLifetimeSeconds;
    if (payload.exp! - issuedAt > maxLifetimeSeconds)
      throw bad(`its lifetime is longer than ${maxLifetimeSeconds} seconds`);
    if (payload.email_verified !== undefined && payload.email_verified !== true) throw bad("its email is not verified");
    const email = payload.email;
    if (typeof email !== "string" || email === "") throw bad("no email claim");
    return { issuer, email, companyId: trusted.companyId };
  }

  /**
   * The active user a verified token's e-mail names: in `scope` (the issuer's company, or a company
   * admin's own) if given, else anywhere in the TMC. Any company's SCIM client may provision any
   * e-mail and any externalId, so nothing but a company tells users of several companies apart:
   * without a scope, an e-mail several companies hold is refused (INVALID_GRANT), whatever the
   * token's `sub`. Such a shared e-mail is logged at warn (ids only: no e-mail, no token).
   */
  async userNamed(
    caller: { tmcId: string; clientId: string },
    token: VerifiedIdpToken,
    scope: EmailScope | undefined,
  ): Promise<User | undefined> {
    const candidates = await this.deps.tenants.findActiveUsersByEmail(
      this.deps.uow.direct,
      tenantScope(caller.tmcId),
      token.email,
      {
        limit: EMAIL_CANDIDATES,
        companyFirst: scope?.companyId,
      },
    );
    const user = scope ? candidates.find((c) => c.companyId === scope.companyId) : candidates[0];
    const shared = candidates.length > 1;
    if (shared) {
      const outcome = !scope ? "refused" : user ? `named within the ${scope.whose}` : `none within the ${scope.whose}`;
      this.deps.logger.warn(
        {
          tmcId: caller.tmcId,
          clientId: caller.clientId,
          issuer: token.issuer,
          companyIds: candidates.map((c) => c.companyId),
          userIds: candidates.map((c) => c.id),
          outcome,
        },
        "token exchange: an IdP token's e-mail names active users of several companies of the TMC",
      );
    }
    if (shared && !scope) throw ambiguousEmail();
    return user;
  }

  /**
   * The token's claims verified with the issuer's set at its jwksUri: the held one, refetched once
   * (at most once per cooldown for this issuer of this TMC) when it lacks the token's kid. A URL
   * the rules no longer accept (registered before they applied) or no set to verify with gives
   * undefined, with the reason logged (fail closed; never the document). The owner is the issuer
   * of the TMC, its version the registration number: registering the issuer again (another URL,
   * or the same one to cut a withdrawn key off) drops what every instance held, at its next exchange.
   */
  private async verifiedByUri(
    tmcId: string,
    trusted: TrustedIssuer,
    token: string,
    expected: JWTVerifyOptions,
  ): Promise<JWTPayload | undefined> {
    const unavailable = (reason: string) => {
      this.deps.logger.warn(
        { tmcId, issuer: trusted.issuer, reason },
        "token exchange: the trusted issuer's key set is unavailable",
      );
      return undefined;
    };
    let jwksUri: string;
    try {
      jwksUri = this.deps.keySets.uriOf(trusted.jwksUri ?? "");
    } catch (error) {
      return unavailable(error instanceof DomainError ? error.message : "jwks_uri is not accepted");
    }
    const owner = { id: `${tmcId} ${trusted.issuer}`, version: trusted.registration ?? 0, jwksUri };
    const held = await this.deps.keySets.keySetOf(owner);
    if ("unavailable" in held) return unavailable(`jwks_uri ${held.unavailable}`);
    try {
      return (await jwtVerify(token, this.localSetOf(held.keys), expected)).payload;
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) throw error;
      const refetched = await this.deps.keySets.keySetOf(owner, true);
      if ("unavailable" in refetched || refetched.keys === held.keys) throw error;
      return (await jwtVerify(token, this.localSetOf(refetched.keys), expected)).payload;
    }
  }

  private localSetOf(keys: JSONWebKeySet): JWTVerifyGetKey {
    let local = this.#localSets.get(keys);
    if (!local) {
      local = createLocalJWKSet(keys);
      this.#localSets.set(keys, local);
    }
    return local;
  }
}

/** Never one of several users picked by a claim another company could have planted: the grant is refused. */
function ambiguousEmail() {
  return new DomainError(
    "INVALID_GRANT",
    "The subject_token's email names active users of more than one company of the TMC: only an issuer bound to a company names one of them",
    { params: [{ name: "subject_token", value: "ambiguous email" }] },
  );
}
