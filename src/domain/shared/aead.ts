import crypto from "node:crypto";

const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * AES-256-GCM: returns iv ‖ ciphertext ‖ tag. `aad` binds the ciphertext to its context. It must
 * be well-formed text (no lone surrogate): UTF-8 turns every lone surrogate into U+FFFD, so two
 * different ill-formed strings would bind to the same bytes, and a ciphertext sealed for one
 * would open for the other.
 */
export function seal(key: Buffer, plaintext: Buffer, aad: string): Buffer {
  if (!isWellFormed(aad)) throw new TypeError("AEAD associated data must be well-formed text (no lone surrogate)");
  const iv = crypto.randomBytes(IV_BYTES);
  const cipher = crypto.createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from(aad, "utf8"));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, ciphertext, cipher.getAuthTag()]);
}

/** Undefined when the input is malformed, tampered with, or sealed under another key or context. */
export function open(key: Buffer, sealed: Buffer, aad: string): Buffer | undefined {
  // An empty plaintext seals to exactly iv ‖ tag: shorter is malformed, that long is not.
  if (sealed.length < IV_BYTES + TAG_BYTES || !isWellFormed(aad)) return undefined;
  try {
    const decipher = crypto.createDecipheriv("aes-256-gcm", key, sealed.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(aad, "utf8"));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
  } catch {
    return undefined;
  }
}

/** No lone surrogate: the text survives UTF-8 unchanged (String.prototype.isWellFormed, ES2024). */
export function isWellFormed(text: string): boolean {
  return !/\p{Surrogate}/u.test(text);
}
