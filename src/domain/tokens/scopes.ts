import type { ApiUserRole } from "../api-users/model.js";
import { invalidScope } from "./oauth-errors.js";

/**
 * The scope vocabulary (spec 5.9 leaves it open). Each role may hold these scopes; a token
 * request gets what it asks for within them, or all of them when it asks for none.
 */
export const SCOPES_BY_ROLE: Readonly<Record<ApiUserRole, readonly string[]>> = {
  TMC_ADMIN: ["api-users", "users:read", "users:write", "air-credits:read", "air-credits:write", "scim", "openid"],
  COMPANY_ADMIN: ["users:read", "users:write", "air-credits:read", "air-credits:write", "scim", "openid"],
};

export const ALL_SCOPES: readonly string[] = [...new Set(Object.values(SCOPES_BY_ROLE).flat())];

/**
 * The scopes the discovery documents list (RFC 8414 scopes_supported). `openid` is still granted
 * (clients that always ask for it keep working) but not advertised: this server has no OpenID
 * Connect endpoints (no ID tokens, no userinfo), and metadata validators such as authlib's read an
 * advertised `openid` as a claim to be an OpenID Provider. RFC 8414 section 2 lets a server leave
 * supported scopes out of the list.
 */
export const ADVERTISED_SCOPES: readonly string[] = ALL_SCOPES.filter((scope) => scope !== "openid");

/** RFC 6749 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ), separated by single spaces. */
export function parseScope(scope: string): string[] {
  if (scope === "") return [];
  if (!/^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/.test(scope))
    throw invalidScope("The scope parameter is malformed");
  return [...new Set(scope.split(" "))];
}

/**
 * How a refusal is worded: a new grant (client_credentials) asks for scopes its client's role
 * allows; an exchange or a refresh derives from an earlier grant and may only narrow it.
 */
export type ScopeCeiling = "allowed" | "narrowed";

const REFUSAL: Readonly<Record<ScopeCeiling, string>> = {
  allowed: "Scope not allowed",
  narrowed: "Scope wider than allowed",
};

/**
 * RFC 6749 3.3 (and RFC 8693 2.1 for exchange): the requested scopes are granted if every one lies
 * within `ceiling`; none requested means the whole ceiling.
 */
export function grantScopes(requested: string, ceiling: readonly string[], kind: ScopeCeiling): string[] {
  const asked = parseScope(requested);
  if (asked.length === 0) return [...ceiling];
  const beyond = asked.filter((s) => !ceiling.includes(s));
  if (beyond.length > 0) throw invalidScope(`${REFUSAL[kind]}: ${beyond.join(" ")}`);
  return asked;
}
