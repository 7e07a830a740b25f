// The verifier in front of a service: a Connect interceptor, a grpc-js server interceptor and a
// Fastify onRequest hook. Each takes the token from the Authorization header (Bearer, or DPoP with
// the DPoP header's proof, RFC 9449), refuses with UNAUTHENTICATED (Connect, gRPC) or 401 (HTTP)
// and a WWW-Authenticate challenge (RFC 6750, RFC 9449 7.1; DPoP-Nonce when a nonce is to be
// used), and hands the claims to the handler. grpc-js and Fastify are used for their types only.
import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";
import type { Metadata, ServerInterceptingCallInterface, ServerInterceptor } from "@grpc/grpc-js";
import type { FastifyReply, FastifyRequest } from "fastify";
import { authorizationOf, DPOP_ALGORITHMS } from "./dpop-proof.js";
import type { AccessTokenClaims, PresentedRequest, RefusalReason, RequestOutcome, Verifier } from "./verifier.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The verified access token's claims, set by the verifier's fastifyHook(). */
    tokenClaims?: AccessTokenClaims;
  }
}

/** The Connect context value a handler reads the claims from: `ctx.values.get(tokenClaimsKey)`. */
export const tokenClaimsKey = createContextKey<AccessTokenClaims | undefined>(undefined, {
  description: "verified access token claims",
});

const GRPC_UNAUTHENTICATED = 16;
const grpcClaims = new WeakMap<Metadata, AccessTokenClaims>();

/** The claims the grpc-js interceptor verified for this call (its request metadata). */
export function grpcClaimsOf(call: { metadata: Metadata }): AccessTokenClaims | undefined {
  return grpcClaims.get(call.metadata);
}

/** The token of an `Authorization: Bearer …` value; undefined when there is none. */
export function bearerTokenOf(authorization: string | undefined | null): string | undefined {
  const presented = authorizationOf(authorization);
  return presented?.scheme === "Bearer" ? presented.token : undefined;
}

/**
 * RFC 6750 3: no error code when no token was sent; invalid_token with the reason otherwise. A
 * token sent under DPoP is answered in the DPoP scheme (RFC 9449 7.1), naming the proof's error
 * (invalid_dpop_proof, use_dpop_nonce) and the algorithms accepted.
 */
export function challengeOf(
  realm: string,
  reason: RefusalReason | undefined,
  scheme: "Bearer" | "DPoP" = "Bearer",
): string {
  const base = `${scheme} realm="${realm.replace(/["\\]/g, "")}"`;
  const algs = scheme === "DPoP" ? `, algs="${DPOP_ALGORITHMS.join(" ")}"` : "";
  if (!reason) return base;
  const error = reason === "invalid_dpop_proof" || reason === "use_dpop_nonce" ? reason : "invalid_token";
  return `${base}, error="${error}", error_description="${descriptionOf(reason)}"${algs}`;
}

function descriptionOf(reason: RefusalReason): string {
  switch (reason) {
    case "stale":
      return "The token cannot be verified now";
    case "expired":
      return "The access token expired";
    case "revoked":
      return "The access token has been revoked";
    case "invalid_dpop_proof":
      return "The DPoP proof is not valid for this request and token";
    case "use_dpop_nonce":
      return "The DPoP proof must carry the nonce of DPoP-Nonce";
    case "wrong_scheme":
      return "A DPoP-bound token needs the DPoP scheme and a proof; an unbound one the Bearer scheme";
    default:
      return "The access token is invalid";
  }
}

/** The response headers of a refusal: the challenge, and the nonce the next proof must carry. */
function refusalHeaders(realm: string, judged: RequestOutcome & { ok: false }): Record<string, string> {
  return {
    "www-authenticate": challengeOf(realm, judged.reason, judged.scheme),
    ...(judged.dpopNonce !== undefined ? { "dpop-nonce": judged.dpopNonce } : {}),
  };
}

const single = (value: string | string[] | undefined) => (Array.isArray(value) ? value.join(", ") : value);

