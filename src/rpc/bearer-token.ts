/** The token of an `Authorization: Bearer <token>` header (RFC 6750 2.1), or undefined. */
export function bearerTokenOf(headers: Headers): string | undefined {
  const value = headers.get("authorization");
  if (!value) return undefined;
  const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(value);
  return match?.[1];
}
