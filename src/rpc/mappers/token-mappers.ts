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
    orgId: principal.orgId ?? "",
    ...(principal.act ? { act: actorOf(principal.act) } : {}),
  };
}

/** RFC 8693 `act` as the token carries it ({sub, act?: {…}}), nested as deep as the exchanges went. */
function actorOf(act: Record<string, unknown>): { sub: string; act?: ReturnType<typeof actorOf> } {
  const sub = typeof act.sub === "string" ? act.sub : "";
  const inner = act.act;
  return typeof inner === "object" && inner !== null
    ? { sub, act: actorOf(inner as Record<string, unknown>) }
    : { sub };
}
