import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import * as DPoP from "dpop";
import { base64url, calculateJwkThumbprint, CompactSign, exportJWK, generateKeyPair, type CryptoKey } from "jose";
import {
  checkPresentation,
  DpopNonces,
  DpopRejected,
  jwkThumbprint,
  NONCE_WINDOW_SECONDS,
  PROOF_CLOCK_TOLERANCE_SECONDS,
  PROOF_LIFETIME_SECONDS,
  tokenHashOf,
  verifyDpopProof,
  type ProofRules,
} from "../../../packages/verifier/src/dpop-proof.js";

/**
 * The DPoP proof module shared by the service and the verifier package, against proofs made by
 * panva's `dpop` package (what oauth4webapi and openid-client send) and by jose: every algorithm
 * the clients use is accepted, the thumbprint is jose's, and each attack of RFC 9449 4.3 and 11 is
 * refused for its own reason.
 */

const URL_ = "https://auth.test/v2/auth/oauth2-token";
const nonces = new DpopNonces(crypto.createSecretKey(crypto.randomBytes(32)));

const rulesAt = (nowMs: number, overrides: Partial<ProofRules> = {}): ProofRules => ({
  method: "POST",
  url: URL_,
  nowMs,
  nonces,
  ...overrides,
});

const rejection = (error: string, check: string) => (thrown: unknown) => {
  assert.ok(thrown instanceof DpopRejected, String(thrown));
  assert.deepEqual([thrown.error, thrown.check], [error, check]);
  return true;
};

async function proofBy(
  alg: DPoP.JWSAlgorithm,
  options: { htu?: string; htm?: string; nonce?: string; token?: string } = {},
) {
  const keys = await DPoP.generateKeyPair(alg);
  const proof = await DPoP.generateProof(
    keys,
    options.htu ?? URL_,
    options.htm ?? "POST",
    options.nonce ?? nonces.current(Date.now()),
    options.token,
  );
  return { keys, proof };
}

/** A proof signed by jose with any header and claims (what an attacker can send). */
async function forged(header: Record<string, unknown>, claims: Record<string, unknown>, key: CryptoKey | Uint8Array) {
  return new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
    .setProtectedHeader(header as never)
    .sign(key);
}

