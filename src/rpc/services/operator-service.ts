import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { ApiUserCredentialType, ApiUserRole } from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import { type ImportAirCreditsRequest, OperatorService } from "../../../gen/travel/operator/v1/operator_pb.js";
import type { AirCreditImport } from "../../domain/air-credits/air-credit-import.js";
import type { ApiUserProvisioning } from "../../domain/api-users/api-user-provisioning.js";
import type { RecordedAuditEvent } from "../../domain/audit/model.js";
import type { OperatorConsole } from "../../domain/operator/operator-console.js";
import type { ResourceServerListing } from "../../domain/resource-servers/model.js";
import type { ResourceServerRegistry } from "../../domain/resource-servers/resource-server-registry.js";
import type { TokenRateLimiter } from "../../domain/rate-limit/token-rate-limiter.js";
import { isResourceServerId } from "../../domain/resource-servers/model.js";
import type { DemoSeeder } from "../../domain/seed/demo-seed.js";
import type { TenantService } from "../../domain/tenants/tenant-service.js";
import type { SigningKeyRing } from "../../domain/tokens/signing-key-ring.js";
import type { TrustedIssuers } from "../../domain/tokens/trusted-issuers.js";
import { creditImportRow, creditVocabulary } from "../mappers/air-credit-mappers.js";
import { credentialResponse, credentialTypeName, roleName } from "../mappers/api-user-mappers.js";
import { requestInfoOf } from "../request-context.js";
import { defineArea } from "../area.js";

/** Page size of the operator's lists when the request names none. */
const DEFAULT_LIMIT = 100;

export interface OperatorDomain {
  readonly tenants: TenantService;
  readonly airCreditImport: AirCreditImport;
  readonly provisioning: ApiUserProvisioning;
  readonly signingKeys: SigningKeyRing;
  readonly trustedIssuers: TrustedIssuers;
  /** Listing TMCs, API users, trusted issuers and the audit trail; revoking API users; removing issuers. */
  readonly console: OperatorConsole;
  readonly seeder: DemoSeeder;
  readonly limiter: TokenRateLimiter;
  /** Resource servers' budgets and lockouts (their client ids start `rs-`). */
  readonly resourceServerLimiter: TokenRateLimiter;
  /** Registering, listing, rotating and removing resource servers. */
  readonly resourceServers: ResourceServerRegistry;
  /** Applies pending migrations; returns their names. */
  readonly migrate: () => Promise<string[]>;
}

/** Translates OperatorService RPCs to the domain; no rules live here. */
export class OperatorServiceHandler implements ServiceImpl<typeof OperatorService> {
  constructor(private readonly domain: OperatorDomain) {}

  async createTmc(req: { name: string; maxApiUsers?: number }) {
    const tmc = await this.domain.tenants.createTmc(req.name, req.maxApiUsers);
    return { tmcId: tmc.id, name: tmc.name, maxApiUsers: tmc.maxApiUsers };
  }

  async setTmcApiUserLimit(req: { tmcId: string; maxApiUsers: number }) {
    const tmc = await this.domain.tenants.setApiUserLimit(req.tmcId, req.maxApiUsers);
    return { tmcId: tmc.id, name: tmc.name, maxApiUsers: tmc.maxApiUsers };
  }

  async createCompany(req: { tmcId: string; name: string }) {
    const company = await this.domain.tenants.createCompany(req.tmcId, req.name);
    return { orgId: company.id, tmcId: company.tmcId, name: company.name };
  }

  async createUser(req: { orgId: string; email: string; givenName: string; familyName: string; inactive: boolean }) {
    const user = await this.domain.tenants.createUser({ ...req, isActive: !req.inactive });
    return { userId: user.id, orgId: user.companyId, tmcId: user.tmcId, email: user.email, isActive: user.isActive };
  }

  async createApiUser(
    req: { tmcId: string; orgId: string; role: ApiUserRole; credentialType: ApiUserCredentialType },
    ctx: HandlerContext,
  ) {
    const created = await this.domain.provisioning.create({
      tmcId: req.tmcId,
      orgId: req.orgId || undefined,
      role: roleName(req.role),
      credentialType: credentialTypeName(req.credentialType),
      actor: "operator",
      requestId: requestInfoOf(ctx.values).requestId,
    });
    return credentialResponse(created);
  }

  async rotateSigningKey(req: { now: boolean }) {
    const rotation = await this.domain.signingKeys.rotate({ immediately: req.now });
    return { ...rotation, activatesAt: rotation.activatesAt.toISOString() };
  }

