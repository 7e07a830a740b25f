import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { SigningKeyRecord } from "../../../domain/tokens/model.js";
import type { SigningKeyRepository } from "../../../domain/tokens/ports.js";
import type { SigningKeyRow } from "../tables.js";
import { knexOf } from "../unit-of-work.js";

export class PostgresSigningKeyRepository implements SigningKeyRepository {
  async listPublished(tx: Tx, now: Date): Promise<SigningKeyRecord[]> {
    const rows = await knexOf(tx)<SigningKeyRow>("signing_keys")
      .where((q) => q.whereNull("not_after").orWhere("not_after", ">", now))
      .orderBy("created_at", "desc")
      .orderBy("kid", "desc");
    return rows.map((r) => ({
      kid: r.kid,
      alg: r.alg,
      publicJwk: r.public_jwk,
      privateJwkCiphertext: r.private_jwk_ciphertext,
      retired: r.retired_at !== null,
    }));
  }

  async insert(tx: Tx, key: Omit<SigningKeyRecord, "retired">): Promise<void> {
    await knexOf(tx)("signing_keys").insert({
      kid: key.kid,
      alg: key.alg,
      public_jwk: key.publicJwk,
      private_jwk_ciphertext: key.privateJwkCiphertext,
    });
  }

  async retireAll(tx: Tx, now: Date, notAfter: Date): Promise<void> {
    await knexOf(tx)("signing_keys").whereNull("retired_at").update({ retired_at: now, not_after: notAfter });
  }
}
