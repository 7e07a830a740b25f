// The shape of the auth service's access tokens, as the verifier checks it and the service too
// (access-tokens.ts imports hasRequiredClaims). The service's ACCESS_TOKEN_RULES cannot be imported
// from here (the package does not depend on the server); test/unit/token-format.test.ts holds the
// two equal.

/** The signing algorithm: Ed25519 keys only. */
export const ALGORITHM = "EdDSA";

/** The JWT `typ` of an access token (RFC 9068), and its long form. */
export const TOKEN_TYPE = "at+jwt";

/**
 * The claims every token must carry besides `iss`, in the order their absence is looked for
 * (jose's: the last first), so a token missing several is refused for the same one everywhere.
 */
export const PRESENCE_CHECKED_CLAIMS = [
  "sub",
  "exp",
  "iat",
  "jti",
  "aud",
  "client_id",
  "tmc_id",
  "role",
  "gen",
] as const;

/** Every claim the service always sets, with the JSON type it has. */
export const REQUIRED_CLAIMS = {
  iss: "string",
  sub: "string",
  jti: "string",
  client_id: "string",
  tmc_id: "string",
  role: "string",
  exp: "number",
  iat: "number",
  gen: "integer",
  aud: "audience",
} as const;

const REQUIRED_ENTRIES = Object.entries(REQUIRED_CLAIMS);

/** The roles a token can carry. */
const ROLES: ReadonlySet<unknown> = new Set(["TMC_ADMIN", "COMPANY_ADMIN"]);

/**
 * Whether the payload carries every required claim with its type, a known `role`, and `nbf`,
 * `creds` and `cnf` (a DPoP key binding: a string `jkt`) well formed if present.
 */
export function hasRequiredClaims(p: Record<string, unknown>): boolean {
  for (const [name, kind] of REQUIRED_ENTRIES) {
    const value = p[name];
    const fits =
      kind === "integer"
        ? Number.isInteger(value)
        : kind === "audience"
          ? typeof value === "string" || (Array.isArray(value) && value.every((a) => typeof a === "string"))
          : typeof value === kind;
    if (!fits) return false;
  }
  if (!ROLES.has(p.role)) return false;
  if (p.nbf !== undefined && typeof p.nbf !== "number") return false;
  if (p.cnf !== undefined) {
    const cnf = p.cnf as Record<string, unknown> | null;
    if (typeof cnf !== "object" || cnf === null || typeof cnf.jkt !== "string") return false;
  }
  if (p.creds !== undefined) {
    if (!Array.isArray(p.creds)) return false;
    for (const entry of p.creds as unknown[])
      if (!Array.isArray(entry) || typeof entry[0] !== "string" || !Number.isInteger(entry[1])) return false;
  }
  return true;
}
