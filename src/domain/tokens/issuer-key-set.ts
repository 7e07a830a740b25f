import { importJWK, type JSONWebKeySet, type JWK } from "jose";
import { PRIVATE_JWK_MEMBERS } from "../../../packages/verifier/src/dpop-proof.js";
import { keyTypeFits } from "../../../packages/verifier/src/jws.js";
import { keySetMembersOf, publicJwk, refusedKeySet } from "../shared/client-assertion.js";

/** Algorithms accepted from external issuers (the platform documents RS256; ES256 too). */
export const EXTERNAL_ALGORITHMS = ["RS256", "ES256"] as const;

/** The most keys an issuer's published set may hold (IdPs publish a handful); a longer set is refused. */
export const MAX_ISSUER_KEYS = 100;

/**
 * A trusted issuer's published key set, checked where it enters (fetched from its `jwksUri`).
 * Lenient where a client's set is strict (clientKeySetOf): identity providers (Entra ID, Okta,
 * Google, Keycloak) publish several keys, `x5c`/`x5t` members and sometimes encryption keys, so
 * a key this service cannot verify with is dropped, not refused. Kept: public keys with a `kid`
 * (subject tokens must name theirs) usable for an EXTERNAL_ALGORITHMS signature (RSA ≥ 2048 bits,
 * P-256; `use` sig or none, `key_ops` with verify or none, `alg` one of those or none), as their
 * public members only. Refused, with the reason: not a set of 1 to MAX_ISSUER_KEYS keys, a key
 * carrying private members (an issuer publishing a private or symmetric key is not trusted), or
 * no usable key left.
 */
export async function issuerKeySetOf(document: unknown): Promise<JSONWebKeySet> {
  const usable: JWK[] = [];
  for (const [index, key] of keySetMembersOf(document, MAX_ISSUER_KEYS).entries()) {
    if (typeof key !== "object" || key === null) continue;
    if (PRIVATE_JWK_MEMBERS.some((member) => member in key))
      throw refusedKeySet(`jwks.keys[${index}] must be a public key (no private members)`);
    const checked = await verificationKeyOf(key as JWK);
    if (checked) usable.push(checked);
  }
  if (usable.length === 0)
    throw refusedKeySet(`jwks has no key usable for ${EXTERNAL_ALGORITHMS.join(" or ")} signatures with a kid`);
  return { keys: usable };
}

/** The key's public members when it can verify an EXTERNAL_ALGORITHMS signature named by its kid; else undefined. */
async function verificationKeyOf(jwk: JWK): Promise<JWK | undefined> {
  if (typeof jwk.kid !== "string" || jwk.kid === "") return undefined;
  if (jwk.use !== undefined && jwk.use !== "sig") return undefined;
  if (jwk.key_ops !== undefined && !(Array.isArray(jwk.key_ops) && jwk.key_ops.includes("verify"))) return undefined;
  const alg = EXTERNAL_ALGORITHMS.find(
    (candidate) => keyTypeFits(jwk, candidate) && (jwk.alg === undefined || jwk.alg === candidate),
  );
  if (alg === undefined) return undefined;
  const publicMembers = publicJwk(jwk);
  try {
    await importJWK(publicMembers, alg);
  } catch {
    return undefined;
  }
  if (jwk.kty === "RSA" && Buffer.from(String(jwk.n), "base64url").length * 8 < 2048) return undefined;
  return publicMembers;
}
