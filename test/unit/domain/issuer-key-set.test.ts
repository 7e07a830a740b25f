// A trusted issuer's published key set (issuerKeySetOf): lenient where a client's set is strict.
// Keys that cannot verify an RS256 or ES256 subject token are dropped (encryption keys, other
// key types and curves, no kid, short RSA), the kept ones are reduced to their public members
// (no x5c), and the set is refused when a key carries private members, when no usable key is
// left, or when it is not a set of 1 to MAX_ISSUER_KEYS keys.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import { exportJWK, generateKeyPair, type JWK } from "jose";
import { DomainError } from "../../../src/errors/domain-error.js";
import { issuerKeySetOf, MAX_ISSUER_KEYS } from "../../../src/domain/tokens/issuer-key-set.js";

async function publicJwk(alg: string, options: { crv?: string } = {}): Promise<JWK> {
  const { publicKey } = await generateKeyPair(alg, { extractable: true, ...options });
  return exportJWK(publicKey);
}

/** An RSA key too short for RS256 (jose will not generate one). */
function shortRsaJwk(): JWK {
  const { publicKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 1024 });
  return publicKey.export({ format: "jwk" }) as JWK;
}

async function refusedWith(document: unknown, message: string): Promise<void> {
  await assert.rejects(issuerKeySetOf(document), (error: unknown) => {
    assert.ok(error instanceof DomainError);
    assert.equal(error.code, "API_VALIDATION_FAILED");
    assert.equal(error.message, message);
    return true;
  });
}

describe("issuerKeySetOf (a trusted issuer's published key set)", () => {
  test("keeps the RS256 and ES256 signature keys, as their public members; drops what cannot verify", async () => {
    const rsa = {
      ...(await publicJwk("RS256")),
      kid: "rsa",
      use: "sig",
      x5c: ["MIIBfake"],
      x5t: "t",
      key_ops: ["verify"],
    };
    const ec = { ...(await publicJwk("ES256")), kid: "ec", alg: "ES256" };
    const dropped: JWK[] = [
      { ...(await publicJwk("RS256")), kid: "enc", use: "enc", alg: "RSA-OAEP-256" },
      { ...(await publicJwk("RS256")), kid: "wrap", key_ops: ["wrapKey"] },
      { ...(await publicJwk("RS256")), kid: "ps", alg: "PS256" },
      { ...(await publicJwk("ES384")), kid: "p384" },
      { ...(await publicJwk("EdDSA")), kid: "ed" },
      { ...shortRsaJwk(), kid: "short" },
      { ...(await publicJwk("RS256")) }, // no kid: a subject token must name its key
      { kty: "EC", crv: "P-256", x: "not", y: "a point", kid: "broken" },
      { kty: "RSA", kid: "rs-as-ec", alg: "ES256", n: rsa.n!, e: rsa.e! },
    ];
    const checked = await issuerKeySetOf({ keys: [dropped[0], rsa, "not a key", null, ...dropped.slice(1), ec] });
    assert.deepEqual(checked.keys, [
      { kty: "RSA", kid: "rsa", use: "sig", n: rsa.n, e: rsa.e },
      { kty: "EC", kid: "ec", alg: "ES256", crv: "P-256", x: ec.x, y: ec.y },
    ]);
  });

  test("a key with private members refuses the whole set, even a key it would drop", async () => {
    const ec = { ...(await publicJwk("ES256")), kid: "ec" };
    await refusedWith(
      { keys: [ec, { ...ec, kid: "leak", d: "AAAA" }] },
      "jwks.keys[1] must be a public key (no private members)",
    );
    await refusedWith(
      { keys: [ec, { kty: "oct", kid: "hmac", k: "c2VjcmV0" }] },
      "jwks.keys[1] must be a public key (no private members)",
    );
    await refusedWith(
      { keys: [{ ...ec, kid: "enc", use: "enc", d: "AAAA" }, ec] },
      "jwks.keys[0] must be a public key (no private members)",
    );
  });

  test("no usable key left, no keys, too many keys or not a set: refused", async () => {
    const enc = { ...(await publicJwk("RS256")), kid: "enc", use: "enc" };
    const none = "jwks has no key usable for RS256 or ES256 signatures with a kid";
    await refusedWith({ keys: [enc] }, none);
    await refusedWith({ keys: [{ kty: "OKP", crv: "X25519", x: "abc", kid: "x" }, "junk"] }, none);
    const notASet = `jwks must be a JWK Set with 1 to ${MAX_ISSUER_KEYS} keys`;
    await refusedWith({ keys: [] }, notASet);
    await refusedWith({ keys: "nope" }, notASet);
    await refusedWith([], notASet);
    await refusedWith(null, notASet);
    const ec = { ...(await publicJwk("ES256")), kid: "ec" };
    await refusedWith(
      { keys: Array.from({ length: MAX_ISSUER_KEYS + 1 }, (_, i) => ({ ...ec, kid: `k${i}` })) },
      notASet,
    );
    assert.equal(
      (await issuerKeySetOf({ keys: Array.from({ length: MAX_ISSUER_KEYS }, () => ec) })).keys.length,
      MAX_ISSUER_KEYS,
    );
  });
});
