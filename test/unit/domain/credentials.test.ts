import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import { deriveKeyMaterial } from "../../../src/domain/shared/key-material.js";
import {
  generateClientId,
  generateClientSecret,
  hashClientSecret,
  verifyClientSecret,
} from "../../../src/domain/shared/client-secret.js";
import { openScimToken, sealScimToken } from "../../../src/domain/shared/scim-token.js";

const keys = deriveKeyMaterial(crypto.randomBytes(32));
const scimKeys = new Map([[keys.scimTokenKeyId, keys.scimTokenKey]]);

describe("client ids and secrets", () => {
  test("ids are random 26-character base32 strings; secrets carry 256 bits", () => {
    const ids = new Set(Array.from({ length: 1000 }, generateClientId));
    assert.equal(ids.size, 1000);
    for (const id of ids) assert.match(id, /^[a-z2-7]{26}$/);
    const secret = generateClientSecret();
    assert.equal(Buffer.from(secret, "base64url").length, 32);
  });

  test("only the right secret verifies; hashes are keyed by the pepper", () => {
    const secret = generateClientSecret();
    const stored = hashClientSecret(keys.secretPepper, secret);
    assert.equal(verifyClientSecret(keys.secretPepper, secret, stored), true);
    assert.equal(verifyClientSecret(keys.secretPepper, secret + "x", stored), false);
    assert.equal(verifyClientSecret(keys.secretPepper, secret, undefined), false, "unknown client");
    const otherPepper = deriveKeyMaterial(crypto.randomBytes(32)).secretPepper;
    assert.equal(verifyClientSecret(otherPepper, secret, stored), false);
    assert.notDeepEqual(hashClientSecret(otherPepper, secret), stored);
  });

  test("derived keys differ from each other and are stable for one master key", () => {
    const master = crypto.randomBytes(32);
    const a = deriveKeyMaterial(master);
    const b = deriveKeyMaterial(master);
    // The pepper is a KeyObject (no enumerable fields to compare): its bytes are.
    const bytes = (k: typeof a) => ({ ...k, secretPepper: k.secretPepper.export() });
    assert.deepEqual(bytes(a), bytes(b));
    assert.notDeepEqual(bytes(a), bytes(deriveKeyMaterial(crypto.randomBytes(32))));
    assert.notDeepEqual(a.secretPepper.export(), a.scimTokenKey);
    assert.notDeepEqual(a.scimTokenKey, a.signingKeyEncryptionKey);
  });
});

describe("SCIM token envelopes", () => {
  const token = sealScimToken(keys.scimTokenKey, keys.scimTokenKeyId, { clientId: "abc123", secret: "s3cret" });

  test("the token is Base64 of the documented JSON envelope, plus version and key id", () => {
    const json = JSON.parse(Buffer.from(token, "base64").toString("utf8"));
    assert.deepEqual(Object.keys(json).sort(), ["clientId", "encryptedSecret", "kid", "scope", "v"]);
    assert.equal(json.scope, "scim");
    assert.equal(json.clientId, "abc123");
    assert.equal(json.kid, keys.scimTokenKeyId);
    assert.equal(token.includes("s3cret"), false);
    assert.equal(Buffer.from(token, "base64").toString("utf8").includes("s3cret"), false);
  });

  test("opens to the same client and secret", () => {
    assert.deepEqual(openScimToken(scimKeys, token), { clientId: "abc123", secret: "s3cret" });
  });

  test("every malformed or forged envelope is refused alike", () => {
    const json = JSON.parse(Buffer.from(token, "base64").toString("utf8"));
    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64");
    const flipped = Buffer.from(json.encryptedSecret, "base64url");
    flipped[flipped.length - 1]! ^= 1;
    const forged = [
      "",
      "not base64!",
      Buffer.from("not json").toString("base64"),
      encode([1, 2]),
      encode({ ...json, clientId: "someone-else" }), // re-pointed at another client: AAD mismatch
      encode({ ...json, encryptedSecret: flipped.toString("base64url") }),
      encode({ ...json, kid: "unknown" }),
      encode({ ...json, v: 2 }),
      encode({ ...json, scope: "admin" }),
      encode({ ...json, extra: 1 }),
      encode({ ...json, encryptedSecret: "AAAA" }),
      token.slice(0, -8),
      "A".repeat(5000),
    ];
    for (const candidate of forged) assert.equal(openScimToken(scimKeys, candidate), undefined, candidate.slice(0, 40));
    assert.equal(
      openScimToken(new Map([[keys.scimTokenKeyId, crypto.randomBytes(32)]]), token),
      undefined,
      "wrong key",
    );
  });
});
