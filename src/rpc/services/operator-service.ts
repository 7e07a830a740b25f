import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { ApiUserCredentialType, ApiUserRole } from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import type { OperatorService } from "../../../gen/travel/operator/v1/operator_pb.js";
import type { ApiUserProvisioning } from "../../domain/api-users/api-user-provisioning.js";
import { seedDemo } from "../../domain/seed/demo-seed.js";
import type { TenantService } from "../../domain/tenants/tenant-service.js";
import type { Database } from "../../store/database.js";
import { listAuditEvents } from "../../store/audit-store.js";
import type { SigningKeyRing } from "../../domain/tokens/signing-key-ring.js";
import type { TrustedIssuers } from "../../domain/tokens/trusted-issuers.js";
import { credentialTypeName, roleName } from "../enum-names.js";
import { requestInfoOf } from "../request-context.js";

/** Translates OperatorService RPCs to the domain; no rules live here. */
export class OperatorServiceHandler implements ServiceImpl<typeof OperatorService> {
  constructor(
    private readonly database: Database,
    private readonly tenants: TenantService,
    private readonly provisioning: ApiUserProvisioning,
    private readonly signingKeys: SigningKeyRing,
    private readonly trustedIssuers: TrustedIssuers,
  ) {}

  async createTmc(req: { name: string; maxApiUsers?: number }) {
    const tmc = await this.tenants.createTmc(req.name, req.maxApiUsers);
    return { tmcId: tmc.id, name: tmc.name, maxApiUsers: tmc.max_api_users };
  }

  async setTmcApiUserLimit(req: { tmcId: string; maxApiUsers: number }) {
    const tmc = await this.tenants.setApiUserLimit(req.tmcId, req.maxApiUsers);
    return { tmcId: tmc.id, name: tmc.name, maxApiUsers: tmc.max_api_users };
  }

  async createCompany(req: { tmcId: string; name: string }) {
    const company = await this.tenants.createCompany(req.tmcId, req.name);
    return { orgId: company.id, tmcId: company.tmc_id, name: company.name };
  }

  async createUser(req: { orgId: string; email: string; givenName: string; familyName: string; inactive: boolean }) {
    const user = await this.tenants.createUser({ ...req, isActive: !req.inactive });
    return { userId: user.id, orgId: user.company_id, tmcId: user.tmc_id, email: user.email, isActive: user.is_active };
  }

  async createApiUser(
    req: { tmcId: string; orgId: string; role: ApiUserRole; credentialType: ApiUserCredentialType },
    ctx: HandlerContext,
  ) {
    return this.provisioning.create({
      tmcId: req.tmcId,
      orgId: req.orgId || undefined,
      role: roleName(req.role),
      credentialType: credentialTypeName(req.credentialType),
      actor: "operator",
      requestId: requestInfoOf(ctx.values).requestId,
    });
  }

  async rotateSigningKey() {
    return this.signingKeys.rotate();
  }

  async addTrustedIssuer(req: { tmcId: string; issuer: string; jwksUri: string; jwks: string; audience: string }) {
    await this.trustedIssuers.add(req.tmcId, {
      issuer: req.issuer,
      jwksUri: req.jwksUri || undefined,
      jwks: req.jwks || undefined,
      audience: req.audience || undefined,
    });
    return { tmcId: req.tmcId, issuer: req.issuer };
  }

  async listAuditEvents(req: { tmcId: string; limit?: number }) {
    const rows = await listAuditEvents(this.database.db, req.tmcId, req.limit ?? 100);
    return {
      events: rows.map((r) => ({
        occurredAt: new Date(r.occurred_at).toISOString(),
        action: r.action,
        outcome: r.outcome,
        actor: r.actor ?? "",
        tmcId: r.tmc_id ?? "",
        targetClientId: r.target_client_id ?? "",
        debugIdentifier: r.debug_identifier ?? "",
        details: Object.fromEntries(Object.entries(r.details ?? {}).map(([k, v]) => [k, String(v)])),
      })),
    };
  }

  async migrate() {
    return { applied: await this.database.migrate() };
  }

  async seed(_req: unknown, ctx: HandlerContext) {
    return seedDemo(this.database.db, this.tenants, this.provisioning, requestInfoOf(ctx.values).requestId);
  }
}
