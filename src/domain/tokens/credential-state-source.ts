import type { Clock } from "../shared/clock.js";
import type { Tx } from "../shared/unit-of-work.js";
import type { CredentialStateSource } from "./credential-generations.js";
import { isTokenCredentialId, jtiOfTokenCredential, tokenCredentialId, type CredentialState } from "./model.js";
import type { RevokedTokenRepository } from "./ports.js";

/** A shared cache keeps a revoked token's state this much longer than the token lives. */
const REVOKED_TOKEN_TTL_MARGIN_SECONDS = 60;

/**
 * The truth behind the credential checks: API users' generations, and revoked access tokens
 * under their token credential ids (revoked: no generation, kept in the cache until the token
 * would have expired; a token that is not revoked is simply absent).
 */
export function credentialStateSource(
  apiUsers: CredentialStateSource,
  revokedTokens: RevokedTokenRepository,
  clock: Clock,
): CredentialStateSource {
  return {
    async credentialStates(tx: Tx, ids: readonly string[]): Promise<Map<string, CredentialState>> {
      const clientIds = ids.filter((id) => !isTokenCredentialId(id));
      const jtis = ids.filter(isTokenCredentialId).map(jtiOfTokenCredential);
      const states =
        clientIds.length > 0 ? await apiUsers.credentialStates(tx, clientIds) : new Map<string, CredentialState>();
      if (jtis.length === 0) return states;
      const now = clock().getTime();
      for (const [jti, { changeSeq, expiresAt }] of await revokedTokens.revocations(tx, jtis)) {
        const ttlSeconds =
          Math.max(1, Math.ceil((expiresAt.getTime() - now) / 1000)) + REVOKED_TOKEN_TTL_MARGIN_SECONDS;
        states.set(tokenCredentialId(jti), { generation: undefined, changeSeq, ttlSeconds });
      }
      return states;
    },
  };
}
