import type { JsonObject } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { ApiUserCredentialType, ApiUserRole } from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import type { OperatorService } from "../../../gen/travel/operator/v1/operator_pb.js";
import type { AirCreditImport } from "../../domain/air-credits/air-credit-import.js";
import type { ApiUserProvisioning } from "../../domain/api-users/api-user-provisioning.js";
import type { AuditTrail } from "../../domain/audit/audit-trail.js";
import type { TokenRateLimiter } from "../../domain/rate-limit/token-rate-limiter.js";
import type { DemoSeeder } from "../../domain/seed/demo-seed.js";
import type { TenantService } from "../../domain/tenants/tenant-service.js";
import type { SigningKeyRing } from "../../domain/tokens/signing-key-ring.js";
import type { TrustedIssuers } from "../../domain/tokens/trusted-issuers.js";
import { credentialResponse, credentialTypeName, roleName } from "../mappers/api-user-mappers.js";
import { requestInfoOf } from "../request-context.js";

export interface OperatorDomain {
  readonly tenants: TenantService;
  readonly airCreditImport: AirCreditImport;
  readonly provisioning: ApiUserProvisioning;
  readonly signingKeys: SigningKeyRing;
  readonly trustedIssuers: TrustedIssuers;
  readonly auditTrail: AuditTrail;
  readonly seeder: DemoSeeder;
  readonly limiter: TokenRateLimiter;
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

  async createApiUser(req: { tmcId: string; orgId: string; role: ApiUserRole; credentialType: ApiUserCredentialType }, ctx: HandlerContext) {
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

  async rotateSigningKey() {
    return this.domain.signingKeys.rotate();
  }

  async addTrustedIssuer(req: { tmcId: string; issuer: string; jwksUri: string; jwks: string; audience: string }) {
    await this.domain.trustedIssuers.add(req.tmcId, {
      issuer: req.issuer,
      jwksUri: req.jwksUri || undefined,
      jwks: req.jwks || undefined,
      audience: req.audience || undefined,
    });
    return { tmcId: req.tmcId, issuer: req.issuer };
  }

  async listAuditEvents(req: { tmcId: string; limit?: number }) {
    const events = await this.domain.auditTrail.list(req.tmcId, req.limit ?? 100);
    return {
      events: events.map((e) => ({
        occurredAt: e.occurredAt.toISOString(),
        action: e.action,
        outcome: e.outcome,
        actor: e.actor ?? "",
        tmcId: e.tmcId ?? "",
        targetClientId: e.targetClientId ?? "",
        debugIdentifier: e.debugIdentifier ?? "",
        details: Object.fromEntries(Object.entries(e.details ?? {}).map(([k, v]) => [k, String(v)])),
      })),
    };
  }

  async migrate() {
    return { applied: await this.domain.migrate() };
  }

  async getTokenLockout(req: { clientId: string; address: string }) {
    const lockout = await this.domain.limiter.lockout(req.clientId || undefined, req.address);
    return { clientId: req.clientId, address: req.address, ...lockout };
  }

  async resetTokenLockout(req: { clientId: string; address: string }) {
    await this.domain.limiter.resetLockout(req.clientId || undefined, req.address);
    return { clientId: req.clientId, address: req.address };
  }

  async importAirCredits(req: { companyId: string; credits: JsonObject[] }) {
    return this.domain.airCreditImport.import(req.companyId.toLowerCase(), req.credits);
  }

  async seed(_req: unknown, ctx: HandlerContext) {
    return this.domain.seeder.seed(requestInfoOf(ctx.values).requestId);
  }
}
