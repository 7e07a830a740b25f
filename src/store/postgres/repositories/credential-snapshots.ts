import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { CredentialSnapshots } from "../../../domain/tokens/ports.js";
import type { ApiUserRow } from "../tables.js";
import { knexOf } from "../unit-of-work.js";

/**
 * Every API user's credential state and every revoked access token still alive, in pages by id
 * (keyset: each page starts after the last id of the one before), for a change stream's snapshot.
 */
export class PostgresCredentialSnapshots implements CredentialSnapshots {
  async apiUserGenerations(
    tx: Tx,
    after: string,
    limit: number,
    revokedSince: Date,
  ): Promise<Array<{ clientId: string; generation: number | undefined }>> {
    const rows = await knexOf(tx)<ApiUserRow>("api_users")
      .where("client_id", ">", after)
      .where((q) => void q.whereNull("revoked_at").orWhere("revoked_at", ">=", revokedSince))
      .orderBy("client_id")
      .limit(limit)
      .select("client_id", "credential_generation", "revoked_at");
    return rows.map((r) => ({ clientId: r.client_id, generation: r.revoked_at ? undefined : r.credential_generation }));
  }

  async unexpiredRevocations(
    tx: Tx,
    now: Date,
    after: string,
    limit: number,
  ): Promise<Array<{ jti: string; expiresAt: Date }>> {
    const rows = await knexOf(tx)<{ jti: string; expires_at: Date }>("revoked_access_tokens")
      .where("jti", ">", after)
      .where("expires_at", ">", now)
      .orderBy("jti")
      .limit(limit)
      .select("jti", "expires_at");
    return rows.map((r) => ({ jti: r.jti, expiresAt: new Date(r.expires_at) }));
  }
}
