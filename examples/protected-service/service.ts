// A service protected by @travel/auth-verifier: a REST route (Fastify) and an RPC (Connect, which
// also answers gRPC and gRPC-Web) that say who called them, for tokens the verifier accepts, and
// refuse everything else with 401 / UNAUTHENTICATED.
import http2 from "node:http2";
import { create, createFileRegistry, type Message } from "@bufbuild/protobuf";
import type { GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import {
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FileDescriptorProtoSchema,
} from "@bufbuild/protobuf/wkt";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import Fastify from "fastify";
import {
  createVerifier,
  tokenClaimsKey,
  type Verifier,
  type VerifierOptions,
} from "../../packages/verifier/src/index.js";

/**
 * travel.examples.v1.Trips/WhoAmI (empty request → { sub, client_id }), described in code rather
 * than in a .proto so the example needs no generation step. Equivalent to:
 *   service Trips { rpc WhoAmI(WhoAmIRequest) returns (WhoAmIResponse); }
 *   message WhoAmIRequest {}
 *   message WhoAmIResponse { string sub = 1; string client_id = 2; }
 */
const string = (name: string, number: number) => ({
  name,
  number,
  jsonName: name,
  type: FieldDescriptorProto_Type.STRING,
  label: FieldDescriptorProto_Label.OPTIONAL,
});
export type WhoAmIRequest = Message<"travel.examples.v1.WhoAmIRequest">;
export type WhoAmIResponse = Message<"travel.examples.v1.WhoAmIResponse"> & { sub: string; clientId: string };
export const TripsService = createFileRegistry(
  create(FileDescriptorProtoSchema, {
    name: "travel/examples/v1/trips.proto",
    package: "travel.examples.v1",
    syntax: "proto3",
    messageType: [
      { name: "WhoAmIRequest" },
      { name: "WhoAmIResponse", field: [string("sub", 1), string("client_id", 2)] },
    ],
    service: [
      {
        name: "Trips",
        method: [
          {
            name: "WhoAmI",
            inputType: ".travel.examples.v1.WhoAmIRequest",
            outputType: ".travel.examples.v1.WhoAmIResponse",
          },
        ],
      },
    ],
  }),
  () => undefined,
).getService("travel.examples.v1.Trips") as GenService<{
  whoAmI: { methodKind: "unary"; input: GenMessage<WhoAmIRequest>; output: GenMessage<WhoAmIResponse> };
}>;

/** A setting from the environment, or its fallback; refused when neither is set. */
export function setting(name: string, fallback?: string): string {
  const value = process.env[name] ?? fallback;
  if (value === undefined || value === "") throw new Error(`${name} is required`);
  return value;
}

/** The verifier's options from AUTH_URL, ISSUER, AUDIENCE, RS_CLIENT_ID and RS_CLIENT_SECRET. */
export function verifierOptionsFromEnv(): VerifierOptions {
  return {
    authUrl: setting("AUTH_URL"),
    issuer: setting("ISSUER"),
    audience: setting("AUDIENCE"),
    clientId: setting("RS_CLIENT_ID"),
    clientSecret: setting("RS_CLIENT_SECRET"),
  };
}

export interface ProtectedService {
  /** The REST face: GET {url}/trips. */
  url: string;
  /** The RPC face (plaintext HTTP/2): gRPC, Connect or gRPC-Web clients of TripsService. */
  rpcUrl: string;
  verifier: Verifier;
  close(): Promise<void>;
}

export async function startProtectedService(options: {
  verifierOptions: VerifierOptions;
  port?: number;
  rpcPort?: number;
  /** The address both faces listen on; default 127.0.0.1. */
  host?: string;
}): Promise<ProtectedService> {
  const host = options.host ?? "127.0.0.1";
  const verifier = await createVerifier(options.verifierOptions);

  const app = Fastify();
  app.addHook("onRequest", verifier.fastifyHook());
  app.get("/trips", async (request) => ({ sub: request.tokenClaims!.sub, client_id: request.tokenClaims!.client_id }));
  const url = await app.listen({ port: options.port ?? 0, host });

  const rpc = http2.createServer(
    connectNodeAdapter({
      interceptors: [verifier.connectInterceptor()],
      routes: (router) =>
        router.service(TripsService, {
          whoAmI: (_request, context) => {
            const claims = context.values.get(tokenClaimsKey)!;
            return { sub: claims.sub, clientId: claims.client_id };
          },
        }),
    }),
  );
  const sessions = new Set<http2.ServerHttp2Session>();
  rpc.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  await new Promise<void>((resolve) => rpc.listen(options.rpcPort ?? 0, host, resolve));
  const { port: rpcPort } = rpc.address() as { port: number };

  return {
    url,
    rpcUrl: `http://${host.includes(":") ? `[${host}]` : host}:${rpcPort}`,
    verifier,
    async close() {
      await new Promise<void>((resolve) => {
        rpc.close(() => resolve());
        for (const session of sessions) session.close();
      });
      await app.close();
      await verifier.close();
    },
  };
}
