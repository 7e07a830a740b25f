// @travel/auth-verifier: verify the auth service's access tokens locally, with revocations pushed
// by its credential-change stream (README.md).
export {
  createVerifier,
  DEFAULT_STALE_AFTER_MS,
  REFUSAL_REASONS,
  STREAM_HEARTBEAT_MS,
  type AccessTokenClaims,
  type Outcome,
  type RefusalReason,
  type Verifier,
  type VerifierMetrics,
  type VerifierOptions,
  type VerifierStatus,
} from "./verifier.js";
export { bearerTokenOf, grpcClaimsOf, tokenClaimsKey } from "./integrations.js";
export { RevocationState, type BoundClaims } from "./state.js";
