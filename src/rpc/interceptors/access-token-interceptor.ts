import { getOption } from "@bufbuild/protobuf";
import { createContextKey, type Interceptor } from "@connectrpc/connect";
import { access } from "../../../gen/travel/common/v1/access_pb.js";
import type { AccessTokens, Principal } from "../../domain/tokens/access-tokens.js";
import { permissionDenied, unauthenticated } from "../../domain/errors.js";
import { bearerTokenOf } from "../bearer-token.js";

/** The verified caller of an RPC that requires an access token. */
export const principalKey = createContextKey<Principal | undefined>(undefined, { description: "verified access-token principal" });

/**
 * Guards the services that require an access token (from `Authorization: Bearer` on HTTP or
 * gRPC metadata alike): signature, algorithm, expiry, audience and the credential generation,
 * then the method's access rule (travel.common.v1.access) for scope and role.
 */
export function accessTokenInterceptor(tokens: AccessTokens, audience: string, protectedServices: ReadonlySet<string>): Interceptor {
  return (next) => async (req) => {
    if (!protectedServices.has(req.service.typeName)) return next(req);
    const token = bearerTokenOf(req.header);
    if (token === undefined) throw unauthenticated("An access token is required (Authorization: Bearer <token>)");
    const principal = await tokens.verify(token, audience);
    const rule = getOption(req.method, access);
    // A protected method without a rule is a contract mistake: refuse rather than allow.
    if (!rule.scope) throw permissionDenied("This operation is not available to access tokens");
    if (!principal.scopes.includes(rule.scope)) throw permissionDenied(`The access token lacks the scope "${rule.scope}"`);
    if (rule.roles.length > 0 && !rule.roles.includes(principal.role)) throw permissionDenied(`This operation requires the role ${rule.roles.join(" or ")}`);
    req.contextValues.set(principalKey, principal);
    return next(req);
  };
}