  async listSigningKeys() {
    const keys = await this.domain.signingKeys.list();
    return {
      keys: keys.map(({ record: r, state }) => ({
        kid: r.kid,
        alg: r.alg,
        state: state.toUpperCase(),
        createdAt: r.createdAt.toISOString(),
        activatesAt: r.activatesAt.toISOString(),
        retiredAt: r.retiredAt?.toISOString() ?? "",
        notAfter: r.notAfter?.toISOString() ?? "",
      })),
    };
  }

  async addTrustedIssuer(req: {
    tmcId: string;
    issuer: string;
    jwksUri: string;
    jwks: string;
    audience: string;
    companyId: string;
  }) {
    await this.domain.trustedIssuers.add(req.tmcId, {
      issuer: req.issuer,
      jwksUri: req.jwksUri || undefined,
      jwks: req.jwks || undefined,
      audience: req.audience || undefined,
      companyId: req.companyId || undefined,
    });
    return { tmcId: req.tmcId, issuer: req.issuer };
  }

  async listAuditEvents(req: {
    tmcId: string;
    platform: boolean;
    limit?: number;
    actions: string[];
    clientId: string;
    since?: Timestamp;
    until?: Timestamp;
    pageToken: string;
  }) {
    const page = await this.domain.console.auditEvents(
      { tmcId: req.tmcId || undefined, platform: req.platform },
      {
        actions: req.actions,
        clientId: req.clientId || undefined,
        since: req.since && timestampDate(req.since),
        until: req.until && timestampDate(req.until),
        beforeId: req.pageToken || undefined,
      },
      req.limit ?? DEFAULT_LIMIT,
    );
    return { events: page.events.map(auditEventOf), nextPageToken: page.nextPageToken ?? "" };
  }

  async listTmcs(req: { limit?: number; offset: number }) {
    const { tmcs, total } = await this.domain.console.listTmcs({
      limit: req.limit ?? DEFAULT_LIMIT,
      offset: req.offset,
    });
    return { tmcs: tmcs.map(tmcSummaryOf), totalCount: total };
  }

  async getTmc(req: { tmcId: string }) {
    return { tmc: tmcSummaryOf(await this.domain.console.getTmc(req.tmcId)) };
  }

  async listApiUsers(req: { tmcId: string; limit?: number; offset: number }) {
    const { apiUsers, total } = await this.domain.console.listApiUsers(req.tmcId, {
      limit: req.limit ?? DEFAULT_LIMIT,
      offset: req.offset,
    });
    return {
      apiUsers: apiUsers.map((u) => ({
        clientId: u.clientId,
        role: ApiUserRole[u.role],
        credentialType: ApiUserCredentialType[u.credentialType],
        orgId: u.orgId ?? "",
        createdAt: u.createdAt.toISOString(),
        createdBy: u.createdBy ?? "",
        rotatedAt: u.rotatedAt?.toISOString() ?? "",
        lastTokenIssuedAt: u.lastTokenIssuedAt?.toISOString() ?? "",
        dpopBoundAccessTokens: u.dpopBoundAccessTokens,
      })),
      totalCount: total,
    };
  }

  async revokeApiUser(req: { tmcId: string; clientId: string }, ctx: HandlerContext) {
    await this.domain.console.revokeApiUser(req.tmcId, req.clientId, requestInfoOf(ctx.values).requestId);
    return { tmcId: req.tmcId, clientId: req.clientId };
  }

  async setApiUserKeys(req: { tmcId: string; clientId: string; jwks: string; jwksUri: string }, ctx: HandlerContext) {
    const { requestId } = requestInfoOf(ctx.values);
    const registered = await this.domain.console.setApiUserKeys(req.tmcId, req.clientId, keysOf(req), requestId);
    return { tmcId: req.tmcId, clientId: req.clientId, ...registered };
  }

  async setApiUserDpopPolicy(
    req: { tmcId: string; clientId: string; dpopBoundAccessTokens: boolean },
    ctx: HandlerContext,
  ) {
    const { tmcId, clientId } = req;
    const { requestId } = requestInfoOf(ctx.values);
    const required = await this.domain.console.setApiUserDpopPolicy(
      tmcId,
      clientId,
      req.dpopBoundAccessTokens,
      requestId,
    );
    return { tmcId, clientId, dpopBoundAccessTokens: required };
  }

  async listTrustedIssuers(req: { tmcId: string }) {
    const issuers = await this.domain.console.listTrustedIssuers(req.tmcId);
    return {
      issuers: issuers.map((i) => ({
        issuer: i.issuer,
        jwksUri: i.jwksUri ?? "",
        inlineJwks: i.jwks !== undefined,
        audience: i.audience ?? "",
        companyId: i.companyId ?? "",
      })),
    };
  }

  async removeTrustedIssuer(req: { tmcId: string; issuer: string }, ctx: HandlerContext) {
    await this.domain.console.removeTrustedIssuer(req.tmcId, req.issuer, requestInfoOf(ctx.values).requestId);
    return { tmcId: req.tmcId, issuer: req.issuer };
  }

