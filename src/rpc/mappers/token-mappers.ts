import type { IssuedToken, Principal } from "../../domain/tokens/model.js";

export function tokenResponse(issued: IssuedToken) {
  return {
    accessToken: issued.accessToken,
    tokenType: issued.tokenType,
    expiresIn: issued.expiresIn,
    scope: issued.scope,
    refreshToken: issued.refreshToken ?? "",
    issuedTokenType: issued.issuedTokenType ?? "",
  };
}

/** RFC 7662 2.2: only `active` for an inactive token. */
export function introspectionResponse(principal: Principal | undefined) {
  if (!principal) return { active: false };
  return {
    active: true,
    scope: principal.scopes.join(" "),
    clientId: principal.clientId,
    tokenType: "Bearer",
    exp: principal.expiresAt,
    iat: principal.issuedAt,
    sub: principal.subject,
    aud: [...principal.audience],
    iss: principal.issuer,
    jti: principal.tokenId,
    tmcId: principal.tmcId,
    role: principal.role,
  };
}
