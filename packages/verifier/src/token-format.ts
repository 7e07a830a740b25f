// The shape of the auth service's access tokens, as the verifier checks it. The service's own
// definition (src/domain/tokens/access-tokens.ts, ACCESS_TOKEN_RULES) cannot be imported from here
// (the package does not depend on the server); test/unit/token-format.test.ts holds the two equal.

/** The signing algorithm: Ed25519 keys only. */
export const ALGORITHM = "EdDSA";

/** The JWT `typ` of an access token (RFC 9068), and its long form. */
export const TOKEN_TYPE = "at+jwt";
export const TOKEN_TYPES: ReadonlySet<unknown> = new Set([TOKEN_TYPE, `application/${TOKEN_TYPE}`]);

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

/** Whether the payload carries every required claim with its type (and `nbf`, `creds` well formed if present). */
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
  if (p.nbf !== undefined && typeof p.nbf !== "number") return false;
  if (p.creds !== undefined) {
    if (!Array.isArray(p.creds)) return false;
    for (const entry of p.creds as unknown[])
      if (!Array.isArray(entry) || typeof entry[0] !== "string" || !Number.isInteger(entry[1])) return false;
  }
  return true;
}
