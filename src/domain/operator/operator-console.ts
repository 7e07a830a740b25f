import { invalidArgument, notFound } from "../../errors/domain-error.js";
import type { ClientKeyRegistration, RegisteredClientKeys } from "../api-users/model.js";
import type { ApiUserListing, ApiUserRepository } from "../api-users/ports.js";
import { OPERATOR_ACTOR } from "../audit/model.js";
import type { AuditFilter, AuditRepository, NumberedAuditEvent } from "../audit/ports.js";
import { jwksDocumentOf } from "../shared/client-assertion.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { TenantRepository, TmcWithUsage } from "../tenants/ports.js";
import type { TrustedIssuer } from "../tokens/model.js";
import type { TrustedIssuerRepository } from "../tokens/ports.js";

/** The TMC admin's revocation (ApiUserAdmin.revoke), as far as the operator needs it. */
export interface ApiUserRevoker {
  revoke(caller: { clientId: string; tmcId: string }, clientId: string, requestId: string): Promise<void>;
  /** Replaces the user's public keys (private_key_jwt), as a TMC admin's does. */
  setKeys(
    caller: { clientId: string; tmcId: string },
    clientId: string,
    registration: ClientKeyRegistration,
    requestId: string,
  ): Promise<RegisteredClientKeys>;
  /** Sets the user's DPoP policy (RFC 9449 5.2), as a TMC admin's does. */
  setDpopPolicy(
    caller: { clientId: string; tmcId: string },
    clientId: string,
    required: boolean,
    requestId: string,
  ): Promise<boolean>;
}

export type OperatorApiUser = ApiUserListing;

export interface Page {
  readonly limit: number;
  readonly offset: number;
}

/** What OperatorConsole is built from. */
export interface OperatorConsoleDeps {
  readonly uow: UnitOfWork;
  readonly tenants: TenantRepository;
  readonly apiUsers: ApiUserRepository;
  readonly issuers: TrustedIssuerRepository;
  readonly audit: AuditRepository;
  readonly revoker: ApiUserRevoker;
}

/**
 * What the platform operator reads and changes across tenants beyond creating them: TMCs with
 * their usage, a TMC's API users (revocable as its admin would), trusted issuers and the audit
 * trail. Reads never touch the token hot path: "last token issued" is kept on the API user by the
 * audit flush, which the token endpoint already leaves off the request path.
 */
export class OperatorConsole {
  constructor(private readonly deps: OperatorConsoleDeps) {}

  listTmcs(page: Page): Promise<{ tmcs: TmcWithUsage[]; total: number }> {
    return this.deps.tenants.listTmcs(this.deps.uow.direct, page);
  }

  async getTmc(tmcId: string): Promise<TmcWithUsage> {
    const scope = tenantScope(tmcId);
    const tmc = await this.deps.tenants.findTmc(this.deps.uow.direct, scope);
    if (!tmc) throw notFound("TMC", [{ name: "tmcId", value: tmcId }]);
    return { ...tmc, activeApiUsers: await this.deps.apiUsers.countActive(this.deps.uow.direct, scope) };
  }

  async listApiUsers(tmcId: string, page: Page): Promise<{ apiUsers: OperatorApiUser[]; total: number }> {
    const scope = await this.existingTmc(tmcId);
    const { users: apiUsers, total } = await this.deps.apiUsers.listActiveDetails(this.deps.uow.direct, scope, page);
    return { apiUsers, total };
  }

  /** The TMC admin's revoke with the operator as the caller: same transaction, same instant effect everywhere. */
  async revokeApiUser(tmcId: string, clientId: string, requestId: string): Promise<void> {
    await this.deps.revoker.revoke({ clientId: OPERATOR_ACTOR, tmcId }, clientId, requestId);
  }

  /** `jwks`: a JWK Set document (JSON), as `trusted-issuer add` takes one; or `jwksUri`, its URL (exactly one of them). */
  async setApiUserKeys(
    tmcId: string,
    clientId: string,
    keys: { readonly jwks?: string; readonly jwksUri?: string },
    requestId: string,
  ): Promise<RegisteredClientKeys> {
    const document = keys.jwks === undefined ? undefined : jwksDocumentOf(keys.jwks);
    return this.deps.revoker.setKeys(
      { clientId: OPERATOR_ACTOR, tmcId },
      clientId,
      { jwks: document, jwksUri: keys.jwksUri },
      requestId,
    );
  }

  setApiUserDpopPolicy(tmcId: string, clientId: string, required: boolean, requestId: string): Promise<boolean> {
    return this.deps.revoker.setDpopPolicy({ clientId: OPERATOR_ACTOR, tmcId }, clientId, required, requestId);
  }

  async listTrustedIssuers(tmcId: string): Promise<TrustedIssuer[]> {
    return this.deps.issuers.list(this.deps.uow.direct, await this.existingTmc(tmcId));
  }

  async removeTrustedIssuer(tmcId: string, issuer: string, requestId: string): Promise<void> {
    const scope = tenantScope(tmcId);
    await this.deps.uow.transaction(async (tx) => {
      if (!(await this.deps.issuers.remove(tx, scope, issuer))) {
        throw notFound("Trusted issuer", [
          { name: "tmcId", value: tmcId },
          { name: "issuer", value: issuer },
        ]);
      }
      await this.deps.audit.append(tx, [
        {
          action: "TRUSTED_ISSUER_REMOVE",
          outcome: "SUCCESS",
          actor: OPERATOR_ACTOR,
          tmcId,
          targetClientId: null,
          debugIdentifier: requestId,
          details: { issuer },
        },
      ]);
    });
  }

  /**
   * A page of a trail, newest first, and the token of the next (older) page when there may be
   * one. The trail is a TMC's, or with `platform` the platform's own (events of no TMC: resource
   * servers, refusals no TMC can be named for); exactly one of the two is named.
   */
  async auditEvents(
    trail: { tmcId: string | undefined; platform: boolean },
    filter: AuditFilter,
    limit: number,
  ): Promise<{ events: NumberedAuditEvent[]; nextPageToken: string | undefined }> {
    if (trail.platform && trail.tmcId !== undefined)
      throw invalidArgument("Give either tmcId or platform, not both", [
        { name: "platform", value: "must not be set with tmcId" },
      ]);
    if (!trail.platform && trail.tmcId === undefined)
      throw invalidArgument("tmcId is required (or platform, for the events of no TMC)", [
        { name: "tmcId", value: "required unless platform is set" },
      ]);
    const events =
      trail.tmcId === undefined
        ? await this.deps.audit.searchPlatform(this.deps.uow.direct, filter, limit)
        : await this.deps.audit.search(this.deps.uow.direct, tenantScope(trail.tmcId), filter, limit);
    return { events, nextPageToken: events.length === limit ? events.at(-1)!.id : undefined };
  }

  private async existingTmc(tmcId: string) {
    const scope = tenantScope(tmcId);
    if (!(await this.deps.tenants.findTmc(this.deps.uow.direct, scope)))
      throw notFound("TMC", [{ name: "tmcId", value: tmcId }]);
    return scope;
  }
}
