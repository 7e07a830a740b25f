import { DomainError } from "../../errors/domain-error.js";
import type { ApiUser } from "../api-users/model.js";
import type { Clock } from "../shared/clock.js";
import { tenantScope } from "../shared/tenant-scope.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { AccessTokens } from "./access-tokens.js";
import type { CredentialGenerations } from "./credential-generations.js";
import { tokenCredentialId } from "./model.js";
import { invalidRequest } from "./oauth-errors.js";
import type { RefreshTokenRepository, RevokedTokenRepository } from "./ports.js";
import { refreshTokenHash } from "./token-service.js";

export type RevokedKind = "refresh_token" | "access_token";

/**
 * RFC 7009 token revocation, for the client the token was issued to:
 * - a refresh token revokes its whole family (every refresh token of that exchange);
 * - an access token is revoked by its `jti`: a numbered credential change of its own token
 *   credential, published to the shared cache before the caller is answered, so every instance
 *   refuses it from then on through the round trip that checks credential generations.
 * A token that is unknown, invalid, expired or already dead is nothing to revoke (the caller gets
 * 200 all the same, section 2.2); a live token issued to another client is refused.
 */
export class TokenRevocation {
  constructor(
    private readonly uow: UnitOfWork,
    private readonly accessTokens: AccessTokens,
    private readonly refreshTokens: RefreshTokenRepository,
    private readonly revokedTokens: RevokedTokenRepository,
    private readonly generations: CredentialGenerations,
    private readonly pepper: Buffer,
    private readonly clock: Clock,
  ) {}

  /** What was revoked, or undefined when the token is nothing this service can revoke. The hint only orders the search (2.1). */
  async revoke(client: ApiUser, token: string, hint: string): Promise<RevokedKind | undefined> {
    const searches = hint === "access_token" ? [this.accessToken, this.refreshToken] : [this.refreshToken, this.accessToken];
    for (const search of searches) {
      const revoked = await search.call(this, client, token);
      if (revoked) return revoked;
    }
    return undefined;
  }

  private async refreshToken(client: ApiUser, token: string): Promise<RevokedKind | undefined> {
    const scope = tenantScope(client.tmcId);
    return this.uow.transaction(async (tx) => {
      const found = await this.refreshTokens.lockByHash(tx, scope, refreshTokenHash(this.pepper, token));
      if (!found) return undefined;
      if (found.clientId !== client.clientId) throw notYours();
      if (!found.revokedAt) await this.refreshTokens.revokeFamily(tx, scope, found.familyId, this.clock());
      return "refresh_token";
    });
  }

  private async accessToken(client: ApiUser, token: string): Promise<RevokedKind | undefined> {
    let principal;
    try {
      principal = await this.accessTokens.verify(token);
    } catch (error) {
      // Not a live token of ours (malformed, expired, already revoked, its credential rotated): nothing to do.
      if (error instanceof DomainError && error.kind === "UNAUTHENTICATED") return undefined;
      throw error;
    }
    if (principal.clientId !== client.clientId) throw notYours();
    const id = tokenCredentialId(principal.tokenId);
    const change = await this.uow.transaction(async (tx) => {
      const inserted = await this.revokedTokens.insert(tx, tenantScope(client.tmcId), {
        jti: principal.tokenId,
        clientId: client.clientId,
        expiresAt: new Date(principal.expiresAt * 1000),
      });
      // Numbered last in the transaction (the numbering lock is held until commit).
      return inserted ? this.generations.recordChange(tx, id) : undefined;
    });
    // Committed: every instance refuses the token from the cache before the caller hears back.
    if (change) await this.generations.publish(id, change);
    return "access_token";
  }
}

/** RFC 7009 2.1: the token was not issued to the client making the request. */
function notYours(): DomainError {
  return invalidRequest("The token was not issued to this client", "token");
}
