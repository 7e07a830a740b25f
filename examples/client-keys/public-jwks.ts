// Prints the JWK Set to register for a private key (PEM: Ed25519, P-256 or RSA ≥ 2048 bits): its
// public half only, under the kid given. The private key never leaves the client.
//   npx tsx examples/client-keys/public-jwks.ts client-key.pem 2026-11 > jwks.json
import crypto from "node:crypto";
import fs from "node:fs";

const [pemFile, kid] = process.argv.slice(2);
if (!pemFile || !kid) {
  console.error("usage: public-jwks.ts <private-key.pem> <kid>");
  process.exit(2);
}
const publicKey = crypto.createPublicKey(fs.readFileSync(pemFile));
console.log(JSON.stringify({ keys: [{ ...publicKey.export({ format: "jwk" }), kid }] }));
