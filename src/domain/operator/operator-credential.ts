import crypto from "node:crypto";

/**
 * The platform operator's bearer credential. Only its digest is kept in memory for comparison;
 * it is never logged.
 */
export class OperatorCredential {
  private readonly digest: Buffer;

  constructor(token: string) {
    this.digest = sha256(token);
  }

  /** Constant time: both sides are fixed-length digests. */
  matches(presented: string): boolean {
    return crypto.timingSafeEqual(sha256(presented), this.digest);
  }
}

function sha256(value: string): Buffer {
  return crypto.createHash("sha256").update(value, "utf8").digest();
}
