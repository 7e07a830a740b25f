import type { Knex } from "knex";
import type { ApiUserCredentialType, ApiUserRole, ApiUserRow } from "./tables.js";
import { toCount } from "./tables.js";

export interface NewApiUser {
  clientId: string;
  tmcId: string;
  orgId: string | null;
  role: ApiUserRole;
  credentialType: ApiUserCredentialType;
  secretHash: Buffer;
  createdBy: string;
}

export async function insertApiUser(db: Knex, user: NewApiUser): Promise<ApiUserRow> {
  const [row] = await db<ApiUserRow>("api_users")
    .insert({
      client_id: user.clientId,
      tmc_id: user.tmcId,
      org_id: user.orgId,
      role: user.role,
      credential_type: user.credentialType,
      secret_hash: user.secretHash,
      created_by: user.createdBy,
    })
    .returning("*");
  return row!;
}

export async function countActiveApiUsers(db: Knex, tmcId: string): Promise<number> {
  const row = await db("api_users").where({ tmc_id: tmcId }).whereNull("revoked_at").count({ n: "*" }).first();
  return toCount(row?.n);
}
