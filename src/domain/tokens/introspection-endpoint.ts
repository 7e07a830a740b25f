import type { AuditSink } from "../audit/model.js";
import { isResourceServerId } from "../resource-servers/model.js";
import { claimedClientId, type ClientCredentials } from "../shared/client-credentials.js";
import type { LabelledCounter } from "../shared/observability.js";
import type { ClientAuthPipeline, ResourceServerOnlyRefusal, TokenCall } from "../shared/client-auth-pipeline.js";
import type { Principal } from "./model.js";
import type { TokenService } from "./token-service.js";

/**
 * RFC 7662 introspection (IntrospectToken, and IntrospectTokens in batches): the
 * client-authentication pipeline admits the caller (an API user, or a resource server with its
 * own credentials and budgets), then the tokens are answered. Every answer and every refusal is
 * audited (TOKEN_INTROSPECTED / TOKEN_INTROSPECTION_REFUSED / TOKEN_RATE_LIMITED); a resource
 * server's answers are counted per resource server instead (no log line per token at that volume).
 */
export class IntrospectionEndpoint {
  constructor(
    private readonly deps: {
      readonly pipeline: ClientAuthPipeline;
      readonly tokens: TokenService;
      readonly audit: AuditSink;
      /** Tokens introspected by each resource server, by answer. */
      readonly introspections: LabelledCounter<"resource_server" | "active">;
    },
  ) {}

  /** Undefined (inactive) unless the token is valid and of the caller's TMC (a resource server: of its audiences). */
  async introspect(credentials: ClientCredentials, token: string, call: TokenCall): Promise<Principal | undefined> {
    // Resource servers' ids are their own (resource-servers/model.ts): the id alone says which kind calls.
    const claimed = claimedClientId(credentials);
    if (claimed !== undefined && isResourceServerId(claimed))
      return (await this.asResourceServer(credentials, [token], call, { details: {} }))[0];
    const { pipeline, tokens, audit } = this.deps;
    const decision = await pipeline.admit(pipeline.apiUsers, credentials, call);
    if (!decision.ok)
      throw pipeline.refused("TOKEN_INTROSPECTION_REFUSED", pipeline.apiUsers, credentials, decision, call, {});
    const { client } = decision;
    const principal = await pipeline.slot(
      pipeline.apiUsers.party(client),
      () => tokens.introspect(client, token),
      call.signal,
    );
    audit.record({
      action: "TOKEN_INTROSPECTED",
      outcome: "SUCCESS",
      actor: client.clientId,
      tmcId: client.tmcId,
      targetClientId: principal?.clientId ?? null,
      debugIdentifier: call.requestId,
      details: { active: principal !== undefined, remoteAddress: call.remoteAddress },
    });
    return principal;
  }

  /**
   * Batch introspection, for resource servers only: each token answered as introspect() answers
   * it, in order, with one revocation check for the whole batch. An API user's credentials are
   * refused (403 unauthorized_client) before anything is looked up.
   */
  introspectMany(
    credentials: ClientCredentials,
    tokens: readonly string[],
    call: TokenCall,
  ): Promise<Array<Principal | undefined>> {
    return this.asResourceServer(credentials, tokens, call, {
      only: "Batch introspection is for resource servers only",
      details: { batch: "true" },
    });
  }

  /**
   * RFC 7662 section 4: a resource server learns about the tokens addressed to one of its
   * audiences, whatever their TMC; any other token is inactive.
   */
  private async asResourceServer(
    credentials: ClientCredentials,
    tokens: readonly string[],
    call: TokenCall,
    refusal: ResourceServerOnlyRefusal,
  ): Promise<Array<Principal | undefined>> {
    const { pipeline, introspections } = this.deps;
    const server = await pipeline.admitResourceServer(credentials, call, refusal);
    const principals = await pipeline.slot(
      pipeline.resourceServers.party(server),
      () => this.deps.tokens.introspectFor(server.audiences, tokens),
      call.signal,
    );
    const active = principals.filter((p) => p !== undefined).length;
    if (active > 0) introspections.inc({ resource_server: server.clientId, active: "true" }, active);
    if (active < principals.length)
      introspections.inc({ resource_server: server.clientId, active: "false" }, principals.length - active);
    return principals;
  }
}
