import { DomainError } from "../../errors/domain-error.js";
import type { ApiUser } from "../api-users/model.js";
import type { AuditSink } from "../audit/model.js";
import type { ClientCredentials } from "../shared/client-credentials.js";
import type { Admitted, ClientAuthPipeline, TokenCall } from "../shared/client-auth-pipeline.js";
import type { DpopProofs, DpopRequest } from "./dpop-proofs.js";
import type { IssuedToken, TokenRequest } from "./model.js";
import { TokenService } from "./token-service.js";

/**
 * The token endpoints (FetchOauth2Token and the legacy GetAuthToken) as named steps
 * (node-oidc-provider's token action): the client-authentication pipeline (rate limit → grant
 * type → authenticate → budget) → DPoP proof (RFC 9449: the key the token is bound to) → grant →
 * audit. Every outcome (issued, refused with its
 * errorCode, rate limited) is audited off the request path.
 */
export class TokenEndpoint {
  constructor(
    private readonly deps: {
      readonly pipeline: ClientAuthPipeline;
      readonly tokens: TokenService;
      readonly audit: AuditSink;
      readonly dpop: DpopProofs;
    },
  ) {}

  /** POST /v2/auth/oauth2-token (FetchOauth2Token). */
  async fetchToken(request: TokenRequest, call: TokenCall, dpop: DpopRequest): Promise<IssuedToken> {
    const { pipeline, tokens } = this.deps;
    const decision = await pipeline.admit(pipeline.apiUsers, request.credentials, call, () =>
      TokenService.checkGrantType(request.grantType),
    );
    return this.issued(request.credentials, request.grantType.slice(0, 80), call, decision, async (client) => {
      // Before the client's slot: the proof needs no database connection (its jti goes to the
      // replay cache), and a slot held across that round trip would cap the client's share.
      const boundKey = await this.deps.dpop.keyOfTokenRequest(dpop);
      if (boundKey === undefined) refuseUnboundFor(client);
      return () => tokens.grant(client, boundKey === undefined ? request : { ...request, boundKey });
    });
  }

  /** The DPoP nonce to offer now (RFC 9449 8: the DPoP-Nonce header of every answer to a request with a proof). */
  dpopNonce(): string {
    return this.deps.dpop.nonce();
  }

  /** The deprecated /get-auth-token: JSON credentials only, the documented legacy lifetime. */
  async legacyToken(credentials: ClientCredentials, call: TokenCall): Promise<IssuedToken> {
    const { pipeline, tokens } = this.deps;
    const decision = await pipeline.admit(pipeline.apiUsers, credentials, call);
    return this.issued(credentials, "legacy", call, decision, async (client) => {
      // The legacy endpoint takes no DPoP proof: it issues bearer tokens only.
      refuseUnboundFor(client);
      return () => tokens.legacyToken(client);
    });
  }

  /**
   * The grant in the client's share, then the outcome in the audit trail: issued or refused. Never
   * the secret or the token. `grantOf` checks what needs no database connection (a DPoP proof)
   * and returns the grant to run in the client's slot.
   */
  private async issued(
    credentials: ClientCredentials,
    grantType: string,
    call: TokenCall,
    decision: Admitted<ApiUser>,
    grantOf: (client: ApiUser) => Promise<() => Promise<IssuedToken>>,
  ): Promise<IssuedToken> {
    const { pipeline, audit } = this.deps;
    const details = { grantType };
    if (!decision.ok) throw pipeline.refused("TOKEN_REFUSED", pipeline.apiUsers, credentials, decision, call, details);
    const { client } = decision;
    let issued: IssuedToken;
    try {
      issued = await pipeline.slot(pipeline.apiUsers.party(client), await grantOf(client), call.signal);
    } catch (error) {
      throw pipeline.refused("TOKEN_REFUSED", pipeline.apiUsers, credentials, { client, error }, call, details);
    }
    audit.record({
      action: "TOKEN_ISSUED",
      outcome: "SUCCESS",
      actor: client.clientId,
      tmcId: client.tmcId,
      targetClientId: client.clientId,
      debugIdentifier: call.requestId,
      details: { grantType, remoteAddress: call.remoteAddress },
    });
    return issued;
  }
}

/**
 * RFC 9449 5.2 (dpop_bound_access_tokens): a client whose policy requires DPoP gets no token from a
 * request without a proof (every grant; refresh and exchange too). 400 invalid_request, as
 * Keycloak answers it: the request lacks a header the client must send.
 */
function refuseUnboundFor(client: ApiUser): void {
  if (client.dpopBoundAccessTokens)
    throw new DomainError(
      "INVALID_REQUEST",
      "DPoP proof is missing: this client must send one with every token request",
      {
        params: [{ name: "DPoP", value: "missing" }],
        logged: { refusalReason: "dpop required" },
      },
    );
}
