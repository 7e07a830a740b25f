import { invalidArgument, notFound } from "../../errors/domain-error.js";
import type { ApiUserListing, ApiUserRepository } from "../api-users/ports.js";
import { OPERATOR_ACTOR } from "../audit/model.js";
import type { AuditFilter, AuditRepository, NumberedAuditEvent } from "../audit/ports.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { TenantRepository, TmcWithUsage } from "../tenants/ports.js";
import type { TrustedIssuer } from "../tokens/model.js";
import type { TrustedIssuerRepository } from "../tokens/ports.js";

/** The TMC admin's revocation (ApiUserAdmin.revoke), as far as the operator needs it. */
export interface ApiUserRevoker {
  revoke(caller: { clientId: string; tmcId: string }, clientId: string, requestId: string): Promise<void>;
}

export type OperatorApiUser = ApiUserListing;

export interface Page {
  readonly limit: number;
  readonly offset: number;
}

/**
 * What the platform operator reads and changes across tenants beyond creating them: TMCs with
 * their usage, a TMC's API users (revocable as its admin would), trusted issuers and the audit
 * trail. Reads never touch the token hot path: "last token issued" is kept on the API user by the
 * audit flush, which the token endpoint already leaves off the request path.
 */
export class OperatorConsole {
  constructor(
    private readonly uow: UnitOfWork,
    private readonly tenants: TenantRepository,
    private readonly apiUsers: ApiUserRepository,
    private readonly issuers: TrustedIssuerRepository,
    private readonly audit: AuditRepository,
    private readonly revoker: ApiUserRevoker,
  ) {}

  listTmcs(page: Page): Promise<{ tmcs: TmcWithUsage[]; total: number }> {
    return this.tenants.listTmcs(this.uow.direct, page);
  }

  async getTmc(tmcId: string): Promise<TmcWithUsage> {
    const scope = tenantScope(tmcId);
    const tmc = await this.tenants.findTmc(this.uow.direct, scope);
    if (!tmc) throw notFound("TMC", [{ name: "tmcId", value: tmcId }]);
    return { ...tmc, activeApiUsers: await this.apiUsers.countActive(this.uow.direct, scope) };
  }

  async listApiUsers(tmcId: string, page: Page): Promise<{ apiUsers: OperatorApiUser[]; total: number }> {
    const scope = await this.existingTmc(tmcId);
    const { users: apiUsers, total } = await this.apiUsers.listActiveDetails(this.uow.direct, scope, page);
    return { apiUsers, total };
  }

  /** The TMC admin's revoke with the operator as the caller: same transaction, same instant effect everywhere. */
  async revokeApiUser(tmcId: string, clientId: string, requestId: string): Promise<void> {
    await this.revoker.revoke({ clientId: OPERATOR_ACTOR, tmcId }, clientId, requestId);
  }

  async listTrustedIssuers(tmcId: string): Promise<TrustedIssuer[]> {
    return this.issuers.list(this.uow.direct, await this.existingTmc(tmcId));
  }

  async removeTrustedIssuer(tmcId: string, issuer: string, requestId: string): Promise<void> {
    const scope = tenantScope(tmcId);
    await this.uow.transaction(async (tx) => {
      if (!(await this.issuers.remove(tx, scope, issuer))) {
        throw notFound("Trusted issuer", [
          { name: "tmcId", value: tmcId },
          { name: "issuer", value: issuer },
        ]);
      }
      await this.audit.append(tx, [
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
        ? await this.audit.searchPlatform(this.uow.direct, filter, limit)
        : await this.audit.search(this.uow.direct, tenantScope(trail.tmcId), filter, limit);
    return { events, nextPageToken: events.length === limit ? events.at(-1)!.id : undefined };
  }

  private async existingTmc(tmcId: string) {
    const scope = tenantScope(tmcId);
    if (!(await this.tenants.findTmc(this.uow.direct, scope))) throw notFound("TMC", [{ name: "tmcId", value: tmcId }]);
    return scope;
  }
}
