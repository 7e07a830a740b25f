// Baseline: node-oidc-provider (panva) 9 as a client-credentials authorization server issuing
// JWT access tokens signed EdDSA (Ed25519), with the bench's clients registered in memory
// (client_secret_post and client_secret_basic). Token endpoint POST /token, keys at GET /jwks.
//
// oidc-provider 9 asks for Node 22 and warns on Node 20 ("Unsupported runtime"); every feature
// used here works on Node 20. The warning goes to this child's stderr, which the bench keeps
// only for error messages.
import { generateKeyPairSync } from "node:crypto";
import http from "node:http";
import Provider from "oidc-provider";
import { announce, benchClients } from "./common.js";

const ISSUER = "http://oidc-provider.bench.invalid";
const RESOURCE = "urn:bench:api";

const { privateKey } = generateKeyPairSync("ed25519");
const signingKey = { ...privateKey.export({ format: "jwk" }), kid: "oidc-provider-ed25519", alg: "EdDSA", use: "sig" };

const provider = new Provider(ISSUER, {
  clients: benchClients().map((c) => ({
    client_id: c.clientId,
    client_secret: c.clientSecret,
    grant_types: ["client_credentials"],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: "client_secret_post",
    // The only key is Ed25519, so the (unused) ID-token algorithm must name it too.
    id_token_signed_response_alg: "EdDSA",
  })),
  jwks: { keys: [signingKey] },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => RESOURCE,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: "api",
        audience: RESOURCE,
        accessTokenTTL: 3600,
        accessTokenFormat: "jwt",
        jwt: { sign: { alg: "EdDSA" } },
      }),
    },
  },
});
// Errors the provider answers (e.g. a bad client) are not logged: the bench counts statuses.
provider.on("server_error", (_ctx: unknown, error: Error) =>
  process.stderr.write(`oidc-provider server_error: ${error.stack ?? error.message}\n`),
);

const server = http.createServer(provider.callback());
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => announce(server));
