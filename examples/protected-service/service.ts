// A service protected by @travel/auth-verifier: a REST route (Fastify) and a gRPC method (grpc-js)
// that answer who called them, for tokens the verifier accepts, and refuse everything else.
import * as grpc from "@grpc/grpc-js";
import Fastify from "fastify";
import {
  createVerifier,
  grpcClaimsOf,
  type Verifier,
  type VerifierOptions,
} from "../../packages/verifier/src/index.js";

/** What both faces answer: the token's subject and the API user that obtained it. */
interface Caller {
  sub: string;
  client_id: string;
}

/** The gRPC face, defined without a .proto: one unary method, JSON messages on the gRPC wire. */
const json = {
  serialize: (value: unknown) => Buffer.from(JSON.stringify(value ?? {})),
  deserialize: (bytes: Buffer): unknown => (bytes.length ? JSON.parse(bytes.toString("utf8")) : {}),
};
export const TRIPS_SERVICE = {
  whoAmI: {
    path: "/travel.examples.v1.Trips/WhoAmI",
    requestStream: false,
    responseStream: false,
    requestSerialize: json.serialize,
    requestDeserialize: json.deserialize,
    responseSerialize: json.serialize,
    responseDeserialize: json.deserialize,
  },
} satisfies grpc.ServiceDefinition;

export interface ProtectedService {
  /** The REST face: GET {url}/trips. */
  url: string;
  /** The gRPC face (host:port, plaintext): /travel.examples.v1.Trips/WhoAmI. */
  grpcAddress: string;
  verifier: Verifier;
  close(): Promise<void>;
}

export async function startProtectedService(options: {
  verifierOptions: VerifierOptions;
  port?: number;
  grpcPort?: number;
}): Promise<ProtectedService> {
  const verifier = await createVerifier(options.verifierOptions);

  const app = Fastify();
  app.addHook("onRequest", verifier.fastifyHook());
  app.get("/trips", async (request): Promise<Caller> => {
    const claims = request.tokenClaims!;
    return { sub: claims.sub, client_id: claims.client_id };
  });
  const url = await app.listen({ port: options.port ?? 0, host: "127.0.0.1" });

  const server = new grpc.Server({ interceptors: [verifier.grpcServerInterceptor()] });
  server.addService(TRIPS_SERVICE, {
    whoAmI: (call: grpc.ServerUnaryCall<unknown, Caller>, callback: grpc.sendUnaryData<Caller>) => {
      const claims = grpcClaimsOf(call)!;
      callback(null, { sub: claims.sub, client_id: claims.client_id });
    },
  });
  const grpcPort = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${options.grpcPort ?? 0}`, grpc.ServerCredentials.createInsecure(), (error, port) =>
      error ? reject(error) : resolve(port),
    ),
  );

  return {
    url,
    grpcAddress: `127.0.0.1:${grpcPort}`,
    verifier,
    async close() {
      server.forceShutdown();
      await app.close();
      await verifier.close();
    },
  };
}
