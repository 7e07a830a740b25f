import type { KeyMaterial } from "../shared/key-material.js";
import crypto from "node:crypto";
import { decodeJwt } from "jose";
import { DomainError } from "../../errors/domain-error.js";
import type { ApiUser } from "../api-users/model.js";
import type { ApiUserRepository } from "../api-users/ports.js";
import { hashClientSecret } from "../shared/client-secret.js";
import type { Clock } from "../shared/clock.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { Tx, UnitOfWork } from "../shared/unit-of-work.js";
import type { TenantRepository } from "../tenants/ports.js";
import type { AccessTokens } from "./access-tokens.js";
import {
  GRANT_CLIENT_CREDENTIALS,
  GRANT_REFRESH_TOKEN,
  GRANT_TOKEN_EXCHANGE,
  SUPPORTED_GRANTS,
  TOKEN_TYPE_ACCESS_TOKEN,
  TOKEN_TYPE_ID_TOKEN,
  TOKEN_TYPE_JWT,
  type BoundCredential,
  type IssuedToken,
  type Principal,
  type SubjectKind,
  type TokenConfig,
  type TokenRequest,
} from "./model.js";
import { invalidGrant, invalidRequest, invalidTarget, unsupportedGrantType } from "./oauth-errors.js";
import type { AudienceDirectory, RefreshTokenRepository } from "./ports.js";
import { grantScopes, parseScope, SCOPES_BY_ROLE } from "./scopes.js";
import type { EmailScope, TrustedIssuers } from "./trusted-issuers.js";

/** The token settings the grants use (`issuer`: subject tokens that carry it are verified as our own), and the pepper. */
export type TokenServiceSettings = Pick<
  TokenConfig,
  | "issuer"
  | "audience"
  | "allowedAudiences"
  | "accessTokenTtlSeconds"
  | "legacyTokenTtlSeconds"
  | "refreshTokenTtlSeconds"
> & { readonly pepper: KeyMaterial["secretPepper"] };

/** The OAuth grants (spec 4.1, 5): client_credentials, token exchange (RFC 8693) and refresh. */
export class TokenService {
  constructor(
    private readonly deps: {
      readonly uow: UnitOfWork;
      readonly tokens: AccessTokens;
      readonly trustedIssuers: TrustedIssuers;
      readonly tenants: TenantRepository;
      readonly refreshTokens: RefreshTokenRepository;
      readonly apiUsers: Pick<ApiUserRepository, "credentialStates" | "findActive">;
      /** The audiences registered resource servers serve: each may be asked for. */
      readonly audiences: AudienceDirectory;
      readonly settings: TokenServiceSettings;
      readonly now: Clock;
    },
  ) {}

  async grant(client: ApiUser, request: TokenRequest): Promise<IssuedToken> {
    // RFC 8693 2.1: only access tokens are issued, and only an exchange may ask for a type.
    if (
      request.requestedTokenType &&
      (request.grantType !== GRANT_TOKEN_EXCHANGE || request.requestedTokenType !== TOKEN_TYPE_ACCESS_TOKEN)
    ) {
      throw invalidRequest(
        "requested_token_type: only urn:ietf:params:oauth:token-type:access_token can be issued, by token exchange",
        "requested_token_type",
      );
    }
    switch (request.grantType) {
      case GRANT_CLIENT_CREDENTIALS:
        return this.clientCredentials(client, request);
      case GRANT_TOKEN_EXCHANGE:
        return this.exchange(client, request);
      case GRANT_REFRESH_TOKEN:
        return this.refresh(client, request);
      default:
        throw unsupportedGrantType(request.grantType);
    }
  }

  /** Checks the grant_type before authenticating, so malformed requests are 400s whatever the credentials. */
  static checkGrantType(grantType: string): void {
    if (grantType === "") throw invalidRequest("grant_type is required", "grant_type");
    if (!SUPPORTED_GRANTS.includes(grantType)) throw unsupportedGrantType(grantType);
  }

  /** The deprecated /get-auth-token: a client-credentials token with the documented legacy lifetime. */
  async legacyToken(client: ApiUser): Promise<IssuedToken> {
    return this.issueForClient(
      client,
      SCOPES_BY_ROLE[client.role],
      [this.deps.settings.audience],
      this.deps.settings.legacyTokenTtlSeconds,
    );
  }

  /** RFC 7662: active only for a valid token of the caller's own TMC. */
  async introspect(client: ApiUser, token: string): Promise<Principal | undefined> {
    try {
      const principal = await this.deps.tokens.verify(token);
      if (principal.tmcId !== client.tmcId) return undefined;
      // The same rule as exchange: a company admin learns only about tokens of its own company.
      return (await this.mayActFor(client, principal.subject, principal.subjectKind)) ? principal : undefined;
    } catch (error) {
      if (error instanceof DomainError) return undefined;
      throw error;
    }
  }

