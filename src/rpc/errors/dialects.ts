import type { ErrorCode } from "../../errors/codes.js";

/**
 * RFC 6749 section 5.2 (and RFC 8693 2.2.2) error codes for the catalogue codes the token
 * endpoints raise. Any other 400 of an OAuth-dialect service is `invalid_request`, so standard
 * clients understand every refusal. RFC 6749 has no code for 429; `slow_down` is the closest.
 */
export const OAUTH_ERROR_BY_CODE: Readonly<Partial<Record<ErrorCode, string>>> = {
  INVALID_REQUEST: "invalid_request",
  INVALID_CLIENT: "invalid_client",
  CLIENT_AUTHENTICATION_REQUIRED: "invalid_client",
  RESOURCE_SERVER_AUTHENTICATION_FAILED: "invalid_client",
  UNAUTHORIZED_CLIENT: "unauthorized_client",
  INVALID_GRANT: "invalid_grant",
  INVALID_SCOPE: "invalid_scope",
  INVALID_TARGET: "invalid_target",
  UNSUPPORTED_GRANT_TYPE: "unsupported_grant_type",
  INVALID_DPOP_PROOF: "invalid_dpop_proof",
  USE_DPOP_NONCE: "use_dpop_nonce",
  TOO_MANY_REQUESTS: "slow_down",
};

/** The SCIM Error message URN (RFC 7644 3.12). */
export const SCIM_ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error";

/**
 * RFC 7644 3.12 `scimType` of the catalogue codes that have one. The generic 400
 * (API_VALIDATION_FAILED: malformed JSON, a wrong field type, a field the request schema does not
 * have) is `invalidSyntax`; other codes carry no scimType.
 */
export const SCIM_TYPE_BY_CODE: Readonly<Partial<Record<ErrorCode, string>>> = {
  INVALID_FILTER: "invalidFilter",
  INVALID_PATH: "invalidPath",
  INVALID_VALUE: "invalidValue",
  NO_TARGET: "noTarget",
  MUTABILITY: "mutability",
  ALREADY_EXISTS: "uniqueness",
  API_VALIDATION_FAILED: "invalidSyntax",
};
