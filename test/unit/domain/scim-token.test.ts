import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import { open, seal } from "../../../src/domain/shared/aead.js";
import { deriveKeyMaterial } from "../../../src/domain/shared/key-material.js";
import { openScimToken, sealScimToken } from "../../../src/domain/shared/scim-token.js";

/*
 * Regressions found by test/fuzz/scim-envelope-fuzz.test.ts: an empty secret made a token that
 * did not open (an off-by-one in aead.open), and the clientId binding went through UTF-8, which
 * turns every lone surrogate into U+FFFD, so an envelope sealed for "\ud800" opened as "\ud801".
 */

const material = deriveKeyMaterial(crypto.randomBytes(32));
const keys = new Map([[material.scimTokenKeyId, material.scimTokenKey]]);
const decode = (token: string) => JSON.parse(Buffer.from(token, "base64").toString("utf8")) as Record<string, unknown>;
const encode = (json: unknown) => Buffer.from(JSON.stringify(json), "utf8").toString("base64");

/** What holding the key allows: an envelope sealed with raw AES-256-GCM, the clientId's UTF-8 as associated data. */
function forge(clientId: string, secret: string): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv("aes-256-gcm", material.scimTokenKey, iv);
  cipher.setAAD(Buffer.from(clientId, "utf8"));
  const sealed = Buffer.concat([iv, cipher.update(secret, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return encode({
    v: 1,
    kid: material.scimTokenKeyId,
    scope: "scim",
    clientId,
    encryptedSecret: sealed.toString("base64url"),
  });
}

describe("AEAD (aead.ts)", () => {
  test("an empty plaintext round-trips; anything shorter than iv ‖ tag is refused", () => {
    const key = crypto.randomBytes(32);
    const sealed = seal(key, Buffer.alloc(0), "ctx");
    assert.equal(sealed.length, 28);
    assert.deepEqual(open(key, sealed, "ctx"), Buffer.alloc(0));
    assert.equal(open(key, sealed.subarray(0, 27), "ctx"), undefined);
    assert.equal(open(key, sealed, "other"), undefined);
  });

  test("associated data must be well-formed text: sealing throws, opening refuses", () => {
    const key = crypto.randomBytes(32);
    assert.throws(() => seal(key, Buffer.from("x"), "id-\ud800"), TypeError);
    // Sealed the lossy way (UTF-8 of "\ud800" is EF BF BD, that of "\ud801" too): neither opens.
    const iv = crypto.randomBytes(12);
    const cipher = crypto.createCipheriv("aes-256-gcm", key, iv);
    cipher.setAAD(Buffer.from("\ud800", "utf8"));
    const sealed = Buffer.concat([iv, cipher.update("x"), cipher.final(), cipher.getAuthTag()]);
    assert.equal(open(key, sealed, "\ud800"), undefined);
    assert.equal(open(key, sealed, "\ud801"), undefined);
    assert.deepEqual(open(key, sealed, "\ufffd"), Buffer.from("x"), "the bytes bound were U+FFFD's");
  });
});

describe("SCIM token envelopes: what they bind", () => {
  test("an empty secret round-trips", () => {
    const token = sealScimToken(material.scimTokenKey, material.scimTokenKeyId, { clientId: "abc", secret: "" });
    assert.deepEqual(openScimToken(keys, token), { clientId: "abc", secret: "" });
  });

  test("an envelope cannot be re-pointed between clientIds that differ only in lone surrogates", () => {
    const repointed = encode({ ...decode(forge("\ud800", "s")), clientId: "\ud801" });
    assert.equal(openScimToken(keys, forge("\ud800", "s")), undefined);
    assert.equal(openScimToken(keys, repointed), undefined);
  });

  test("only clientIds of 1..256 RFC 3986 unreserved characters are sealed or opened", () => {
    for (const clientId of ["abcdefghijklmnopqrstuvwxyz", "A-Z.0_9~", "a".repeat(256)]) {
      assert.deepEqual(
        openScimToken(keys, sealScimToken(material.scimTokenKey, material.scimTokenKeyId, { clientId, secret: "s" })),
        { clientId, secret: "s" },
      );
      assert.deepEqual(
        openScimToken(keys, forge(clientId, "s")),
        { clientId, secret: "s" },
        "the forgery is a well-made token",
      );
    }
    for (const clientId of ["", "a".repeat(257), "\ud800", "a\udc00b", "a b", "a\u0000", "é", "a/b", "a+b", "😀"]) {
      assert.throws(
        () => sealScimToken(material.scimTokenKey, material.scimTokenKeyId, { clientId, secret: "s" }),
        TypeError,
        JSON.stringify(clientId),
      );
      assert.equal(openScimToken(keys, forge(clientId, "s")), undefined, JSON.stringify(clientId));
    }
  });

  test("a secret that is not well-formed text is refused when sealing (it would open to another one)", () => {
    assert.throws(
      () => sealScimToken(material.scimTokenKey, material.scimTokenKeyId, { clientId: "abc", secret: "s\ud800" }),
      TypeError,
    );
  });
});
