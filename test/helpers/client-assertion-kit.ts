// Client assertions (private_key_jwt, RFC 7523 2.2) as a client builds them: key pairs of each
// allowed algorithm, assertions with any claim or header overridden, and the refusal reasons the
// service logged. Shared by the API users' and the resource servers' private_key_jwt tests.
import crypto from "node:crypto";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from "jose";

export const ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

export interface KeyPair {
  readonly alg: string;
  readonly privateKey: CryptoKey;
  readonly jwk: JWK;
}

export async function keyPair(
  alg: "EdDSA" | "ES256" | "RS256" | "PS256",
  kid: string = crypto.randomUUID(),
): Promise<KeyPair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true, modulusLength: 2048 });
  return { alg, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg } };
}

/** A client assertion as RFC 7523 describes it; `claims` and `header` override the defaults. */
export function assertion(
  key: KeyPair,
  clientId: string,
  audience: string,
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {},
) {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    iss: clientId,
    sub: clientId,
    aud: audience,
    jti: crypto.randomUUID(),
    exp: now + 60,
    iat: now,
    ...claims,
  })
    .setProtectedHeader({ alg: key.alg, kid: key.jwk.kid, ...header })
    .sign(key.privateKey);
}

/** The refusal reasons the service logged (what an operator reads). */
export const refusalsIn = (logs: string) =>
  [...logs.matchAll(/"refusalReason":"([^"]*)"/g)].map((m) => m[1]).join(" | ");
