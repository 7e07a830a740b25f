import crypto from "node:crypto";

/** An Ed25519 key pair under a key id, as a JWKS publishes it and a signer holds it. */
export interface TestKey {
  readonly kid: string;
  readonly privateKey: crypto.KeyObject;
  readonly publicKey: crypto.KeyObject;
}

/** Two keys a verifier knows (k1, k2) and one it never will (outsider). */
export function testKeys(): { k1: TestKey; k2: TestKey; outsider: TestKey } {
  const newKey = (kid: string): TestKey => ({ kid, ...crypto.generateKeyPairSync("ed25519") });
  return { k1: newKey("k1-kid"), k2: newKey("k2-kid"), outsider: newKey("outsider-kid") };
}
