// The verifier in front of a service: a Connect interceptor, a grpc-js server interceptor and a
// Fastify onRequest hook. Each takes the bearer token from the Authorization header, refuses with
// UNAUTHENTICATED (Connect, gRPC) or 401 (HTTP) and a WWW-Authenticate challenge (RFC 6750), and
// hands the claims to the handler. grpc-js and Fastify are used for their types only.
import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";
import type { Metadata, ServerInterceptingCallInterface, ServerInterceptor } from "@grpc/grpc-js";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { AccessTokenClaims, RefusalReason, Verifier } from "./verifier.js";

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
  if (!authorization) return undefined;
  const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(authorization);
  return match?.[1];
}

/** RFC 6750 3: no error code when no token was sent; invalid_token with the reason otherwise. */
export function challengeOf(realm: string, reason: RefusalReason | undefined): string {
  const base = `Bearer realm="${realm.replace(/["\\]/g, "")}"`;
  return reason ? `${base}, error="invalid_token", error_description="${descriptionOf(reason)}"` : base;
}

function descriptionOf(reason: RefusalReason): string {
  switch (reason) {
    case "stale":
      return "The token cannot be verified now";
    case "expired":
      return "The access token expired";
    case "revoked":
      return "The access token has been revoked";
    default:
      return "The access token is invalid";
  }
}

type Judged = { ok: true; claims: AccessTokenClaims } | { ok: false; reason: RefusalReason | undefined };

async function judge(verifier: Verifier, authorization: string | undefined | null): Promise<Judged> {
  const token = bearerTokenOf(authorization);
  if (token === undefined) return { ok: false, reason: undefined };
  return verifier.verify(token);
}

export function connectInterceptor(verifier: Verifier, realm: string): Interceptor {
  return (next) => async (req) => {
    const judged = await judge(verifier, req.header.get("authorization"));
    if (!judged.ok)
      throw new ConnectError(
        judged.reason ? "The access token is not valid" : "An access token is required",
        Code.Unauthenticated,
        { "www-authenticate": challengeOf(realm, judged.reason) },
      );
    req.contextValues.set(tokenClaimsKey, judged.claims);
    return next(req);
  };
}

export function grpcServerInterceptor(verifier: Verifier, realm: string): ServerInterceptor {
  // The class is grpc-js's; taken from the module when the first call comes, so grpc-js stays optional.
  return (_method, call) => new (requireGrpc().ServerInterceptingCall)(call, responder(verifier, realm, call));
}

function responder(verifier: Verifier, realm: string, call: ServerInterceptingCallInterface) {
  return {
    start(next: (listener?: object) => void) {
      next({
        onReceiveMetadata(metadata: Metadata, forward: (metadata: Metadata) => void) {
          const header = metadata.get("authorization")[0];
          void judge(verifier, typeof header === "string" ? header : undefined).then(
            (judged) => {
              if (judged.ok) {
                grpcClaims.set(metadata, judged.claims);
                forward(metadata);
                return;
              }
              const trailer = new (requireGrpc().Metadata)();
              trailer.set("www-authenticate", challengeOf(realm, judged.reason));
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
    const judged = await judge(verifier, request.headers.authorization);
    if (judged.ok) {
      request.tokenClaims = judged.claims;
      return;
    }
    await reply
      .code(401)
      .header("www-authenticate", challengeOf(realm, judged.reason))
      .header("cache-control", "no-store")
      .send({
        error: "invalid_token",
        error_description: judged.reason ? descriptionOf(judged.reason) : "An access token is required",
      });
  };
}
