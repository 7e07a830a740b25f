import crypto from "node:crypto";
import type { KeyMaterial } from "./key-material.js";

/**
 * Client identifiers and secrets. Secrets carry 256 bits from the CSPRNG, so a keyed fast hash
 * (HMAC-SHA-256 with a server-side pepper) is as strong as a slow password hash against
 * guessing, while keeping the token endpoint fast.
 */
export function generateClientId(): string {
  // 128 random bits, lower-case base32: reveals nothing (no counter, no time, no tenant).
  return base32(crypto.randomBytes(16));
}

export function generateClientSecret(): string {
  return crypto.randomBytes(32).toString("base64url");
}

export function hashClientSecret(pepper: KeyMaterial["secretPepper"], secret: string): Buffer {
  return crypto.createHmac("sha256", pepper).update(secret, "utf8").digest();
}

/** A keys-only client's secret hash: empty, which no presented secret can match (verifyClientSecret). */
export const NO_SECRET = Buffer.alloc(0);

/** Constant-time check; an absent hash still costs one comparison so unknown clients take as long. */
export function verifyClientSecret(
  pepper: KeyMaterial["secretPepper"],
  secret: string,
  storedHash: Buffer | undefined,
): boolean {
  const candidate = hashClientSecret(pepper, secret);
  const expected = storedHash && storedHash.length === candidate.length ? storedHash : DUMMY_HASH;
  return crypto.timingSafeEqual(candidate, expected) && expected !== DUMMY_HASH;
}

const DUMMY_HASH = crypto.randomBytes(32);

const ALPHABET = "abcdefghijklmnopqrstuvwxyz234567";

function base32(bytes: Buffer): string {
  let bits = 0;
  let value = 0;
  let out = "";
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  return out;
}
