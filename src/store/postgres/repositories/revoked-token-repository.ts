import type { TenantScope } from "../../../domain/shared/tenant-scope.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { RevokedAccessToken } from "../../../domain/tokens/model.js";
import type { RevokedTokenRepository } from "../../../domain/tokens/ports.js";
import { knexOf } from "../unit-of-work.js";

interface RevokedAccessTokenRow {
  jti: string;
  client_id: string;
  tmc_id: string;
  expires_at: Date;
  revoked_at: Date;
  change_seq: string | number;
}

export class PostgresRevokedTokenRepository implements RevokedTokenRepository {
  async insert(tx: Tx, scope: TenantScope, token: RevokedAccessToken): Promise<boolean> {
    const inserted = await knexOf(tx)<RevokedAccessTokenRow>("revoked_access_tokens")
      .insert({ jti: token.jti, client_id: token.clientId, tmc_id: scope.tmcId, expires_at: token.expiresAt })
      .onConflict("jti")
      .ignore()
      .returning("jti");
    return inserted.length > 0;
  }

  async revocations(tx: Tx, jtis: readonly string[]): Promise<Map<string, { changeSeq: number; expiresAt: Date }>> {
    const rows = await knexOf(tx)<RevokedAccessTokenRow>("revoked_access_tokens")
      .whereIn("jti", [...jtis])
      .select("jti", "change_seq", "expires_at");
    return new Map(rows.map((r) => [r.jti, { changeSeq: Number(r.change_seq), expiresAt: new Date(r.expires_at) }]));
  }
}
