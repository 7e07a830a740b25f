// What a client signs per request, made as a client library makes it (one synchronous Ed25519
// signature each, keys imported once): an RFC 7523 client assertion (private_key_jwt) and an RFC
// 9449 DPoP proof. The load generator signs them while it loads, the verifier-local child before
// it measures.
import crypto from "node:crypto";

/** What a client assertion is signed with (EdDSA) and names. */
export interface AssertionSpec {
  readonly clientId: string;
  readonly kid: string;
  /** PKCS#8 PEM of the client's Ed25519 private key. */
  readonly privateKeyPem: string;
  readonly audience: string;
}

/** What a DPoP proof is signed with (EdDSA) and names: the request's method and URL, the server's nonce, the token. */
export interface DpopSpec {
  /** PKCS#8 PEM of the client's Ed25519 private key. */
  readonly privateKeyPem: string;
  /** Its public JWK (the proof's header carries it). */
  readonly publicJwk: object;
  /** The request's method (`htm`); POST when absent. */
  readonly method?: "GET" | "POST";
  /** The request's URL as the server sees it (`htu`). */
  readonly url: string;
  /** The server's DPoP-Nonce (a client's one nonce retry gets it). */
  readonly nonce?: string;
  /** At a resource server: the bound access token the proof goes with (its hash is `ath`). */
  readonly accessToken?: string;
}

const privateKeys = new Map<string, crypto.KeyObject>();
const proofHeaders = new Map<string, string>();

function privateKeyOf(pem: string): crypto.KeyObject {
  let key = privateKeys.get(pem);
  if (!key) privateKeys.set(pem, (key = crypto.createPrivateKey(pem)));
  return key;
}

const segment = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");

/** A compact JWS of `input` (header.payload) signed with the Ed25519 key. */
const signed = (input: string, pem: string) =>
  `${input}.${crypto.sign(null, Buffer.from(input), privateKeyOf(pem)).toString("base64url")}`;

/** A fresh RFC 7523 assertion (a fresh jti: each is usable once). */
export function clientAssertion(spec: AssertionSpec): string {
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    iss: spec.clientId,
    sub: spec.clientId,
    aud: spec.audience,
    jti: crypto.randomUUID(),
    iat: now,
    exp: now + 60,
  };
  return signed(`${segment({ alg: "EdDSA", kid: spec.kid })}.${segment(claims)}`, spec.privateKeyPem);
}

/** A fresh RFC 9449 proof (a fresh jti: each is usable once); its header, carrying the public key, is the same text each time. */
export function dpopProof(spec: DpopSpec): string {
  let header = proofHeaders.get(spec.privateKeyPem);
  if (!header)
    proofHeaders.set(spec.privateKeyPem, (header = segment({ typ: "dpop+jwt", alg: "EdDSA", jwk: spec.publicJwk })));
  const claims = {
    jti: crypto.randomUUID(),
    htm: spec.method ?? "POST",
    htu: spec.url,
    iat: Math.floor(Date.now() / 1000),
    ...(spec.nonce ? { nonce: spec.nonce } : {}),
    ...(spec.accessToken
      ? { ath: crypto.createHash("sha256").update(spec.accessToken, "latin1").digest("base64url") }
      : {}),
  };
  return signed(`${header}.${segment(claims)}`, spec.privateKeyPem);
}
