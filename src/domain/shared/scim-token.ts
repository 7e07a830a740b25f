import { isWellFormed, open, seal } from "./aead.js";

/**
 * SCIM bearer tokens: Base64 of a JSON envelope, as the platform documents it
 * ({"scope":"scim","clientId":...,"encryptedSecret":...}), plus a format version and the id of
 * the encryption key so that key can rotate. The secret inside is AES-256-GCM encrypted with
 * the clientId as associated data, so an envelope cannot be re-pointed at another client.
 */
export interface ScimEnvelope {
  readonly clientId: string;
  readonly secret: string;
}

interface EnvelopeJson {
  v: number;
  kid: string;
  scope: string;
  clientId: string;
  encryptedSecret: string;
}

const VERSION = 1;

/**
 * The clientIds an envelope can carry: 1..256 (the contract's limit) RFC 3986 unreserved
 * characters. The service's own are 26 lower-case base32 characters (generateClientId); nothing
 * else (no lone surrogate, no control or non-ASCII character) is ever sealed or opened, so the
 * clientId an envelope names is exactly the one its secret was sealed for.
 */
const CLIENT_ID = /^[A-Za-z0-9._~-]{1,256}$/;

/** Throws (a programming error) for a clientId outside that alphabet or a secret that is not well-formed text. */
export function sealScimToken(key: Buffer, keyId: string, envelope: ScimEnvelope): string {
  if (!CLIENT_ID.test(envelope.clientId))
    throw new TypeError("A SCIM token's clientId must be 1 to 256 of A-Z a-z 0-9 . _ ~ -");
  // A lone surrogate would not survive UTF-8: the token would open to another secret.
  if (!isWellFormed(envelope.secret)) throw new TypeError("A SCIM token's secret must be well-formed text");
  const json: EnvelopeJson = {
    v: VERSION,
    kid: keyId,
    scope: "scim",
    clientId: envelope.clientId,
    encryptedSecret: seal(key, Buffer.from(envelope.secret, "utf8"), envelope.clientId).toString("base64url"),
  };
  return Buffer.from(JSON.stringify(json), "utf8").toString("base64");
}

/** Strict decode; undefined for anything malformed, forged or sealed under an unknown key. */
export function openScimToken(keys: ReadonlyMap<string, Buffer>, token: string): ScimEnvelope | undefined {
  if (token.length > 4096 || !/^[A-Za-z0-9+/]+={0,2}$/.test(token)) return undefined;
  // Only the exact string issued: Node's decoder also takes a token with its padding cut or
  // other trailing bits, so the decoded bytes must encode back to the very same text.
  const bytes = Buffer.from(token, "base64");
  if (bytes.toString("base64") !== token) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString("utf8"));
  } catch {
    return undefined;
  }
  if (!isEnvelope(json) || json.v !== VERSION || json.scope !== "scim") return undefined;
  const key = keys.get(json.kid);
  if (!key) return undefined;
  // The clientId is the associated data: an envelope cannot be re-pointed at another client.
  const secret = open(key, Buffer.from(json.encryptedSecret, "base64url"), json.clientId);
  return secret ? { clientId: json.clientId, secret: secret.toString("utf8") } : undefined;
}

function isEnvelope(value: unknown): value is EnvelopeJson {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const v = value as Record<string, unknown>;
  const keys = Object.keys(v).sort().join(",");
  return (
    keys === "clientId,encryptedSecret,kid,scope,v" &&
    typeof v.v === "number" &&
    typeof v.kid === "string" &&
    typeof v.scope === "string" &&
    typeof v.clientId === "string" &&
    CLIENT_ID.test(v.clientId) &&
    typeof v.encryptedSecret === "string" &&
    /^[A-Za-z0-9_-]+$/.test(v.encryptedSecret)
  );
}
