import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { ConfigError } from "./config.js";

/**
 * Server-side keys, all derived (HKDF-SHA-256) from one master key so an operator manages a
 * single secret. Every instance of a deployment must share MASTER_KEY; on the embedded default
 * it is generated once and kept in DATA_DIR with owner-only permissions.
 */
export interface KeyMaterial {
  /** HMAC key for client-secret hashes ("pepper"): a stolen table alone verifies nothing. */
  readonly secretPepper: Buffer;
  /** AES-256-GCM key for the secret inside SCIM tokens. */
  readonly scimTokenKey: Buffer;
  /** AES-256-GCM key for signing keys' private parts at rest. */
  readonly signingKeyEncryptionKey: Buffer;
  /** Short public id of the SCIM key, written into envelopes so the key can rotate. */
  readonly scimTokenKeyId: string;
}

export function deriveKeyMaterial(masterKey: Buffer): KeyMaterial {
  const derive = (label: string) => Buffer.from(crypto.hkdfSync("sha256", masterKey, Buffer.alloc(0), label, 32));
  const scimTokenKey = derive("scim-token-encryption/v1");
  return {
    secretPepper: derive("client-secret-pepper/v1"),
    scimTokenKey,
    signingKeyEncryptionKey: derive("signing-key-encryption/v1"),
    scimTokenKeyId: crypto.createHash("sha256").update(scimTokenKey).digest("hex").slice(0, 12),
  };
}

export function loadMasterKey(masterKeyBase64: string | undefined, dataDir: string): Buffer {
  if (masterKeyBase64 !== undefined) return decodeMasterKey(masterKeyBase64, "MASTER_KEY");
  const file = path.join(dataDir, "master.key");
  return decodeMasterKey(readOrCreateSecretFile(file, () => crypto.randomBytes(32).toString("base64")), file);
}

function decodeMasterKey(value: string, source: string): Buffer {
  const key = Buffer.from(value.trim(), "base64");
  if (key.length < 32) throw new ConfigError(`${source} must be base64 of at least 32 random bytes`);
  return key;
}

/** Reads a secret kept in DATA_DIR, creating it (mode 0600) on first use; safe if two processes race. */
export function readOrCreateSecretFile(file: string, generate: () => string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    fs.writeFileSync(file, generate() + "\n", { flag: "wx", mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  return fs.readFileSync(file, "utf8").trim();
}
