import type { ClientRefreshTokens } from "../../../domain/api-users/ports.js";
import type { TenantScope } from "../../../domain/shared/tenant-scope.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { BoundCredential, NewRefreshToken, RefreshTokenRecord } from "../../../domain/tokens/model.js";
import type { RefreshTokenRepository } from "../../../domain/tokens/ports.js";
import type { RefreshTokenRow } from "../tables.js";
import { knexOf } from "../unit-of-work.js";

export class PostgresRefreshTokenRepository implements RefreshTokenRepository, ClientRefreshTokens {
  async insert(tx: Tx, scope: TenantScope, token: NewRefreshToken): Promise<void> {
    await knexOf(tx)("refresh_tokens").insert({
      id: token.id,
      token_hash: token.tokenHash,
      family_id: token.familyId,
      client_id: token.clientId,
      tmc_id: scope.tmcId,
      subject: token.subject,
      subject_kind: token.subjectKind,
      scope: token.scope,
      audience: token.audience,
      bound_credentials: JSON.stringify(token.boundCredentials),
      act: JSON.stringify(token.act),
      expires_at: token.expiresAt,
    });
  }

  async lockByHash(tx: Tx, scope: TenantScope, tokenHash: Buffer): Promise<RefreshTokenRecord | undefined> {
    const row = await ofTenant(tx, scope).where({ token_hash: tokenHash }).forUpdate().noWait().first();
    return row && toRecord(row);
  }

  async markUsed(tx: Tx, scope: TenantScope, id: string, now: Date): Promise<void> {
    await ofTenant(tx, scope).where({ id }).update({ used_at: now });
  }

  async revokeFamily(tx: Tx, scope: TenantScope, familyId: string, now: Date): Promise<void> {
    await ofTenant(tx, scope).where({ family_id: familyId }).whereNull("revoked_at").update({ revoked_at: now });
  }

  async revokeAllOfClient(tx: Tx, scope: TenantScope, clientId: string, now: Date): Promise<void> {
    await ofTenant(tx, scope).where({ client_id: clientId }).whereNull("revoked_at").update({ revoked_at: now });
  }
}

function ofTenant(tx: Tx, scope: TenantScope) {
  return knexOf(tx)<RefreshTokenRow>("refresh_tokens").where({ tmc_id: scope.tmcId });
}

function toRecord(row: RefreshTokenRow): RefreshTokenRecord {
  return {
    id: row.id,
    tokenHash: row.token_hash,
    familyId: row.family_id,
    clientId: row.client_id,
    subject: row.subject,
    subjectKind: row.subject_kind,
    scope: row.scope,
    audience: row.audience,
    boundCredentials: row.bound_credentials.map(([id, generation]) => [id, generation] as BoundCredential),
    // Families from before the act column carry only their client as actor.
    act: row.act ?? { sub: row.client_id },
    expiresAt: new Date(row.expires_at),
    usedAt: row.used_at ?? undefined,
    revokedAt: row.revoked_at ?? undefined,
  };
}