  /**
   * RFC 7662 section 4, for a resource server serving `audiences`: each token's principal if it is
   * active and addressed to one of them (any TMC), else undefined; one revocation check for all.
   */
  introspectFor(audiences: readonly string[], tokens: readonly string[]): Promise<Array<Principal | undefined>> {
    return this.deps.tokens.verifyMany(tokens, audiences);
  }

  private async clientCredentials(client: ApiUser, request: TokenRequest): Promise<IssuedToken> {
    if (request.refreshToken || request.subjectToken)
      throw invalidRequest("client_credentials takes neither subject_token nor refresh_token");
    const scopes = grantScopes(request.scope, SCOPES_BY_ROLE[client.role], "allowed");
    return this.issueForClient(
      client,
      scopes,
      await this.audiencesOf(request),
      this.deps.settings.accessTokenTtlSeconds,
      request.boundKey,
    );
  }

  private async issueForClient(
    client: ApiUser,
    scopes: readonly string[],
    audience: string[],
    ttlSeconds: number,
    boundKey?: string,
  ): Promise<IssuedToken> {
    const { accessToken, expiresIn } = await this.deps.tokens.issue({
      ...issuedTo(client),
      scopes,
      subject: client.clientId,
      subjectKind: "CLIENT",
      audience,
      credentials: [[client.clientId, client.credentialGeneration]],
      ttlSeconds,
      ...(boundKey !== undefined ? { boundKey } : {}),
    });
    return { accessToken, tokenType: tokenTypeOf(boundKey), expiresIn, scope: scopes.join(" ") };
  }

  private async exchange(client: ApiUser, request: TokenRequest): Promise<IssuedToken> {
    if (!request.subjectToken) throw invalidRequest("subject_token is required for token exchange", "subject_token");
    if (!request.subjectTokenType)
      throw invalidRequest("subject_token_type is required for token exchange", "subject_token_type");
    if (request.subjectTokenType === TOKEN_TYPE_ACCESS_TOKEN && this.looksLikeOwnToken(request.subjectToken))
      return this.exchangeOwnToken(client, request);
    if ([TOKEN_TYPE_ACCESS_TOKEN, TOKEN_TYPE_JWT, TOKEN_TYPE_ID_TOKEN].includes(request.subjectTokenType))
      return this.exchangeTrustedIssuerToken(client, request);
    throw invalidRequest("Unsupported subject_token_type", "subject_token_type");
  }

  /** (a) A token this service issued: same subject, the caller as actor, never wider. */
  private async exchangeOwnToken(client: ApiUser, request: TokenRequest): Promise<IssuedToken> {
    let subject: Principal;
    try {
      subject = await this.deps.tokens.verify(request.subjectToken);
    } catch {
      throw invalidRequest("The subject_token is not an active access token", "subject_token");
    }
    if (subject.tmcId !== client.tmcId)
      throw invalidRequest("The subject_token belongs to another TMC", "subject_token");
    if (!(await this.mayActFor(client, subject.subject, subject.subjectKind))) throw notYourSubject();
    const roleScopes = SCOPES_BY_ROLE[client.role];
    const scopes = grantScopes(
      request.scope,
      subject.scopes.filter((s) => roleScopes.includes(s)),
      "narrowed",
    );
    const requested = requestedAudiences(request);
    const audience = requested.length > 0 ? requested : [...subject.audience];
    const wider = audience.find((a) => !subject.audience.includes(a));
    if (wider !== undefined) throw invalidTarget(wider);
    const act = { sub: client.clientId, ...(subject.act ? { act: subject.act } : {}) };
    const credentials = dedupe([ownCredential(client), ...subject.credentials]);
    return this.issueExchanged(
      client,
      subject.subject,
      subject.subjectKind,
      scopes,
      audience,
      act,
      credentials,
      request.boundKey,
    );
  }