  async createResourceServer(
    req: { name: string; audiences: string[]; jwks: string; jwksUri: string },
    ctx: HandlerContext,
  ) {
    const { requestId } = requestInfoOf(ctx.values);
    const created = await this.domain.resourceServers.register(req.name, req.audiences, requestId, keysOf(req));
    return { ...created, audiences: [...created.audiences], keyIds: [...created.keyIds] };
  }

  async listResourceServers(req: { limit?: number; offset: number }) {
    const { servers, total } = await this.domain.resourceServers.list({
      limit: req.limit ?? DEFAULT_LIMIT,
      offset: req.offset,
    });
    return { resourceServers: servers.map(resourceServerOf), totalCount: total };
  }

  async getResourceServer(req: { clientId: string }) {
    return { resourceServer: resourceServerOf(await this.domain.resourceServers.get(req.clientId)) };
  }

  async rotateResourceServerSecret(req: { clientId: string }, ctx: HandlerContext) {
    return this.domain.resourceServers.rotateSecret(req.clientId, requestInfoOf(ctx.values).requestId);
  }

  async setResourceServerKeys(req: { clientId: string; jwks: string; jwksUri: string }, ctx: HandlerContext) {
    const { requestId } = requestInfoOf(ctx.values);
    return {
      clientId: req.clientId,
      ...(await this.domain.resourceServers.setKeys(req.clientId, keysOf(req), requestId)),
    };
  }

  async removeResourceServer(req: { clientId: string }, ctx: HandlerContext) {
    await this.domain.resourceServers.remove(req.clientId, requestInfoOf(ctx.values).requestId);
    return { clientId: req.clientId };
  }

  async migrate() {
    return { applied: await this.domain.migrate() };
  }

  async getTokenLockout(req: { clientId: string; address: string }) {
    const lockout = await this.limiterOf(req.clientId).lockout(req.clientId || undefined, req.address);
    return { clientId: req.clientId, address: req.address, ...lockout };
  }

  async resetTokenLockout(req: { clientId: string; address: string }) {
    await this.limiterOf(req.clientId).resetLockout(req.clientId || undefined, req.address);
    return { clientId: req.clientId, address: req.address };
  }

  /** A resource server's lockout is among resource servers' budgets; anyone else's among API users'. */
  private limiterOf(clientId: string): TokenRateLimiter {
    return isResourceServerId(clientId) ? this.domain.resourceServerLimiter : this.domain.limiter;
  }

  async importAirCredits(req: ImportAirCreditsRequest) {
    return this.domain.airCreditImport.import(
      req.companyId.toLowerCase(),
      req.credits.map(creditImportRow),
      creditVocabulary,
    );
  }

  async seed(_req: unknown, ctx: HandlerContext) {
    return this.domain.seeder.seed(requestInfoOf(ctx.values).requestId);
  }
}

/** The operator area: OperatorService on the admin face (the admin port when ADMIN_PORT is set). */
export const operatorArea = defineArea({
  service: OperatorService,
  face: "admin",
  handler: (domain: { readonly operator: OperatorDomain }) => new OperatorServiceHandler(domain.operator),
});

function auditEventOf(e: RecordedAuditEvent) {
  return {
    occurredAt: e.occurredAt.toISOString(),
    action: e.action,
    outcome: e.outcome,
    actor: e.actor ?? "",
    tmcId: e.tmcId ?? "",
    targetClientId: e.targetClientId ?? "",
    debugIdentifier: e.debugIdentifier ?? "",
    details: Object.fromEntries(Object.entries(e.details ?? {}).map(([k, v]) => [k, String(v)])),
  };
}

/** A resource server as the operator reads it: never its secret. */
function resourceServerOf(server: ResourceServerListing) {
  return {
    clientId: server.clientId,
    name: server.name,
    audiences: [...server.audiences],
    createdAt: server.createdAt.toISOString(),
    rotatedAt: server.rotatedAt?.toISOString() ?? "",
    keyIds: [...server.keyIds],
    jwksUri: server.jwksUri ?? "",
  };
}

/** A key registration as the requests carry it; proto3 has no absence: an empty field is the one not given. */
function keysOf(req: { jwks: string; jwksUri: string }) {
  return { jwks: req.jwks === "" ? undefined : req.jwks, jwksUri: req.jwksUri === "" ? undefined : req.jwksUri };
}

function tmcSummaryOf(tmc: { id: string; name: string; maxApiUsers: number; activeApiUsers: number }) {
  return { tmcId: tmc.id, name: tmc.name, maxApiUsers: tmc.maxApiUsers, activeApiUsers: tmc.activeApiUsers };
}
