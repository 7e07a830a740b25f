import type { KeyMaterial } from "../shared/key-material.js";
import { DomainError } from "../../errors/domain-error.js";
import type { ApiUser } from "../api-users/model.js";
import type { Clock } from "../shared/clock.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { AccessTokens } from "./access-tokens.js";
import type { CredentialGenerations } from "./credential-generations.js";
import { tokenCredentialId, type Principal } from "./model.js";
import type { RefreshTokenRepository, RevokedTokenRepository } from "./ports.js";
import { refreshTokenHash } from "./token-service.js";

/**
 * What a revocation request did: revoked a refresh token (and its family) or an access token; found
 * nothing to revoke; or found a live token of another client and left it alone. The caller is
 * answered 200 in every case (only the audit trail tells them apart).
 */
export type RevocationOutcome = "refresh_token" | "access_token" | "nothing" | "another_clients_token";

/**
 * RFC 7009 token revocation, for the client the token was issued to:
 * - a refresh token revokes its whole family (every refresh token of that exchange);
 * - an access token is revoked by its `jti`: a numbered credential change of its own token
 *   credential, published to the shared cache before the caller is answered, so every instance
 *   refuses it from then on through the round trip that checks credential generations.
 * A token that is unknown, invalid, expired or already dead is nothing to revoke (the caller gets
 * 200 all the same, section 2.2). A live token issued to another client is left alone, and the
 * caller gets the same 200 (node-oidc-provider and Hydra do the same): section 2.1's "invalid_request"
 * for it would tell a caller of any tenant whether a token it holds is still alive (issue 18).
 */
export class TokenRevocation {
  constructor(
    private readonly deps: {
      readonly uow: UnitOfWork;
      readonly accessTokens: AccessTokens;
      readonly refreshTokens: RefreshTokenRepository;
      readonly revokedTokens: RevokedTokenRepository;
      readonly generations: CredentialGenerations;
      readonly pepper: KeyMaterial["secretPepper"];
      readonly clock: Clock;
    },
  ) {}

  /** What the request did. The hint only orders the search (2.1). */
  async revoke(client: ApiUser, token: string, hint: string): Promise<RevocationOutcome> {
    const access = () => this.accessToken(client, token);
    const refresh = () => this.refreshToken(client, token);
    for (const search of hint === "access_token" ? [access, refresh] : [refresh, access]) {
      const outcome = await search();
      if (outcome) return outcome;
    }
    return "nothing";
  }

  /** Undefined when the token is no refresh token: the next search goes on. */
  private async refreshToken(client: ApiUser, token: string): Promise<RevocationOutcome | undefined> {
    const scope = tenantScope(client.tmcId);
    return this.deps.uow.transaction(async (tx) => {
      const found = await this.deps.refreshTokens.lockByHash(tx, scope, refreshTokenHash(this.deps.pepper, token));
      if (!found) return undefined;
      if (found.clientId !== client.clientId) return "another_clients_token";
      if (!found.revokedAt) await this.deps.refreshTokens.revokeFamily(tx, scope, found.familyId, this.deps.clock());
      return "refresh_token";
    });
  }

  private async accessToken(client: ApiUser, token: string): Promise<RevocationOutcome | undefined> {
    let principal;
    try {
      principal = await this.deps.accessTokens.verify(token);
    } catch (error) {
      // Not a live token of ours (malformed, expired, already revoked, its credential rotated): nothing to do.
      if (error instanceof DomainError && error.kind === "UNAUTHENTICATED") return undefined;
      throw error;
    }
    if (principal.clientId !== client.clientId) return "another_clients_token";
    await this.revokeAccessToken(principal);
    return "access_token";
  }

  /**
   * A resource server's revocation (Zitadel's rule: a token's audience may revoke it too): a live
   * access token addressed to one of `audiences` is revoked as its own client's revocation would
   * revoke it, at once on every instance. Anything else — a refresh token (its client's alone),
   * a token of other audiences, a dead one — is left alone, and the caller gets the same 200.
   */
  async revokeAddressedTo(audiences: readonly string[], token: string): Promise<RevocationOutcome> {
    const [principal] = await this.deps.accessTokens.verifyMany([token], audiences);
    if (!principal) return "nothing";
    await this.revokeAccessToken(principal);
    return "access_token";
  }

  /** Revoked by its `jti`: numbered and published before the caller hears back. */
  private async revokeAccessToken(principal: Principal): Promise<void> {
    const id = tokenCredentialId(principal.tokenId);
    const change = await this.deps.uow.transaction(async (tx) => {
      const inserted = await this.deps.revokedTokens.insert(tx, tenantScope(principal.tmcId), {
        jti: principal.tokenId,
        clientId: principal.clientId,
        expiresAt: new Date(principal.expiresAt * 1000),
      });
      // Numbered last in the transaction (the numbering lock is held until commit).
      return inserted ? this.deps.generations.recordChange(tx, id) : undefined;
    });
    // Committed: every instance refuses the token from the cache before the caller hears back.
    if (change) await this.deps.generations.publish(id, change);
  }
}