export function connectInterceptor(verifier: Verifier, realm: string): Interceptor {
  return (next) => async (req) => {
    const judged = await verifier.verifyRequest({
      authorization: req.header.get("authorization"),
      dpop: req.header.get("dpop") ?? undefined,
      method: req.requestMethod,
      url: req.url,
    });
    if (!judged.ok)
      throw new ConnectError(
        judged.reason ? "The access token is not valid" : "An access token is required",
        Code.Unauthenticated,
        refusalHeaders(realm, judged),
      );
    req.contextValues.set(tokenClaimsKey, judged.claims);
    const res = await next(req);
    if (judged.dpopNonce !== undefined) res.header.set("dpop-nonce", judged.dpopNonce);
    return res;
  };
}

export function grpcServerInterceptor(verifier: Verifier, realm: string): ServerInterceptor {
  // The class is grpc-js's; taken from the module when the first call comes, so grpc-js stays optional.
  return (method, call) =>
    new (requireGrpc().ServerInterceptingCall)(call, responder(verifier, realm, call, method.path));
}

function responder(verifier: Verifier, realm: string, call: ServerInterceptingCallInterface, path: string) {
  let offered: string | undefined;
  return {
    start(next: (listener?: object) => void) {
      next({
        onReceiveMetadata(metadata: Metadata, forward: (metadata: Metadata) => void) {
          const text = (name: string) => {
            const value = metadata.get(name)[0];
            return typeof value === "string" ? value : undefined;
          };
          // gRPC calls are POSTs to the method's path; the origin is the verifier's publicOrigin.
          const presented: PresentedRequest = {
            authorization: text("authorization"),
            dpop: text("dpop"),
            method: "POST",
            url: path,
          };
          void verifier.verifyRequest(presented).then(
            (judged) => {
              if (judged.ok) {
                offered = judged.dpopNonce;
                grpcClaims.set(metadata, judged.claims);
                forward(metadata);
                return;
              }
              const trailer = new (requireGrpc().Metadata)();
              for (const [name, value] of Object.entries(refusalHeaders(realm, judged))) trailer.set(name, value);
              call.sendStatus({
                code: GRPC_UNAUTHENTICATED,
                details: judged.reason ? "The access token is not valid" : "An access token is required",
                metadata: trailer,
              });
            },
            () => call.sendStatus({ code: GRPC_UNAUTHENTICATED, details: "The access token could not be verified" }),
          );
        },
      });
    },
    sendMetadata(metadata: Metadata, next: (metadata: Metadata) => void) {
      if (offered !== undefined) metadata.set("dpop-nonce", offered);
      next(metadata);
    },
  };
}

let grpcModule: typeof import("@grpc/grpc-js") | undefined;
/** Set by the package's entry when grpc-js is importable (a peer dependency, optional). */
export function provideGrpc(module: typeof import("@grpc/grpc-js")): void {
  grpcModule = module;
}
function requireGrpc(): typeof import("@grpc/grpc-js") {
  if (!grpcModule) throw new Error("grpcServerInterceptor needs @grpc/grpc-js");
  return grpcModule;
}

export function fastifyHook(verifier: Verifier, realm: string) {
  return async function verifyBearerToken(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const judged = await verifier.verifyRequest({
      authorization: request.headers.authorization,
      dpop: single(request.headers.dpop),
      method: request.method,
      // Fastify's protocol and host follow its trustProxy setting (X-Forwarded-Proto and -Host).
      url: `${request.protocol}://${request.host}${request.url}`,
    });
    if (judged.ok) {
      request.tokenClaims = judged.claims;
      if (judged.dpopNonce !== undefined) reply.header("dpop-nonce", judged.dpopNonce);
      return;
    }
    await reply
      .code(401)
      .headers(refusalHeaders(realm, judged))
      .header("cache-control", "no-store")
      .send({
        error: "invalid_token",
        error_description: judged.reason ? descriptionOf(judged.reason) : "An access token is required",
      });
  };
}
