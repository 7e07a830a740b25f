import { Code } from "@connectrpc/connect";
import type { Knex } from "knex";
import type { KeyMaterial } from "../../config/key-material.js";
import { generateClientId, generateClientSecret, hashClientSecret } from "../credentials/client-secret.js";
import { sealScimToken } from "../credentials/scim-token.js";
import { invalidArgument, notFound, ServiceError } from "../errors.js";
import { countActiveApiUsers, insertApiUser } from "../../store/api-user-store.js";
import { insertAuditEvents } from "../../store/audit-store.js";
import { findCompany, lockTmc } from "../../store/tenant-store.js";
import type { ApiUserCredentialType, ApiUserRole } from "../../store/tables.js";

export interface CreateApiUserCommand {
  tmcId: string;
  orgId: string | undefined;
  role: ApiUserRole;
  credentialType: ApiUserCredentialType;
  /** clientId of the calling admin, or "operator". */
  actor: string;
  requestId: string;
}

/** The credential is in the result exactly once: it is never stored or shown again. */
export interface CreatedApiUser {
  clientId: string;
  clientSecret?: string;
  scimToken?: string;
}

export const API_USER_LIMIT_EXCEEDED = "API_USER_LIMIT_EXCEEDED";

/**
 * Creates API users. The TMC row is locked for the transaction, so concurrent creates for one
 * tenant (on any instance) queue up and the limit cannot be overshot; the row and its audit
 * event commit together.
 */
export class ApiUserProvisioning {
  constructor(
    private readonly db: Knex,
    private readonly keys: KeyMaterial,
  ) {}

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
    const clientId = generateClientId();
    const secret = generateClientSecret();
    await this.db.transaction(async (trx) => {
      const tmc = await lockTmc(trx, command.tmcId);
      if (!tmc) throw notFound("TMC", [{ name: "tmcId", value: command.tmcId }]);
      if (command.orgId) {
        const company = await findCompany(trx, command.orgId);
        if (!company || company.tmc_id !== tmc.id) throw notFound("Organization", [{ name: "orgId", value: command.orgId }]);
      }
      const active = await countActiveApiUsers(trx, tmc.id);
      if (active >= tmc.max_api_users) {
        throw new ServiceError(
          Code.FailedPrecondition,
          API_USER_LIMIT_EXCEEDED,
          "The maximum number of API users for this TMC already exists",
          [
            { name: "limit", value: String(tmc.max_api_users) },
            { name: "currentCount", value: String(active) },
          ],
        );
      }
      await insertApiUser(trx, {
        clientId,
        tmcId: tmc.id,
        orgId: command.orgId ?? null,
        role: command.role,
        credentialType: command.credentialType,
        secretHash: hashClientSecret(this.keys.secretPepper, secret),
        createdBy: command.actor,
      });
      await insertAuditEvents(trx, [
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
    return command.credentialType === "SCIM_TOKEN"
      ? { clientId, scimToken: sealScimToken(this.keys.scimTokenKey, this.keys.scimTokenKeyId, { clientId, secret }) }
      : { clientId, clientSecret: secret };
  }
}