  /**
   * (b) A JWT from an issuer the caller's TMC trusts, naming a user by email. The lookup stays
   * within one company where one is known — the issuer's (bound to a company's IdP), or a company
   * admin's own — so no other company's users (a SCIM client may provision any email and any
   * externalId) can change its answer. A TMC-wide issuer used by a TMC admin spans the TMC, where
   * an email that several companies hold names no one (`TrustedIssuers.userNamed`).
   */
  private async exchangeTrustedIssuerToken(client: ApiUser, request: TokenRequest): Promise<IssuedToken> {
    const verified = await this.deps.trustedIssuers.verify(client.tmcId, request.subjectToken);
    const ownCompany = client.role === "COMPANY_ADMIN" ? client.orgId : undefined;
    if (ownCompany !== undefined && verified.companyId !== undefined && verified.companyId !== ownCompany) {
      throw invalidRequest("The subject_token names no active user of the caller's company", "subject_token");
    }
    const scope: EmailScope | undefined =
      verified.companyId !== undefined
        ? { companyId: verified.companyId, whose: "issuer's company" }
        : ownCompany !== undefined
          ? { companyId: ownCompany, whose: "caller's company" }
          : undefined;
    const user = await this.deps.trustedIssuers.userNamed(client, verified, scope);
    if (!user) {
      throw invalidRequest(
        `The subject_token names no active user of the ${scope?.whose ?? "caller's TMC"}`,
        "subject_token",
      );
    }
    if (ownCompany !== undefined && user.companyId !== ownCompany) throw notYourSubject();
    const scopes = grantScopes(request.scope, SCOPES_BY_ROLE[client.role], "narrowed");
    const audience = await this.audiencesOf(request);
    return this.issueExchanged(
      client,
      user.id,
      "USER",
      scopes,
      audience,
      { sub: client.clientId },
      [ownCredential(client)],
      request.boundKey,
    );
  }

  private async issueExchanged(
    client: ApiUser,
    subject: string,
    subjectKind: SubjectKind,
    scopes: readonly string[],
    audience: readonly string[],
    act: Record<string, unknown>,
    credentials: readonly BoundCredential[],
    boundKey: string | undefined,
    familyId: string = crypto.randomUUID(),
    tx: Tx = this.deps.uow.direct,
  ): Promise<IssuedToken> {
    const { accessToken, expiresIn } = await this.deps.tokens.issue({
      ...issuedTo(client),
      scopes,
      subject,
      subjectKind,
      audience,
      act,
      credentials,
      ttlSeconds: this.deps.settings.accessTokenTtlSeconds,
      ...(boundKey !== undefined ? { boundKey } : {}),
    });
    const refreshToken = crypto.randomBytes(32).toString("base64url");
    await this.deps.refreshTokens.insert(tx, tenantScope(client.tmcId), {
      id: crypto.randomUUID(),
      tokenHash: this.refreshHash(refreshToken),
      familyId,
      clientId: client.clientId,
      subject,
      subjectKind,
      scope: scopes.join(" "),
      audience: audience.join(" "),
      boundCredentials: credentials,
      act,
      expiresAt: new Date(this.deps.now().getTime() + this.deps.settings.refreshTokenTtlSeconds * 1000),
    });
    return {
      accessToken,
      tokenType: tokenTypeOf(boundKey),
      expiresIn,
      scope: scopes.join(" "),
      refreshToken,
      issuedTokenType: TOKEN_TYPE_ACCESS_TOKEN,
    };
  }

  /**
   * Refresh tokens rotate on every use; presenting one that was already used revokes its whole
   * family (RFC 9700 4.14.2), since either the client or an attacker holds a stolen copy.
   */
  private async refresh(client: ApiUser, request: TokenRequest): Promise<IssuedToken> {
    if (!request.refreshToken) throw invalidRequest("refresh_token is required", "refresh_token");
    const now = this.deps.now();
    const scope = tenantScope(client.tmcId);
    const outcome = await this.deps.uow.transaction(async (tx) => {
      const token = await this.deps.refreshTokens.lockByHash(tx, scope, this.refreshHash(request.refreshToken));
      if (!token || token.clientId !== client.clientId)
        return { error: invalidGrant("The refresh token is not valid") };
      if (token.usedAt || token.revokedAt) {
        await this.deps.refreshTokens.revokeFamily(tx, scope, token.familyId, now);
        return { error: invalidGrant("The refresh token was already used; its family is revoked") };
      }
      if (token.expiresAt.getTime() <= now.getTime()) return { error: invalidGrant("The refresh token has expired") };
      const bound = token.boundCredentials;
      // Every credential the family depends on (the client's own, and the subject's after an
      // exchange) must still be the one it was issued under: otherwise the new access token would
      // be dead on arrival, and the family dies with the credential.
      const current = await this.deps.apiUsers.credentialStates(
        tx,
        bound.map(([id]) => id),
      );
      if (
        bound[0]?.[1] !== client.credentialGeneration ||
        bound.some(([id, generation]) => current.get(id)?.generation !== generation)
      ) {
        await this.deps.refreshTokens.revokeFamily(tx, scope, token.familyId, now);
        return { error: invalidGrant("The refresh token's credential has been rotated") };
      }
      await this.deps.refreshTokens.markUsed(tx, scope, token.id, now);
      const scopes = grantScopes(request.scope, parseScope(token.scope), "narrowed");
      return {
        issued: await this.issueExchanged(
          client,
          token.subject,
          token.subjectKind,
          scopes,
          token.audience.split(" "),
          token.act,
          bound,
          request.boundKey,
          token.familyId,
          tx,
        ),
      };
    });
    if (outcome.error) throw outcome.error;
    return outcome.issued!;
  }

