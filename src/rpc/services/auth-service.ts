import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { AuthService, FetchOauth2TokenRequest, GetAuthTokenRequest, IntrospectTokenRequest } from "../../../gen/travel/auth/v2/auth_pb.js";
import { ServiceError } from "../../domain/errors.js";
import { rateLimitHeaders, type TokenRateLimiter } from "../../domain/rate-limit/token-rate-limiter.js";
import { ClientAuthenticator, type PresentedCredentials } from "../../domain/tokens/client-authenticator.js";
import { tooManyRequests } from "../../domain/tokens/oauth-errors.js";
import { TokenService } from "../../domain/tokens/token-service.js";
import type { ApiUserRow } from "../../store/tables.js";
import type { AuditLog } from "../../domain/audit/audit-log.js";
import { requestInfoOf } from "../request-context.js";

/** RFC 9745: the legacy endpoint has been deprecated since this date. */
const LEGACY_DEPRECATED_AT = Date.UTC(2026, 0, 1) / 1000;

/** The token endpoints: rate limit → client authentication → grant. Headers as RFC 6749 5.1 asks. */
export class AuthServiceHandler implements ServiceImpl<typeof AuthService> {
  constructor(
    private readonly tokens: TokenService,
    private readonly limiter: TokenRateLimiter,
    private readonly audit: AuditLog,
  ) {}

  async fetchOauth2Token(req: FetchOauth2TokenRequest, ctx: HandlerContext) {
    noStore(ctx);
    const credentials = this.presented(req.clientId, req.clientSecret, ctx);
    return this.audited(credentials, req.grantType.slice(0, 80), ctx, async (authenticated) => {
      await this.limit(credentials, ctx);
      TokenService.checkGrantType(req.grantType);
      const client = authenticated(await this.authenticate(credentials, ctx));
      return this.issue(client, req, credentials);
    });
  }

  private async issue(client: ApiUserRow, req: FetchOauth2TokenRequest, credentials: PresentedCredentials) {
    const issued = await this.tokens.grant(client, {
      grantType: req.grantType,
      credentials,
      scope: req.scope,
      audience: req.audience,
      subjectToken: req.subjectToken,
      subjectTokenType: req.subjectTokenType,
      refreshToken: req.refreshToken,
    });
    return {
      accessToken: issued.accessToken,
      tokenType: issued.tokenType,
      expiresIn: issued.expiresIn,
      scope: issued.scope,
      refreshToken: issued.refreshToken ?? "",
      issuedTokenType: issued.issuedTokenType ?? "",
    };
  }

  async getAuthToken(req: GetAuthTokenRequest, ctx: HandlerContext) {
    noStore(ctx);
    ctx.responseHeader.set("deprecation", `@${LEGACY_DEPRECATED_AT}`);
    ctx.responseHeader.set("link", '</v2/auth/oauth2-token>; rel="successor-version"');
    // JSON body only: the legacy endpoint never took HTTP Basic.
    const credentials: PresentedCredentials = { formClientId: req.clientId, formClientSecret: req.clientSecret, authorization: null };
    return this.audited(credentials, "legacy", ctx, async (authenticated) => {
      await this.limit(credentials, ctx);
      const client = authenticated(await this.authenticate(credentials, ctx));
      const issued = await this.tokens.legacyToken(client);
      return { token: issued.accessToken, expiryTimeInSeconds: issued.expiresIn, type: "Bearer" };
    });
  }

  async introspectToken(req: IntrospectTokenRequest, ctx: HandlerContext) {
    noStore(ctx);
    const credentials = this.presented(req.clientId, req.clientSecret, ctx);
    await this.limit(credentials, ctx);
    const client = await this.authenticate(credentials, ctx);
    const principal = await this.tokens.introspect(client, req.token);
    if (!principal) return { active: false };
    return {
      active: true,
      scope: principal.scopes.join(" "),
      clientId: principal.clientId,
      tokenType: "Bearer",
      exp: principal.expiresAt,
      iat: principal.issuedAt,
      sub: principal.subject,
      aud: [...principal.audience],
      iss: principal.issuer,
      jti: principal.tokenId,
      tmcId: principal.tmcId,
      role: principal.role,
    };
  }

  /**
   * Records the outcome of a token request in the audit trail (off the request path): issued,
   * refused (with the errorCode) or rate limited. Never the secret or the token.
   */
  private async audited<T>(
    credentials: PresentedCredentials,
    grantType: string,
    ctx: HandlerContext,
    run: (authenticated: (client: ApiUserRow) => ApiUserRow) => Promise<T>,
  ): Promise<T> {
    let client: ApiUserRow | undefined;
    const debugIdentifier = requestInfoOf(ctx.values).requestId;
    const actor = client?.client_id ?? ClientAuthenticator.claimedClientId(credentials)?.slice(0, 128) ?? null;
    try {
      const result = await run((c) => (client = c));
      this.audit.record({
        action: "TOKEN_ISSUED",
        outcome: "SUCCESS",
        actor: client!.client_id,
        tmcId: client!.tmc_id,
        targetClientId: client!.client_id,
        debugIdentifier,
        details: { grantType },
      });
      return result;
    } catch (error) {
      const errorCode = error instanceof ServiceError ? error.errorCode : "INTERNAL_ERROR";
      this.audit.record({
        action: errorCode === "TOO_MANY_REQUESTS" ? "TOKEN_RATE_LIMITED" : "TOKEN_REFUSED",
        outcome: errorCode === "TOO_MANY_REQUESTS" ? "RATE_LIMITED" : "FAILURE",
        actor: client?.client_id ?? actor,
        tmcId: client?.tmc_id ?? null,
        targetClientId: client?.client_id ?? null,
        debugIdentifier,
        details: { grantType, errorCode },
      });
      throw error;
    }
  }

  private presented(clientId: string, clientSecret: string, ctx: HandlerContext): PresentedCredentials {
    return { formClientId: clientId, formClientSecret: clientSecret, authorization: ctx.requestHeader.get("authorization") };
  }

  private async limit(credentials: PresentedCredentials, ctx: HandlerContext): Promise<void> {
    const decision = await this.limiter.consume(ClientAuthenticator.claimedClientId(credentials), requestInfoOf(ctx.values).remoteAddress);
    for (const [name, value] of Object.entries(rateLimitHeaders(decision))) ctx.responseHeader.set(name, value);
    if (!decision.allowed) throw tooManyRequests(decision.retryAfterSeconds ?? 1);
  }

  private async authenticate(credentials: PresentedCredentials, ctx: HandlerContext): Promise<ApiUserRow> {
    try {
      return await this.tokens.authenticate(credentials);
    } catch (error) {
      if (error instanceof ServiceError && error.errorCode === "INVALID_CLIENT") {
        await this.limiter.recordFailure(ClientAuthenticator.claimedClientId(credentials), requestInfoOf(ctx.values).remoteAddress);
      }
      throw error;
    }
  }
}

function noStore(ctx: HandlerContext): void {
  ctx.responseHeader.set("cache-control", "no-store");
  ctx.responseHeader.set("pragma", "no-cache");
}
