import crypto from "node:crypto";
import { decodeJwt } from "jose";
import type { Knex } from "knex";
import { hashClientSecret } from "../credentials/client-secret.js";
import type { ApiUserRow } from "../../store/tables.js";
import {
  insertRefreshToken,
  lockRefreshToken,
  markRefreshTokenUsed,
  revokeRefreshTokenFamily,
} from "../../store/refresh-token-store.js";
import type { AccessTokens, BoundCredential, Principal } from "./access-tokens.js";
import type { ClientAuthenticator, PresentedCredentials } from "./client-authenticator.js";
import { invalidGrant, invalidRequest, invalidTarget, unsupportedGrantType } from "./oauth-errors.js";
import { grantScopes, SCOPES_BY_ROLE, parseScope, invalidScope } from "./scopes.js";
import type { TrustedIssuers } from "./trusted-issuers.js";
import { ServiceError } from "../errors.js";

export const GRANT_CLIENT_CREDENTIALS = "client_credentials";
export const GRANT_TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
export const GRANT_REFRESH_TOKEN = "refresh_token";
export const TOKEN_TYPE_ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token";
export const TOKEN_TYPE_JWT = "urn:ietf:params:oauth:token-type:jwt";
export const TOKEN_TYPE_ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token";

export interface TokenRequest {
  grantType: string;
  credentials: PresentedCredentials;
  scope: string;
  audience: string;
  subjectToken: string;
  subjectTokenType: string;
  refreshToken: string;
}

export interface IssuedToken {
  accessToken: string;
  tokenType: "Bearer";
  expiresIn: number;
  scope: string;
  refreshToken?: string;
  issuedTokenType?: string;
}

export interface TokenServiceSettings {
  audience: string;
  allowedAudiences: readonly string[];
  accessTokenTtlSeconds: number;
  legacyTokenTtlSeconds: number;
  refreshTokenTtlSeconds: number;
  pepper: Buffer;
  now: () => Date;
  /** This service's `iss`: subject tokens that carry it are verified as our own. */
  issuer: string;
}

/** The OAuth grants (spec 4.1, 5): client_credentials, token exchange (RFC 8693) and refresh. */
export class TokenService {
  constructor(
    private readonly db: Knex,
    private readonly clients: ClientAuthenticator,
    private readonly tokens: AccessTokens,
    private readonly trustedIssuers: TrustedIssuers,
    private readonly settings: TokenServiceSettings,
  ) {}

  /** Authenticates the client; failures are the caller's to count against the failure budget. */
  authenticate(credentials: PresentedCredentials): Promise<ApiUserRow> {
    return this.clients.authenticate(credentials);
  }

  async grant(client: ApiUserRow, request: TokenRequest): Promise<IssuedToken> {
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
    if (![GRANT_CLIENT_CREDENTIALS, GRANT_TOKEN_EXCHANGE, GRANT_REFRESH_TOKEN].includes(grantType)) throw unsupportedGrantType(grantType);
  }

  /** The deprecated /get-auth-token: a client-credentials token with the documented legacy lifetime. */
  async legacyToken(client: ApiUserRow): Promise<IssuedToken> {
    return this.issueForClient(client, SCOPES_BY_ROLE[client.role], [this.settings.audience], this.settings.legacyTokenTtlSeconds);
  }

  /** RFC 7662: active only for a valid token of the caller's own TMC. */
  async introspect(client: ApiUserRow, token: string): Promise<Principal | undefined> {
    try {
      const principal = await this.tokens.verify(token);
      return principal.tmcId === client.tmc_id ? principal : undefined;
    } catch (error) {
      if (error instanceof ServiceError) return undefined;
      throw error;
    }
  }

  private async clientCredentials(client: ApiUserRow, request: TokenRequest): Promise<IssuedToken> {
    if (request.refreshToken || request.subjectToken) throw invalidRequest("client_credentials takes neither subject_token nor refresh_token");
    const scopes = grantScopes(request.scope, SCOPES_BY_ROLE[client.role]);
    return this.issueForClient(client, scopes, [this.audienceOf(request.audience)], this.settings.accessTokenTtlSeconds);
  }

