import assert from "node:assert/strict";
import crypto from "node:crypto";
import { beforeEach, describe, test } from "node:test";
import { decodeProtectedHeader } from "jose";
import { AccessTokens } from "../../../src/domain/tokens/access-tokens.js";
import { SigningKeyRing } from "../../../src/domain/tokens/signing-key-ring.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import { createDomainFixture, ISSUER, LEGACY_TTL, newApiUser, newTenant, tokenRequest, type DomainFixture, type ProvisionedApiUser } from "../../fakes/domain-fixture.js";

const notValid = { code: "USER_NOT_AUTHENTICATED", message: "The access token is not valid" } as const;

describe("SigningKeyRing", () => {
  let f: DomainFixture;
  let client: ProvisionedApiUser;
  beforeEach(async () => {
    f = await createDomainFixture();
    client = await newApiUser(f, (await newTenant(f)).tmcId);
  });

  /** Another instance of the deployment: same database, same master key. */
  const otherInstance = async (options: { encryptionKey?: Buffer; unknownKeyReloadIntervalMs?: number } = {}) => {
    const ring = new SigningKeyRing(
      f.uow,
      f.repos.signingKeys,
      options.encryptionKey ?? f.keys.signingKeyEncryptionKey,
      // -1: `Date.now() - lastReload > -1` always holds, so every unknown kid reloads (no real-time dependence).
      { maxTokenLifetimeSeconds: LEGACY_TTL, unknownKeyReloadIntervalMs: options.unknownKeyReloadIntervalMs ?? -1 },
      f.clock.now,
    );
    await ring.start();
    return { ring, tokens: new AccessTokens(ring, f.generations, ISSUER, f.clock.now) };
  };
  const issue = async () => (await f.tokenService.grant(client.user, tokenRequest())).accessToken;

  test("the first start creates one Ed25519 key; the JWKS publishes only its public half", async () => {
    assert.equal(f.store.db.signingKeys.rows.size, 1);
    const [row] = f.store.db.signingKeys.values();
    const { jwks } = f.signingKeys;
    assert.equal(jwks.keys.length, 1);
    assert.deepEqual(Object.keys(jwks.keys[0]!).sort(), ["alg", "crv", "kid", "kty", "use", "x"]);
    assert.deepEqual([jwks.keys[0]!.kid, jwks.keys[0]!.alg, jwks.keys[0]!.crv, jwks.keys[0]!.use], [row!.kid, "EdDSA", "Ed25519", "sig"]);
    assert.equal(f.signingKeys.signingKey.kid, row!.kid);
  });

  test("the private half is stored encrypted under the master key; another master key cannot load it", async () => {
    const [row] = f.store.db.signingKeys.values();
    assert.equal(row!.privateJwkCiphertext.includes('"d"'), false);
    assert.equal(Buffer.from(row!.privateJwkCiphertext, "base64url").toString("utf8").includes('"d"'), false);
    await assert.rejects(otherInstance({ encryptionKey: crypto.randomBytes(32) }), {
      message: `signing key ${row!.kid} cannot be decrypted: is MASTER_KEY the deployment's key?`,
    });
  });

  test("another instance starting on the same database loads the same key and verifies the first one's tokens", async () => {
    const other = await otherInstance();
    assert.equal(f.store.db.signingKeys.rows.size, 1);
    assert.equal(other.ring.signingKey.kid, f.signingKeys.signingKey.kid);
    assert.equal((await other.tokens.verify(await issue())).clientId, client.clientId);
  });

  test("rotation: the new key signs, the retired one verifies until the longest token lifetime (+5 min) has passed", async () => {
    const oldKid = f.signingKeys.signingKey.kid;
    const oldToken = await issue();
    const rotated = await f.signingKeys.rotate();
    assert.notEqual(rotated.kid, oldKid);
    assert.deepEqual(rotated.publishedKids, [rotated.kid, oldKid]);
    assert.equal(f.signingKeys.signingKey.kid, rotated.kid);
    assert.equal(decodeProtectedHeader(await issue()).kid, rotated.kid);
    const retired = f.store.db.signingKeys.rows.get(oldKid)!;
    assert.deepEqual([retired.retiredAt?.toISOString(), retired.notAfter?.toISOString()], ["2026-11-22T10:00:00.000Z", "2026-11-23T10:05:00.000Z"]);

    // The old token itself expires after an hour; the key outlives it.
    f.clock.advanceSeconds(30 * 60);
    assert.equal((await f.accessTokens.verify(oldToken)).clientId, client.clientId);

    f.clock.set("2026-11-23T10:05:00.000Z");
    await f.signingKeys.reload();
    assert.deepEqual(f.signingKeys.jwks.keys.map((k) => k.kid), [rotated.kid]);
  });

  test("an instance that meets a key id it does not know reloads and verifies; an unknown kid after reloading is refused", async () => {
    const other = await otherInstance();
    await f.signingKeys.rotate();
    const token = await issue();
    assert.equal(other.ring.jwks.keys.length, 1, "the other instance has not seen the rotation yet");
    assert.equal((await other.tokens.verify(token)).clientId, client.clientId);
    assert.equal(other.ring.jwks.keys.length, 2);

    const [header, payload, signature] = token.split(".");
    const json = JSON.parse(Buffer.from(header!, "base64url").toString("utf8")) as Record<string, unknown>;
    const unknownKid = `${Buffer.from(JSON.stringify({ ...json, kid: "no-such-kid" })).toString("base64url")}.${payload}.${signature}`;
    await rejectsWith(other.tokens.verify(unknownKid), notValid);
  });

  test("nothing is served before start", () => {
    const ring = new SigningKeyRing(f.uow, f.repos.signingKeys, f.keys.signingKeyEncryptionKey, { maxTokenLifetimeSeconds: 60, unknownKeyReloadIntervalMs: 0 }, f.clock.now);
    assert.throws(() => ring.jwks, { message: "signing keys are not loaded" });
    assert.throws(() => ring.signingKey, { message: "signing keys are not loaded" });
  });
});
