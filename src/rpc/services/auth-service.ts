import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  AuthService,
  type FetchOauth2TokenRequest,
  type GetAuthTokenRequest,
  type IntrospectTokenRequest,
  type IntrospectTokensRequest,
  type PollSecurityEventsRequest,
  type RevokeTokenRequest,
  type WatchCredentialChangesRequest,
} from "../../../gen/travel/auth/v2/auth_pb.js";
import type { CredentialChangeEndpoint } from "../../domain/credential-changes/credential-change-endpoint.js";
import type { TokenCall } from "../../domain/shared/client-auth-pipeline.js";
import { clientCredentialsOf, type ClientCredentials } from "../../domain/shared/client-credentials.js";
import type { IntrospectionEndpoint } from "../../domain/tokens/introspection-endpoint.js";
import type { RevocationEndpoint } from "../../domain/tokens/revocation-endpoint.js";
import type { TokenEndpoint } from "../../domain/tokens/token-endpoint.js";
import { DomainError } from "../../errors/domain-error.js";
import { changeEvent, introspectionResponse, tokenResponse } from "../mappers/token-mappers.js";
import { rateLimitHeaders } from "../rate-limit-headers.js";
import { dpopRequestOf, requestInfoOf } from "../request-context.js";
import { defineArea } from "../area.js";

/** RFC 9745: the legacy endpoint has been deprecated since this date. */
const LEGACY_DEPRECATED_AT = Date.UTC(2026, 0, 1) / 1000;

/** The endpoints that take a client credential, one domain module each. */
export interface AuthEndpoints {
  readonly tokenEndpoint: TokenEndpoint;
  readonly introspection: IntrospectionEndpoint;
  readonly revocation: RevocationEndpoint;
  readonly credentialChanges: CredentialChangeEndpoint;
}

/**
 * The token endpoints: the flow is the domain's endpoint modules; here the credentials are
 * parsed (once, into the value every step reads), and only headers and messages.
 */
export class AuthServiceHandler implements ServiceImpl<typeof AuthService> {
  constructor(private readonly endpoints: AuthEndpoints) {}

  async fetchOauth2Token(req: FetchOauth2TokenRequest, ctx: HandlerContext) {
    noStore(ctx);
    const request = {
      grantType: req.grantType,
      credentials: presented(req, ctx),
      scope: req.scope,
      audience: req.audience,
      subjectToken: req.subjectToken,
      subjectTokenType: req.subjectTokenType,
      refreshToken: req.refreshToken,
      requestedTokenType: req.requestedTokenType,
      resources: req.resource,
    };
    const dpop = dpopRequestOf(ctx.requestHeader, ctx.values);
    // RFC 9449 8: a client that sends proofs is told the nonce for its next one, refused or not.
    if (dpop.proof !== undefined) ctx.responseHeader.set("dpop-nonce", this.endpoints.tokenEndpoint.dpopNonce());
    return tokenResponse(await challenged(ctx, this.endpoints.tokenEndpoint.fetchToken(request, tokenCall(ctx), dpop)));
  }

  async getAuthToken(req: GetAuthTokenRequest, ctx: HandlerContext) {
    noStore(ctx);
    ctx.responseHeader.set("deprecation", `@${LEGACY_DEPRECATED_AT}`);
    ctx.responseHeader.set("link", '</v2/auth/oauth2-token>; rel="successor-version"');
    // JSON body only: the legacy endpoint never took HTTP Basic.
    const credentials = clientCredentialsOf({
      formClientId: req.clientId,
      formClientSecret: req.clientSecret,
      authorization: null,
    });
    // No challenge here: the legacy endpoint takes its credentials in the JSON body only.
    const issued = await this.endpoints.tokenEndpoint.legacyToken(credentials, tokenCall(ctx));
    return { token: issued.accessToken, expiryTimeInSeconds: issued.expiresIn, type: "Bearer" };
  }

