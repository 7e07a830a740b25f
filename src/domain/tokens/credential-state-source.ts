import type { Clock } from "../shared/clock.js";
import type { Tx } from "../shared/unit-of-work.js";
import type { CredentialStateSource } from "./ports.js";
import {
  credentialHolderOf,
  jtiOfTokenCredential,
  tokenCredentialId,
  type CredentialHolder,
  type CredentialState,
} from "./model.js";
import type { RevokedTokenRepository } from "./ports.js";

/** A shared cache keeps a revoked token's state this much longer than the token lives. */
const REVOKED_TOKEN_TTL_MARGIN_SECONDS = 60;

/** Where each holder's credential states are read. */
export interface CredentialStateHolders {
  /** API users' generations (revoked ones: none). */
  readonly apiUsers: CredentialStateSource;
  /** Resource servers' generations (removed ones: none). */
  readonly resourceServers: CredentialStateSource;
  readonly revokedTokens: RevokedTokenRepository;
}

/**
 * The truth behind the credential checks: API users' and resource servers' generations, and
 * revoked access tokens under their token credential ids (revoked: no generation, kept in the
 * cache until the token would have expired; a token that is not revoked is simply absent). Each
 * id goes to its holder by credentialHolderOf.
 */
export function credentialStateSource(holders: CredentialStateHolders, clock: Clock): CredentialStateSource {
  return {
    async credentialStates(tx: Tx, ids: readonly string[]): Promise<Map<string, CredentialState>> {
      const byHolder: Record<CredentialHolder, string[]> = { API_USER: [], RESOURCE_SERVER: [], ACCESS_TOKEN: [] };
      for (const id of ids) byHolder[credentialHolderOf(id)].push(id);
      const states = new Map<string, CredentialState>();
      const add = (found: Map<string, CredentialState>) => found.forEach((state, id) => states.set(id, state));
      if (byHolder.API_USER.length > 0) add(await holders.apiUsers.credentialStates(tx, byHolder.API_USER));
      if (byHolder.RESOURCE_SERVER.length > 0)
        add(await holders.resourceServers.credentialStates(tx, byHolder.RESOURCE_SERVER));
      if (byHolder.ACCESS_TOKEN.length > 0) add(await revokedTokenStates(tx, holders, byHolder.ACCESS_TOKEN, clock));
      return states;
    },
  };
}

async function revokedTokenStates(
  tx: Tx,
  holders: CredentialStateHolders,
  ids: readonly string[],
  clock: Clock,
): Promise<Map<string, CredentialState>> {
  const states = new Map<string, CredentialState>();
  const now = clock().getTime();
  for (const [jti, { changeSeq, expiresAt }] of await holders.revokedTokens.revocations(
    tx,
    ids.map(jtiOfTokenCredential),
  )) {
    const ttlSeconds = Math.max(1, Math.ceil((expiresAt.getTime() - now) / 1000)) + REVOKED_TOKEN_TTL_MARGIN_SECONDS;
    states.set(tokenCredentialId(jti), { generation: undefined, changeSeq, ttlSeconds });
  }
  return states;
}
