import { DomainError } from "../../errors/domain-error.js";
import type { AssertionRefusal } from "../shared/client-assertion.js";

/** Token-endpoint failures; the OAuth dialect adds RFC 6749's `error` at the edge. */
export { invalidRequest } from "../shared/client-credentials.js";

/**
 * One body for an unknown client and a wrong secret (spec 7: 403). Which client and which check
 * failed go to the operator's log line only (`logged`), never to the caller.
 */
export const invalidClient = (clientId?: string, reason?: InvalidClientReason) =>
  new DomainError("INVALID_CLIENT", "Client authentication failed", {
    logged:
      clientId === undefined ? undefined : { clientId: clientId.slice(0, 256), refusalReason: reason ?? "unknown" },
  });

/**
 * Why client authentication failed, for the log. "unknown or revoked client" is one reason:
 * telling them apart would take a second lookup for unknown ids only, making them slower to
 * refuse than a wrong secret (a timing oracle for valid client ids).
 */
export type InvalidClientReason =
  "unknown or revoked client" | "wrong secret" | "not a client-credentials API user (SCIM token)" | AssertionRefusal;

export const unsupportedGrantType = (grantType: string) =>
  new DomainError("UNSUPPORTED_GRANT_TYPE", `Unsupported grant_type "${grantType.slice(0, 80)}"`, {
    params: [{ name: "grant_type", value: grantType.slice(0, 80) }],
  });

export const invalidGrant = (message: string) => new DomainError("INVALID_GRANT", message);

export const invalidScope = (message: string) => new DomainError("INVALID_SCOPE", message);

/** RFC 8707 / RFC 8693: the requested audience is not one this service issues tokens for. */
export const invalidTarget = (audience: string) =>
  new DomainError("INVALID_TARGET", "The requested audience is not allowed", {
    params: [{ name: "audience", value: audience.slice(0, 200) }],
  });

export { tooManyRequests } from "../rate-limit/model.js";