  /**
   * Who may act for whom (exchange and introspection): a TMC admin for anyone of its TMC; a
   * company admin only for subjects of its own company, and never for a TMC admin.
   */
  private async mayActFor(caller: ApiUser, subject: string, kind: SubjectKind): Promise<boolean> {
    if (caller.role === "TMC_ADMIN") return true;
    const scope = tenantScope(caller.tmcId);
    if (kind === "USER")
      return (await this.deps.tenants.findActiveUser(this.deps.uow.direct, scope, subject))?.companyId === caller.orgId;
    const client = await this.deps.apiUsers.findActive(this.deps.uow.direct, subject);
    return (
      client !== undefined &&
      client.tmcId === caller.tmcId &&
      client.role !== "TMC_ADMIN" &&
      client.orgId === caller.orgId
    );
  }

  /**
   * The audiences a token is issued for: those the request names, each the service's own, one of
   * ALLOWED_AUDIENCES or one a registered resource server serves (else invalid_target, naming
   * the first that is none of them); none named, the service's own.
   */
  private async audiencesOf(request: TokenRequest): Promise<string[]> {
    const requested = requestedAudiences(request);
    if (requested.length === 0) return [this.deps.settings.audience];
    const { audience, allowedAudiences } = this.deps.settings;
    const others = requested.filter((a) => a !== audience && !allowedAudiences.includes(a));
    const registered = others.length > 0 ? await this.deps.audiences.registered(others) : new Set<string>();
    const unknown = others.find((a) => !registered.has(a));
    if (unknown !== undefined) throw invalidTarget(unknown);
    return requested;
  }

  private refreshHash(token: string): Buffer {
    return refreshTokenHash(this.deps.settings.pepper, token);
  }

  /** Our own tokens name us as issuer; any other JWT (an IdP's RFC 9068 token too) goes to the trusted issuers. */
  private looksLikeOwnToken(token: string): boolean {
    try {
      return decodeJwt(token).iss === this.deps.settings.issuer;
    } catch {
      return false;
    }
  }
}

/**
 * RFC 9449 5: a token bound to the proof's key is of type DPoP. Refresh tokens stay unbound: this
 * service's clients are confidential, and RFC 9449 5 binds refresh tokens of public clients only.
 */
function tokenTypeOf(boundKey: string | undefined): "Bearer" | "DPoP" {
  return boundKey === undefined ? "Bearer" : "DPoP";
}

function notYourSubject() {
  return invalidRequest("The caller may not obtain a token for the subject of this subject_token", "subject_token");
}

/** The caller's own credential, bound into every token it obtains by exchange. */
function ownCredential(client: ApiUser): BoundCredential {
  return [client.clientId, client.credentialGeneration];
}

/** The claims every token carries about the client that obtained it. */
function issuedTo(client: ApiUser) {
  return { clientId: client.clientId, tmcId: client.tmcId, orgId: client.orgId, role: client.role };
}

function dedupe(credentials: readonly BoundCredential[]): BoundCredential[] {
  const seen = new Map<string, BoundCredential>();
  for (const c of credentials) if (!seen.has(c[0])) seen.set(c[0], c);
  return [...seen.values()];
}

/**
 * The audiences a request asks for, in order and once each: every `resource` (RFC 8707, which may
 * repeat; each an absolute URI without a fragment), or else `audience` (RFC 8693). When both are
 * given, `audience` must be one of the resources. Empty: none asked (the default).
 */
function requestedAudiences(request: TokenRequest): string[] {
  const resources = [...new Set(request.resources ?? [])];
  if (resources.length === 0) return request.audience ? [request.audience] : [];
  const malformed = resources.find((r) => !isAbsoluteUriWithoutFragment(r));
  if (malformed !== undefined) throw invalidTarget(malformed);
  if (request.audience && !resources.includes(request.audience)) throw invalidTarget(request.audience);
  return resources;
}

function isAbsoluteUriWithoutFragment(value: string): boolean {
  if (!URL.canParse(value)) return false;
  return !new URL(value).hash && !value.includes("#");
}

/** What is stored of a refresh token: its keyed hash (the token itself is shown once). */
export function refreshTokenHash(pepper: KeyMaterial["secretPepper"], token: string): Buffer {
  return hashClientSecret(pepper, `refresh:${token}`);
}
