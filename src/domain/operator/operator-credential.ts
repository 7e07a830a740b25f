import crypto from "node:crypto";
import path from "node:path";
import { readOrCreateSecretFile } from "../../config/key-material.js";

/**
 * The platform operator's bearer credential. Comes from OPERATOR_TOKEN, or is generated on
 * first start and kept in DATA_DIR/operator-token (mode 0600) for the local CLI. Only its
 * digest is kept in memory for comparison; it is never logged.
 */
export class OperatorCredential {
  private readonly digest: Buffer;

  constructor(token: string) {
    this.digest = sha256(token);
  }

  static load(operatorToken: string | undefined, dataDir: string): { credential: OperatorCredential; token: string } {
    const token = operatorToken ?? readOrCreateSecretFile(operatorTokenFile(dataDir), () => crypto.randomBytes(32).toString("base64url"));
    return { credential: new OperatorCredential(token), token };
  }

  /** Constant time: both sides are fixed-length digests. */
  matches(presented: string): boolean {
    return crypto.timingSafeEqual(sha256(presented), this.digest);
  }
}

export function operatorTokenFile(dataDir: string): string {
  return path.join(dataDir, "operator-token");
}

function sha256(value: string): Buffer {
  return crypto.createHash("sha256").update(value, "utf8").digest();
}
