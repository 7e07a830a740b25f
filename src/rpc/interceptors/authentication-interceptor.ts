import { createContextKey, type Interceptor } from "@connectrpc/connect";
import { DomainError, permissionDenied, unauthenticated } from "../../errors/domain-error.js";
import type { ApiUser } from "../../domain/api-users/model.js";
import type { Principal } from "../../domain/tokens/model.js";
import { bearerTokenOf, scimTokenOf } from "../bearer-token.js";
import { accessRuleOf, authenticationOf, AuthenticationKind, isPublicInfrastructure } from "../contract.js";
import { dpopRequestOf, requestInfoOf } from "../request-context.js";
import { authorizationOf, DPOP_ALGORITHMS, type DpopProofs } from "../../domain/tokens/dpop-proofs.js";

/** The verified caller of an RPC that requires an access token. */
export const principalKey = createContextKey<Principal | undefined>(undefined, {
  description: "verified access-token principal",
});

/** The SCIM_TOKEN API user behind an RPC that requires a SCIM token. */
export const scimClientKey = createContextKey<ApiUser | undefined>(undefined, {
  description: "authenticated SCIM client",
});

/**
 * RFC 6750 section 3: a bearer refusal says how to authenticate. No token at all: the scheme
 * alone (no error code, as 3.1 asks); a token that failed: invalid_token with the reason; a
 * missing scope: insufficient_scope naming it. Other failures (a database that is down) pass as they are.
 */
function challengeInvalidToken(error: unknown, scheme: "Bearer" | "DPoP" = "Bearer"): never {
  if (error instanceof DomainError && error.kind === "UNAUTHENTICATED") {
    throw withChallenge(
      error,
      `${scheme} error="invalid_token", error_description="${quotable(error.message)}"${algsOf(scheme)}`,
    );
  }
  throw error;
}

/**
 * RFC 9449 7.1: a refused DPoP proof is a 401 whose DPoP challenge names the error
 * (invalid_dpop_proof, or use_dpop_nonce with the nonce in DPoP-Nonce) and the algorithms accepted.
 */
function challengeDpop(error: unknown): never {
  if (error instanceof DomainError && (error.code === "INVALID_DPOP_PROOF" || error.code === "USE_DPOP_NONCE")) {
    const wire = error.code === "USE_DPOP_NONCE" ? "use_dpop_nonce" : "invalid_dpop_proof";
    throw new DomainError("USER_NOT_AUTHENTICATED", error.message, {
      challenge: `DPoP error="${wire}", error_description="${quotable(error.message)}"${algsOf("DPoP")}`,
      ...(error.dpopNonce !== undefined ? { dpopNonce: error.dpopNonce } : {}),
      ...(error.logged ? { logged: error.logged } : {}),
    });
  }
  return challengeInvalidToken(error, "DPoP");
}

const algsOf = (scheme: "Bearer" | "DPoP") => (scheme === "DPoP" ? `, algs="${DPOP_ALGORITHMS.join(" ")}"` : "");

function withChallenge(error: DomainError, challenge: string): DomainError {
  return new DomainError(error.code, error.message, {
    params: error.params,
    detail: error.detail,
    cause: error.cause,
    challenge,
    ...(error.dpopNonce !== undefined ? { dpopNonce: error.dpopNonce } : {}),
    ...(error.logged ? { logged: error.logged } : {}),
  });
}

/** A quoted-string of RFC 9110 holds no quotes, backslashes or control bytes: our messages never need them. */
function quotable(text: string): string {
  // eslint-disable-next-line no-control-regex -- control bytes are what it removes
  return text.replace(/[\\"\x00-\x1f\x7f]/g, "");
}

/** The verifiers each authentication kind dispatches to (domain services). */
export interface Verifiers {
  readonly accessTokens: { verify(token: string, audience?: string): Promise<Principal> };
  /** DPoP (RFC 9449): a bound token's proof, and the nonce each answer to a DPoP request offers. */
  readonly dpop: Pick<DpopProofs, "checkPresented" | "nonce">;
  readonly operator: { authenticate(presented: string | undefined, address: string): Promise<void> };
  readonly scimTokens: { authenticate(token: string): Promise<ApiUser> };
  /** The audience this service's own RPCs accept in access tokens. */
  readonly audience: string;
}

/**
 * The one authentication interceptor: it reads the kind each RPC declares in the contract
 * (travel.common.v1.authentication) and checks the matching credential for every protocol and
 * the REST gateway alike. An RPC of this contract that declares no kind is refused to everyone.
 */
export function authenticationInterceptor(verifiers: Verifiers): Interceptor {
  return (next) => async (req) => {
    switch (authenticationOf(req.method)) {
      case AuthenticationKind.ACCESS_TOKEN: {
        const presented = authorizationOf(req.header.get("authorization"));
        if (presented === undefined)
          throw withChallenge(unauthenticated("An access token is required (Authorization: Bearer <token>)"), "Bearer");
        const principal = await verifiers.accessTokens
          .verify(presented.token, verifiers.audience)
          .catch((error: unknown) => challengeInvalidToken(error, presented.scheme));
        // A DPoP-bound token only with a proof by its key for this request; an unbound one only as Bearer.
        await verifiers.dpop
          .checkPresented(presented, principal.confirmation, dpopRequestOf(req.header, req.contextValues))
          .catch(challengeDpop);
        const rule = accessRuleOf(req.method);
        // A protected method without a rule is a contract mistake: refuse rather than allow.
        if (!rule.scope) throw permissionDenied("This operation is not available to access tokens");
        if (!principal.scopes.includes(rule.scope)) {
          throw withChallenge(
            permissionDenied(`The access token lacks the scope "${rule.scope}"`),
            // RFC 9449 7.1: a request under the DPoP scheme is challenged in that scheme.
            `${presented.scheme} error="insufficient_scope", scope="${rule.scope}"${algsOf(presented.scheme)}`,
          );
        }
        if (rule.roles.length > 0 && !rule.roles.includes(principal.role))
          throw permissionDenied(`This operation requires the role ${rule.roles.join(" or ")}`);
        req.contextValues.set(principalKey, principal);
        const res = await next(req);
        // RFC 9449 9: the nonce for the client's next proof, so it rarely meets use_dpop_nonce.
        if (presented.scheme === "DPoP") res.header.set("dpop-nonce", verifiers.dpop.nonce());
        return res;
      }
      case AuthenticationKind.OPERATOR: {
        await verifiers.operator.authenticate(
          bearerTokenOf(req.header),
          requestInfoOf(req.contextValues).remoteAddress,
        );
        return next(req);
      }
      case AuthenticationKind.SCIM_TOKEN: {
        const token = scimTokenOf(req.header);
        if (token === undefined) throw withChallenge(unauthenticated("A valid SCIM token is required"), "Bearer");
        req.contextValues.set(
          scimClientKey,
          await verifiers.scimTokens.authenticate(token).catch(challengeInvalidToken),
        );
        return next(req);
      }
      case AuthenticationKind.CLIENT_SECRET:
        // The token endpoints rate-limit before they authenticate the client from the request itself.
        return next(req);
      default:
        if (isPublicInfrastructure(req.service)) return next(req);
        throw permissionDenied("This operation declares no authentication and is refused");
    }
  };
}
