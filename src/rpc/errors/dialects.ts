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
  INVALID_GRANT: "invalid_grant",
  INVALID_SCOPE: "invalid_scope",
  INVALID_TARGET: "invalid_target",
  UNSUPPORTED_GRANT_TYPE: "unsupported_grant_type",
  TOO_MANY_REQUESTS: "slow_down",
};
