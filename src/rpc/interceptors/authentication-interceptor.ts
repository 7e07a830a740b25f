import { createContextKey, type Interceptor } from "@connectrpc/connect";
import { DomainError, permissionDenied, unauthenticated } from "../../errors/domain-error.js";
import type { ApiUser } from "../../domain/api-users/model.js";
import type { Principal } from "../../domain/tokens/model.js";
import { bearerTokenOf, scimTokenOf } from "../bearer-token.js";
import { accessRuleOf, authenticationOf, AuthenticationKind, isPublicInfrastructure } from "../contract.js";
import { requestInfoOf } from "../request-context.js";

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
function challengeInvalidToken(error: unknown): never {
  if (error instanceof DomainError && error.kind === "UNAUTHENTICATED") {
    throw withChallenge(error, `Bearer error="invalid_token", error_description="${quotable(error.message)}"`);
  }
  throw error;
}

function withChallenge(error: DomainError, challenge: string): DomainError {
  return new DomainError(error.code, error.message, {
    params: error.params,
    detail: error.detail,
    cause: error.cause,
    challenge,
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
        const token = bearerTokenOf(req.header);
        if (token === undefined)
          throw withChallenge(unauthenticated("An access token is required (Authorization: Bearer <token>)"), "Bearer");
        const principal = await verifiers.accessTokens.verify(token, verifiers.audience).catch(challengeInvalidToken);
        const rule = accessRuleOf(req.method);
        // A protected method without a rule is a contract mistake: refuse rather than allow.
        if (!rule.scope) throw permissionDenied("This operation is not available to access tokens");
        if (!principal.scopes.includes(rule.scope)) {
          throw withChallenge(
            permissionDenied(`The access token lacks the scope "${rule.scope}"`),
            `Bearer error="insufficient_scope", scope="${rule.scope}"`,
          );
        }
        if (rule.roles.length > 0 && !rule.roles.includes(principal.role))
          throw permissionDenied(`This operation requires the role ${rule.roles.join(" or ")}`);
        req.contextValues.set(principalKey, principal);
        return next(req);
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
