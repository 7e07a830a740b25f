import type { AuditSink } from "../audit/model.js";
import { isResourceServerId } from "../resource-servers/model.js";
import { claimedClientId, type ClientCredentials } from "../shared/client-credentials.js";
import type { ClientAuthPipeline, TokenCall } from "../shared/client-auth-pipeline.js";
import type { TokenRevocation } from "./token-revocation.js";

/**
 * RFC 7009 (RevokeToken): the authenticated client revokes a token issued to it, or a resource
 * server one addressed to its audiences. Admitted by the
 * client-authentication pipeline like the token endpoint; every answer audited (TOKEN_REVOKED
 * with what the request did: what was revoked, nothing, or another client's token left alone; a
 * refusal TOKEN_REVOCATION_REFUSED).
 */
export class RevocationEndpoint {
  constructor(
    private readonly deps: {
      readonly pipeline: ClientAuthPipeline;
      readonly revocation: TokenRevocation;
      readonly audit: AuditSink;
    },
  ) {}

  async revoke(credentials: ClientCredentials, token: string, hint: string, call: TokenCall): Promise<void> {
    // Resource servers' ids are their own (resource-servers/model.ts): the id alone says which kind calls.
    const claimed = claimedClientId(credentials);
    if (claimed !== undefined && isResourceServerId(claimed)) return this.asResourceServer(credentials, token, call);
    const { pipeline, revocation, audit } = this.deps;
    const decision = await pipeline.admit(pipeline.apiUsers, credentials, call);
    if (!decision.ok)
      throw pipeline.refused("TOKEN_REVOCATION_REFUSED", pipeline.apiUsers, credentials, decision, call, {});
    const { client } = decision;
    let outcome: string;
    try {
      outcome = await revocation.revoke(client, token, hint);
    } catch (error) {
      throw pipeline.refused("TOKEN_REVOCATION_REFUSED", pipeline.apiUsers, credentials, { client, error }, call, {});
    }
    audit.record({
      action: "TOKEN_REVOKED",
      outcome: "SUCCESS",
      actor: client.clientId,
      tmcId: client.tmcId,
      targetClientId: client.clientId,
      debugIdentifier: call.requestId,
      details: { revoked: outcome, remoteAddress: call.remoteAddress },
    });
  }

  /**
   * A resource server (its secret or its client assertion, its own budgets) revokes an access
   * token addressed to one of its audiences (TokenRevocation.revokeAddressedTo); audited in the
   * platform's trail, a refusal TOKEN_REVOCATION_REFUSED.
   */
  private async asResourceServer(credentials: ClientCredentials, token: string, call: TokenCall): Promise<void> {
    const { pipeline, revocation, audit } = this.deps;
    const server = await pipeline.admitResourceServer(credentials, call, {
      details: {},
      action: "TOKEN_REVOCATION_REFUSED",
    });
    const outcome = await pipeline.slot(
      pipeline.resourceServers.party(server),
      () => revocation.revokeAddressedTo(server.audiences, token),
      call.signal,
    );
    audit.record({
      action: "TOKEN_REVOKED",
      outcome: "SUCCESS",
      actor: server.clientId,
      tmcId: null,
      targetClientId: server.clientId,
      debugIdentifier: call.requestId,
      details: { revoked: outcome, remoteAddress: call.remoteAddress },
    });
  }
}
