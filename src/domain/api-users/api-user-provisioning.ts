import { DomainError, invalidArgument, notFound } from "../../errors/domain-error.js";
import type { AuditRepository } from "../audit/ports.js";
import type { TenantRepository } from "../tenants/ports.js";
import { generateClientId, generateClientSecret, hashClientSecret } from "../shared/client-secret.js";
import type { KeyMaterial } from "../shared/key-material.js";
import { sealScimToken } from "../shared/scim-token.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { ApiUserCredentialType, CreateApiUserCommand, CreatedApiUser } from "./model.js";
import type { ApiUserRepository } from "./ports.js";

/** What ApiUserProvisioning is built from. */
export interface ApiUserProvisioningDeps {
  readonly uow: UnitOfWork;
  readonly tenants: TenantRepository;
  readonly apiUsers: ApiUserRepository;
  readonly audit: AuditRepository;
  readonly keys: KeyMaterial;
}

/**
 * Creates API users. The TMC row is locked for the transaction, so concurrent creates for one
 * tenant (on any instance) queue up and the limit cannot be overshot; the row and its audit
 * event commit together.
 */
export class ApiUserProvisioning {
  constructor(private readonly deps: ApiUserProvisioningDeps) {}

  async create(command: CreateApiUserCommand): Promise<CreatedApiUser> {
    if (command.credentialType === "SCIM_TOKEN" && command.role !== "COMPANY_ADMIN") {
      throw invalidArgument("credentialType SCIM_TOKEN requires role COMPANY_ADMIN", [
        { name: "credentialType", value: command.credentialType },
        { name: "role", value: command.role },
      ]);
    }
    if (command.role === "COMPANY_ADMIN" && !command.orgId) {
      throw invalidArgument("orgId is required for role COMPANY_ADMIN", [{ name: "orgId", value: "" }]);
    }
    const scope = tenantScope(command.tmcId);
    const clientId = generateClientId();
    const secret = generateClientSecret();
    await this.deps.uow.transaction(async (tx) => {
      const tmc = await this.deps.tenants.lockTmc(tx, scope);
      if (!tmc) throw notFound("TMC", [{ name: "tmcId", value: command.tmcId }]);
      if (command.orgId && !(await this.deps.tenants.findCompany(tx, scope, command.orgId))) {
        throw notFound("Organization", [{ name: "orgId", value: command.orgId }]);
      }
      const active = await this.deps.apiUsers.countActive(tx, scope);
      if (active >= tmc.maxApiUsers) {
        throw new DomainError(
          "API_USER_LIMIT_EXCEEDED",
          "The maximum number of API users for this TMC already exists",
          {
            params: [
              { name: "limit", value: String(tmc.maxApiUsers) },
              { name: "currentCount", value: String(active) },
            ],
          },
        );
      }
      await this.deps.apiUsers.insert(tx, scope, {
        clientId,
        orgId: command.orgId,
        role: command.role,
        credentialType: command.credentialType,
        secretHash: hashClientSecret(this.deps.keys.secretPepper, secret),
        createdBy: command.actor,
      });
      await this.deps.audit.append(tx, [
        {
          action: "API_USER_CREATE",
          outcome: "SUCCESS",
          actor: command.actor,
          tmcId: tmc.id,
          targetClientId: clientId,
          debugIdentifier: command.requestId,
          details: { role: command.role, credentialType: command.credentialType },
        },
      ]);
    });
    return credentialOf(this.deps.keys, clientId, command.credentialType, secret);
  }
}

/** What the caller receives: the secret itself, or a SCIM token sealing it. */
export function credentialOf(
  keys: KeyMaterial,
  clientId: string,
  credentialType: ApiUserCredentialType,
  secret: string,
): CreatedApiUser {
  return credentialType === "SCIM_TOKEN"
    ? { clientId, scimToken: sealScimToken(keys.scimTokenKey, keys.scimTokenKeyId, { clientId, secret }) }
    : { clientId, clientSecret: secret };
}
