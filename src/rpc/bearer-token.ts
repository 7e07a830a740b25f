import { authorizationOf } from "../domain/tokens/dpop-proofs.js";

/** The token of an `Authorization: Bearer <token>` header (RFC 6750 2.1), or undefined. */
export function bearerTokenOf(headers: Headers): string | undefined {
  const presented = authorizationOf(headers.get("authorization"));
  return presented?.scheme === "Bearer" ? presented.token : undefined;
}

/**
 * The SCIM token of an `Authorization: Bearer <token>` header, taken only as issued: one space
 * after the scheme (RFC 6750 2.1 allows more; no IdP sends them), then padded Base64 up to the end
 * of the value. An administrator pastes the token into the IdP; a copy that gained a space or lost
 * its padding is a different string and is refused, not repaired.
 */
export function scimTokenOf(headers: Headers): string | undefined {
  const value = headers.get("authorization");
  if (!value) return undefined;
  return /^Bearer ([A-Za-z0-9+/]+={0,2})$/i.exec(value)?.[1];
}