  async revokeToken(req: RevokeTokenRequest, ctx: HandlerContext) {
    noStore(ctx);
    await challenged(
      ctx,
      this.endpoints.revocation.revoke(presented(req, ctx), req.token, req.tokenTypeHint, tokenCall(ctx)),
    );
    return {};
  }

  async introspectToken(req: IntrospectTokenRequest, ctx: HandlerContext) {
    noStore(ctx);
    return introspectionResponse(
      await challenged(ctx, this.endpoints.introspection.introspect(presented(req, ctx), req.token, tokenCall(ctx))),
    );
  }

  async introspectTokens(req: IntrospectTokensRequest, ctx: HandlerContext) {
    noStore(ctx);
    const principals = await challenged(
      ctx,
      this.endpoints.introspection.introspectMany(presented(req, ctx), req.tokens, tokenCall(ctx)),
    );
    return { results: principals.map(introspectionResponse) };
  }

  /** The credential-change stream: admitted and its cursor checked before the first event (a refusal is a plain error status). */
  async *watchCredentialChanges(req: WatchCredentialChangesRequest, ctx: HandlerContext) {
    noStore(ctx);
    const events = await challenged(
      ctx,
      this.endpoints.credentialChanges.watchChanges(presented(req, ctx), req.sinceCursor, ctx.signal, tokenCall(ctx)),
    );
    for await (const event of events) yield changeEvent(event);
  }

  /** RFC 8936 SET polling: the request's members as they are; the SETs by jti. */
  async pollSecurityEvents(req: PollSecurityEventsRequest, ctx: HandlerContext) {
    noStore(ctx);
    const result = await challenged(
      ctx,
      this.endpoints.credentialChanges.pollSecurityEvents(
        presented(req, ctx),
        {
          maxEvents: req.maxEvents,
          returnImmediately: req.returnImmediately,
          ack: req.ack,
          setErrs: Object.keys(req.setErrs),
        },
        ctx.signal,
        tokenCall(ctx),
      ),
    );
    return { sets: Object.fromEntries(result.sets), moreAvailable: result.moreAvailable };
  }
}

/** The token area: AuthService on the public face. */
export const authArea = defineArea({
  service: AuthService,
  face: "public",
  handler: ({ tokenEndpoint, introspection, revocation, credentialChanges }: AuthEndpoints) =>
    new AuthServiceHandler({ tokenEndpoint, introspection, revocation, credentialChanges }),
});

/** The request's client credentials, parsed once: the form fields (a client assertion's too) and the Basic header. */
function presented(
  req: {
    readonly clientId: string;
    readonly clientSecret: string;
    readonly clientAssertionType?: string;
    readonly clientAssertion?: string;
  },
  ctx: HandlerContext,
): ClientCredentials {
  return clientCredentialsOf({
    formClientId: req.clientId,
    formClientSecret: req.clientSecret,
    authorization: ctx.requestHeader.get("authorization"),
    clientAssertionType: req.clientAssertionType,
    clientAssertion: req.clientAssertion,
  });
}

function tokenCall(ctx: HandlerContext): TokenCall {
  const { requestId, remoteAddress } = requestInfoOf(ctx.values);
  return {
    requestId,
    remoteAddress,
    // Aborted when the caller hangs up or its deadline passes (Connect's), or when the REST client
    // closes its connection (the gateway's).
    signal: ctx.signal,
    onRateLimit: (decision) => {
      for (const [name, value] of Object.entries(rateLimitHeaders(decision))) ctx.responseHeader.set(name, value);
    },
  };
}

/** RFC 6749 5.2: a 401 from the token endpoints names the authentication scheme to use. */
async function challenged<T>(ctx: HandlerContext, work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof DomainError && error.kind === "UNAUTHENTICATED")
      ctx.responseHeader.set("www-authenticate", 'Basic realm="token"');
    throw error;
  }
}

/** RFC 6749 5.1: token responses are never cached. */
function noStore(ctx: HandlerContext): void {
  ctx.responseHeader.set("cache-control", "no-store");
  ctx.responseHeader.set("pragma", "no-cache");
}