  private async issueForClient(client: ApiUserRow, scopes: readonly string[], audience: string[], ttlSeconds: number): Promise<IssuedToken> {
    const { accessToken, expiresIn } = await this.tokens.issue({
      ...issuedTo(client),
      scopes,
      subject: client.client_id,
      subjectKind: "CLIENT",
      audience,
      credentials: [[client.client_id, client.credential_generation]],
      ttlSeconds,
    });
    return { accessToken, tokenType: "Bearer", expiresIn, scope: scopes.join(" ") };
  }

  private async exchange(client: ApiUserRow, request: TokenRequest): Promise<IssuedToken> {
    if (!request.subjectToken) throw invalidRequest("subject_token is required for token exchange", "subject_token");
    if (!request.subjectTokenType) throw invalidRequest("subject_token_type is required for token exchange", "subject_token_type");
    const own: BoundCredential = [client.client_id, client.credential_generation];
    const roleScopes = SCOPES_BY_ROLE[client.role];

    if (request.subjectTokenType === TOKEN_TYPE_ACCESS_TOKEN && this.looksLikeOwnToken(request.subjectToken)) {
      // (a) A token this service issued: same subject, the caller as actor, never wider.
      let subject: Principal;
      try {
        subject = await this.tokens.verify(request.subjectToken);
      } catch {
        throw invalidRequest("The subject_token is not an active access token", "subject_token");
      }
      if (subject.tmcId !== client.tmc_id) throw invalidRequest("The subject_token belongs to another TMC", "subject_token");
      const scopes = narrowScopes(request.scope, subject.scopes.filter((s) => roleScopes.includes(s)));
      const audience = request.audience ? [request.audience] : [...subject.audience];
      if (!audience.every((a) => subject.audience.includes(a))) throw invalidTarget(request.audience);
      const act = { sub: client.client_id, ...(subject.act ? { act: subject.act } : {}) };
      const credentials = dedupe([own, ...subject.credentials]);
      return this.issueExchanged(client, subject.subject, subject.subjectKind, scopes, audience, act, credentials);
    }

    if ([TOKEN_TYPE_ACCESS_TOKEN, TOKEN_TYPE_JWT, TOKEN_TYPE_ID_TOKEN].includes(request.subjectTokenType)) {
      // (b) A JWT from an issuer the caller's TMC trusts, naming a user of that TMC by email.
      const { email } = await this.trustedIssuers.verify(client.tmc_id, request.subjectToken);
      const user = await this.db("users")
        .where({ tmc_id: client.tmc_id, email_normalized: email.toLowerCase(), is_active: true })
        .first("id");
      if (!user) throw invalidRequest("The subject_token names no active user of the caller's TMC", "subject_token");
      const scopes = narrowScopes(request.scope, roleScopes);
      const audience = [this.audienceOf(request.audience)];
      return this.issueExchanged(client, user.id as string, "USER", scopes, audience, { sub: client.client_id }, [own]);
    }
    throw invalidRequest("Unsupported subject_token_type", "subject_token_type");
  }

  private async issueExchanged(
    client: ApiUserRow,
    subject: string,
    subjectKind: "CLIENT" | "USER",
    scopes: readonly string[],
    audience: readonly string[],
    act: Record<string, unknown>,
    credentials: readonly BoundCredential[],
    familyId: string = crypto.randomUUID(),
    db: Knex = this.db,
  ): Promise<IssuedToken> {
    const { accessToken, expiresIn } = await this.tokens.issue({
      ...issuedTo(client),
      scopes,
      subject,
      subjectKind,
      audience,
      act,
      credentials,
      ttlSeconds: this.settings.accessTokenTtlSeconds,
    });
    const refreshToken = crypto.randomBytes(32).toString("base64url");
    await insertRefreshToken(db, {
      id: crypto.randomUUID(),
      token_hash: this.refreshHash(refreshToken),
      family_id: familyId,
      client_id: client.client_id,
      tmc_id: client.tmc_id,
      subject,
      subject_kind: subjectKind,
      scope: scopes.join(" "),
      audience: audience.join(" "),
      bound_credentials: credentials.map(([id, g]) => [id, g]),
      expires_at: new Date(this.settings.now().getTime() + this.settings.refreshTokenTtlSeconds * 1000),
    });
    return { accessToken, tokenType: "Bearer", expiresIn, scope: scopes.join(" "), refreshToken, issuedTokenType: TOKEN_TYPE_ACCESS_TOKEN };
  }

