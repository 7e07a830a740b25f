// A client with a key instead of a secret, as oauth4webapi users write it: a client-credentials
// token with private_key_jwt (with --dpop, bound to a DPoP key, retrying once with the server's
// nonce), then a GET of --get with it. Prints the token_type, then the GET's status and body.
//   npx tsx examples/client-keys/client.ts --issuer http://localhost:8080 --client-id ID \
//     --key client-key.pem --kid 2026-11 [--scope "api-users"] [--dpop] [--get /v2/api-users]
import crypto from "node:crypto";
import fs from "node:fs";
import { parseArgs } from "node:util";
import * as oauth from "oauth4webapi";

const { values } = parseArgs({
  options: {
    issuer: { type: "string" },
    "client-id": { type: "string" },
    key: { type: "string" },
    kid: { type: "string" },
    scope: { type: "string" },
    dpop: { type: "boolean", default: false },
    get: { type: "string" },
  },
});
const [issuerUrl, clientId, keyFile, kid] = [values.issuer, values["client-id"], values.key, values.kid];
if (!issuerUrl || !clientId || !keyFile || !kid) {
  console.error("usage: client.ts --issuer URL --client-id ID --key PEM --kid KID [--scope S] [--dpop] [--get PATH]");
  process.exit(2);
}

const issuer = new URL(issuerUrl);
// http is for a service on this machine only; oauth4webapi wants it said.
const insecure = { [oauth.allowInsecureRequests]: issuer.protocol === "http:" };
const as = await oauth.processDiscoveryResponse(
  issuer,
  await oauth.discoveryRequest(issuer, { algorithm: "oauth2", ...insecure }),
);
const client: oauth.Client = { client_id: clientId };
const auth = oauth.PrivateKeyJwt({ key: await importPrivateKey(keyFile), kid });
const options = {
  ...insecure,
  ...(values.dpop ? { DPoP: oauth.DPoP(client, await oauth.generateKeyPair("ES256")) } : {}),
};
const parameters = new URLSearchParams(values.scope ? { scope: values.scope } : {});

const request = () => oauth.clientCredentialsGrantRequest(as, client, auth, parameters, options);
let tokens: oauth.TokenEndpointResponse;
try {
  tokens = await oauth.processClientCredentialsResponse(as, client, await request());
} catch (error) {
  // RFC 9449 8: the first proof carries no nonce; the answer names one, and the retry uses it.
  if (!oauth.isDPoPNonceError(error)) throw error;
  tokens = await oauth.processClientCredentialsResponse(as, client, await request());
}
console.log(tokens.token_type);
if (values.get) {
  const response = await oauth
    .protectedResourceRequest(tokens.access_token, "GET", new URL(values.get, issuer), new Headers(), null, options)
    // oauth4webapi throws a 401/403 that carries a challenge: show it as the answer it is.
    .catch((error: unknown) => {
      if (error instanceof oauth.WWWAuthenticateChallengeError) return error.response;
      throw error;
    });
  console.log(response.status, await response.text());
}

/** The PEM's private key as the CryptoKey oauth4webapi signs with (its algorithm from the key's type). */
async function importPrivateKey(file: string): Promise<crypto.webcrypto.CryptoKey> {
  const key = crypto.createPrivateKey(fs.readFileSync(file));
  const algorithm =
    key.asymmetricKeyType === "ed25519"
      ? { name: "Ed25519" }
      : key.asymmetricKeyType === "ec"
        ? { name: "ECDSA", namedCurve: "P-256" }
        : { name: "RSA-PSS", hash: "SHA-256" };
  const der = key.export({ format: "der", type: "pkcs8" });
  return crypto.subtle.importKey("pkcs8", der, algorithm, false, ["sign"]);
}