describe("DPoP proofs (shared by the service and the verifier package)", () => {
  for (const alg of ["ES256", "Ed25519", "PS256", "RS256"] as const) {
    test(`a proof of the dpop package with ${alg} passes, and its thumbprint is jose's`, async () => {
      const { keys, proof } = await proofBy(alg);
      const verified = verifyDpopProof(proof, rulesAt(Date.now()));
      assert.equal(verified.jkt, await calculateJwkThumbprint(await exportJWK(keys.publicKey)));
      assert.ok(verified.expiresAtMs > Date.now());
    });
  }

  test("a proof bound to a token passes with that token and its key only", async () => {
    const token = "eyJ.token.value";
    const { keys, proof } = await proofBy("ES256", { token, htm: "GET", htu: "https://api.test/v2/api-users" });
    const jkt = jwkThumbprint(await exportJWK(keys.publicKey));
    const rules = rulesAt(Date.now(), { method: "GET", url: "https://api.test/v2/api-users?limit=1" });
    assert.equal(checkPresentation({ scheme: "DPoP", token }, { jkt }, proof, rules)?.jkt, jkt);
    const other = await DPoP.generateKeyPair("ES256");
    const otherJkt = jwkThumbprint(await exportJWK(other.publicKey));
    assert.throws(
      () => checkPresentation({ scheme: "DPoP", token }, { jkt: otherJkt }, proof, rules),
      rejection("invalid_dpop_proof", "key binding"),
    );
    assert.throws(
      () => checkPresentation({ scheme: "DPoP", token: "eyJ.other.token" }, { jkt }, proof, rules),
      rejection("invalid_dpop_proof", "token hash"),
    );
    assert.throws(() => checkPresentation({ scheme: "Bearer", token }, { jkt }, proof, rules), /DPoP-bound/);
    assert.throws(() => checkPresentation({ scheme: "DPoP", token }, undefined, proof, rules), /not DPoP-bound/);
    assert.equal(checkPresentation({ scheme: "Bearer", token }, undefined, undefined, rules), undefined);
    assert.equal(tokenHashOf(token), base64url.encode(crypto.createHash("sha256").update(token).digest()));
  });

  test("the request must be the one the proof names: htm, htu (query and fragment aside)", async () => {
    const { proof } = await proofBy("ES256");
    assert.throws(
      () => verifyDpopProof(proof, rulesAt(Date.now(), { method: "GET" })),
      rejection("invalid_dpop_proof", "method"),
    );
    assert.throws(
      () => verifyDpopProof(proof, rulesAt(Date.now(), { url: "https://auth.test/v2/auth/introspect" })),
      rejection("invalid_dpop_proof", "url"),
    );
    assert.throws(
      () => verifyDpopProof(proof, rulesAt(Date.now(), { url: "https://evil.test/v2/auth/oauth2-token" })),
      rejection("invalid_dpop_proof", "url"),
    );
    // RFC 3986 normalisation: case of scheme and host, the default port, query and fragment.
    verifyDpopProof(proof, rulesAt(Date.now(), { url: "HTTPS://Auth.Test:443/v2/auth/oauth2-token?x=1#f" }));
  });

  test("iat: too old or in the future is refused; within the window passes", async () => {
    const { proof } = await proofBy("ES256");
    const now = Date.now();
    const lifetimeMs = (PROOF_LIFETIME_SECONDS + PROOF_CLOCK_TOLERANCE_SECONDS) * 1000;
    assert.throws(
      () => verifyDpopProof(proof, rulesAt(now + lifetimeMs + 2000)),
      rejection("invalid_dpop_proof", "issued at"),
    );
    assert.throws(
      () => verifyDpopProof(proof, rulesAt(now - (PROOF_CLOCK_TOLERANCE_SECONDS + 2) * 1000)),
      rejection("invalid_dpop_proof", "issued at"),
    );
  });

  test("nonce: missing or stale is use_dpop_nonce; the neighbouring windows' are accepted", async () => {
    const now = Date.now();
    const keys = await DPoP.generateKeyPair("ES256");
    const without = await DPoP.generateProof(keys, URL_, "POST");
    assert.throws(() => verifyDpopProof(without, rulesAt(now)), rejection("use_dpop_nonce", "nonce"));
    const windowMs = NONCE_WINDOW_SECONDS * 1000;
    const stale = await DPoP.generateProof(keys, URL_, "POST", nonces.current(now - 2 * windowMs));
    assert.throws(() => verifyDpopProof(stale, rulesAt(now)), rejection("use_dpop_nonce", "nonce"));
    const previous = await DPoP.generateProof(keys, URL_, "POST", nonces.current(now - windowMs));
    verifyDpopProof(previous, rulesAt(now));
    const otherServer = new DpopNonces(crypto.createSecretKey(crypto.randomBytes(32)));
    const foreign = await DPoP.generateProof(keys, URL_, "POST", otherServer.current(now));
    assert.throws(() => verifyDpopProof(foreign, rulesAt(now)), rejection("use_dpop_nonce", "nonce"));
  });

  test("alg none, HMAC, a private key in the header, a key of another type, a forged signature: refused", async () => {
    const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
    const jwk = await exportJWK(publicKey);
    const claims = {
      jti: crypto.randomUUID(),
      htm: "POST",
      htu: URL_,
      iat: Math.floor(Date.now() / 1000),
      nonce: nonces.current(Date.now()),
    };
    const segment = (value: object) => base64url.encode(JSON.stringify(value));
    const none = `${segment({ typ: "dpop+jwt", alg: "none", jwk })}.${segment(claims)}.`;
    assert.throws(() => verifyDpopProof(none, rulesAt(Date.now())), rejection("invalid_dpop_proof", "algorithm"));
    const secret = crypto.randomBytes(32);
    const hmac = await forged(
      { typ: "dpop+jwt", alg: "HS256", jwk: { kty: "oct", k: base64url.encode(secret) } },
      claims,
      secret,
    );
    assert.throws(() => verifyDpopProof(hmac, rulesAt(Date.now())), rejection("invalid_dpop_proof", "algorithm"));
    const withPrivate = await forged(
      { typ: "dpop+jwt", alg: "ES256", jwk: await exportJWK(privateKey) },
      claims,
      privateKey,
    );
    assert.throws(() => verifyDpopProof(withPrivate, rulesAt(Date.now())), rejection("invalid_dpop_proof", "key"));
    const wrongKty = await forged({ typ: "dpop+jwt", alg: "EdDSA", jwk }, claims, privateKey).catch(() => undefined);
    if (wrongKty)
      assert.throws(() => verifyDpopProof(wrongKty, rulesAt(Date.now())), rejection("invalid_dpop_proof", "key"));
    const wrongTyp = await forged({ typ: "JWT", alg: "ES256", jwk }, claims, privateKey);
    assert.throws(() => verifyDpopProof(wrongTyp, rulesAt(Date.now())), rejection("invalid_dpop_proof", "type"));
    // Signed by one key, naming another in its header.
    const other = await generateKeyPair("ES256", { extractable: true });
    const swapped = await forged(
      { typ: "dpop+jwt", alg: "ES256", jwk: await exportJWK(other.publicKey) },
      claims,
      privateKey,
    );
    assert.throws(() => verifyDpopProof(swapped, rulesAt(Date.now())), rejection("invalid_dpop_proof", "signature"));
    const good = await forged({ typ: "dpop+jwt", alg: "ES256", jwk }, claims, privateKey);
    verifyDpopProof(good, rulesAt(Date.now()));
    const [h, p, s] = good.split(".");
    const tampered = `${h}.${segment({ ...claims, htm: "GET" })}.${s}`;
    assert.throws(
      () => verifyDpopProof(tampered, rulesAt(Date.now(), { method: "GET" })),
      rejection("invalid_dpop_proof", "signature"),
    );
    assert.throws(() => verifyDpopProof(`${h}.${p}`, rulesAt(Date.now())), rejection("invalid_dpop_proof", "format"));
    assert.throws(() => verifyDpopProof(undefined, rulesAt(Date.now())), rejection("invalid_dpop_proof", "missing"));
  });

  test("an RSA key under 2048 bits is refused", () => {
    // jose refuses to make such a key: node:crypto makes and signs with it, as an attacker could.
    const { publicKey, privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 1024 });
    const segment = (value: object) => base64url.encode(JSON.stringify(value));
    const input = `${segment({ typ: "dpop+jwt", alg: "RS256", jwk: publicKey.export({ format: "jwk" }) })}.${segment({
      jti: "j",
      htm: "POST",
      htu: URL_,
      iat: Math.floor(Date.now() / 1000),
      nonce: nonces.current(Date.now()),
    })}`;
    const proof = `${input}.${crypto.sign("sha256", Buffer.from(input), privateKey).toString("base64url")}`;
    assert.throws(() => verifyDpopProof(proof, rulesAt(Date.now())), rejection("invalid_dpop_proof", "key"));
  });

  test("two proofs by one key have distinct replay ids; the same proof the same", async () => {
    const keys = await DPoP.generateKeyPair("ES256");
    const nonce = nonces.current(Date.now());
    const a = await DPoP.generateProof(keys, URL_, "POST", nonce);
    const b = await DPoP.generateProof(keys, URL_, "POST", nonce);
    const rules = rulesAt(Date.now());
    assert.notEqual(verifyDpopProof(a, rules).replayId, verifyDpopProof(b, rules).replayId);
    assert.equal(verifyDpopProof(a, rules).replayId, verifyDpopProof(a, rules).replayId);
  });
});
