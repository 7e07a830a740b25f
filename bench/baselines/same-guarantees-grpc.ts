// Baseline: the same-guarantees gRPC route, the limit for the service's gRPC issuance — the
// same-guarantees route's work (tokenCore, common.ts, with sameGuarantees, same-guarantees.ts:
// one HMAC compare, one Redis admission, an Ed25519 token signed with node:crypto, an audit row
// per token) served by @grpc/grpc-js's own Server, the standard Node gRPC stack, on the
// project's AuthService.FetchOauth2Token (the generated descriptor; messages (de)serialized with
// @bufbuild/protobuf's toBinary/fromBinary, as the service's own gRPC path does). Loaded by the
// same grpc-js generator as the service's gRPC issuance. The JWKS is served over HTTP/1.1 on
// the announced address (idle during the load), the gRPC server on the "grpc" one.
import crypto from "node:crypto";
import http from "node:http";
import { fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { AuthService, type FetchOauth2TokenResponse } from "../../gen/travel/auth/v2/auth_pb.js";
import { TOKEN_LIFETIME_S, TOKEN_SCOPE, announce, tokenCore, type TokenAnswer } from "./common.js";
import { sameGuarantees } from "./same-guarantees.js";

const method = AuthService.method.fetchOauth2Token;

/** grpc-js's (de)serializers for a message of the descriptor. */
const codec = <D extends DescMessage>(schema: D) => ({
  serialize: (message: MessageShape<D>) => Buffer.from(toBinary(schema, message)),
  deserialize: (bytes: Buffer) => fromBinary(schema, bytes),
});
const input = codec(method.input);
const output = codec(method.output);
const definition: grpc.ServiceDefinition = {
  [method.name]: {
    path: `/${AuthService.typeName}/${method.name}`,
    requestStream: false,
    responseStream: false,
    requestSerialize: input.serialize,
    requestDeserialize: input.deserialize,
    responseSerialize: output.serialize,
    responseDeserialize: output.deserialize,
    originalName: method.localName,
  } satisfies grpc.MethodDefinition<MessageShape<typeof method.input>, FetchOauth2TokenResponse>,
};

/** The gRPC status of each refusal, as the service maps them (invalid_client UNAUTHENTICATED, …). */
const CODE: Record<Exclude<TokenAnswer["status"], 200>, grpc.status> = {
  400: grpc.status.INVALID_ARGUMENT,
  401: grpc.status.UNAUTHENTICATED,
  429: grpc.status.RESOURCE_EXHAUSTED,
  503: grpc.status.UNAVAILABLE,
};

/** The caller's address from grpc-js's peer ("127.0.0.1:port", "[::1]:port"). */
const peerAddress = (peer: string) => peer.replace(/^\[?(.*?)\]?:\d+$/, "$1");

const guarantees = await sameGuarantees();
const core = await tokenCore(
  "http://same-guarantees-grpc.bench.invalid",
  "same-guarantees-grpc-ed25519",
  "node:crypto",
  guarantees,
);
const server = new grpc.Server();
server.addService(definition, {
  [method.name]: (
    call: grpc.ServerUnaryCall<MessageShape<typeof method.input>, FetchOauth2TokenResponse>,
    callback: grpc.sendUnaryData<FetchOauth2TokenResponse>,
  ) => {
    const { grantType, clientId, clientSecret } = call.request;
    core.issue({ grantType, clientId, clientSecret }, crypto.randomUUID(), peerAddress(call.getPeer())).then(
      (answer) => {
        if (answer.status !== 200) return callback({ code: CODE[answer.status], details: answer.error });
        callback(null, {
          $typeName: method.output.typeName,
          accessToken: answer.accessToken,
          tokenType: "Bearer",
          expiresIn: TOKEN_LIFETIME_S,
          refreshToken: "",
          scope: TOKEN_SCOPE,
          issuedTokenType: "",
        });
      },
      (error: Error) => callback({ code: grpc.status.INTERNAL, details: error.message }),
    );
  },
});
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) =>
    error ? reject(error) : resolve(bound),
  ),
);
const jwks = JSON.stringify(core.jwks);
const keys = http.createServer((request, response) => {
  if (request.url !== "/jwks") return void response.writeHead(404).end();
  response.writeHead(200, { "content-type": "application/json" }).end(jwks);
});
await new Promise<void>((resolve) => keys.listen(0, "127.0.0.1", resolve));
announce(
  keys,
  async () => {
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    await new Promise<void>((resolve) => keys.close(() => resolve()));
    await guarantees.close();
  },
  { grpc: `127.0.0.1:${port}` },
);