  /**
   * Refresh tokens rotate on every use; presenting one that was already used revokes its whole
   * family (RFC 9700 4.14.2), since either the client or an attacker holds a stolen copy.
   */
  private async refresh(client: ApiUserRow, request: TokenRequest): Promise<IssuedToken> {
    if (!request.refreshToken) throw invalidRequest("refresh_token is required", "refresh_token");
    const now = this.settings.now();
    const outcome = await this.db.transaction(async (trx) => {
      const row = await lockRefreshToken(trx, this.refreshHash(request.refreshToken));
      if (!row || row.client_id !== client.client_id) return { error: invalidGrant("The refresh token is not valid") };
      if (row.used_at || row.revoked_at) {
        await revokeRefreshTokenFamily(trx, row.family_id, now);
        return { error: invalidGrant("The refresh token was already used; its family is revoked") };
      }
      if (row.expires_at.getTime() <= now.getTime()) return { error: invalidGrant("The refresh token has expired") };
      const bound = row.bound_credentials.map(([id, g]) => [id, g] as BoundCredential);
      // The client's own credential must still be the one the family was issued under.
      if (bound[0]?.[1] !== client.credential_generation) {
        await revokeRefreshTokenFamily(trx, row.family_id, now);
        return { error: invalidGrant("The refresh token's credential has been rotated") };
      }
      await markRefreshTokenUsed(trx, row.id, now);
      const scopes = narrowScopes(request.scope, parseScope(row.scope));
      const act = { sub: client.client_id };
      return {
        issued: await this.issueExchanged(client, row.subject, row.subject_kind, scopes, row.audience.split(" "), act, bound, row.family_id, trx),
      };
    });
    if (outcome.error) throw outcome.error;
    return outcome.issued!;
  }

  private audienceOf(requested: string): string {
    if (!requested) return this.settings.audience;
    if (requested === this.settings.audience || this.settings.allowedAudiences.includes(requested)) return requested;
    throw invalidTarget(requested);
  }

  private refreshHash(token: string): Buffer {
    return hashClientSecret(this.settings.pepper, `refresh:${token}`);
  }

  /** Our own tokens name us as issuer; any other JWT (an IdP's RFC 9068 token too) goes to the trusted issuers. */
  private looksLikeOwnToken(token: string): boolean {
    try {
      return decodeJwt(token).iss === this.settings.issuer;
    } catch {
      return false;
    }
  }
}

/** The claims every token carries about the client that obtained it. */
function issuedTo(client: ApiUserRow) {
  return { clientId: client.client_id, tmcId: client.tmc_id, orgId: client.org_id ?? undefined, role: client.role };
}

/** Requested scopes must lie within `ceiling`; none requested means the whole ceiling. */
function narrowScopes(requested: string, ceiling: readonly string[]): string[] {
  const asked = parseScope(requested);
  if (asked.length === 0) return [...ceiling];
  const wider = asked.filter((s) => !ceiling.includes(s));
  if (wider.length) throw invalidScope(`Scope wider than allowed: ${wider.join(" ")}`);
  return asked;
}

function dedupe(credentials: readonly BoundCredential[]): BoundCredential[] {
  const seen = new Map<string, BoundCredential>();
  for (const c of credentials) if (!seen.has(c[0])) seen.set(c[0], c);
  return [...seen.values()];
}
