import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { NewSigningKey, SigningKeyRecord } from "../../../domain/tokens/model.js";
import type { SigningKeyRepository } from "../../../domain/tokens/ports.js";
import type { SigningKeyRow } from "../tables.js";
import { knexOf } from "../unit-of-work.js";

/** Arbitrary constant: the transaction-level advisory lock that lets one rotation run at a time. */
const ROTATION_LOCK_KEY = 727_501_115;

export class PostgresSigningKeyRepository implements SigningKeyRepository {
  constructor(private readonly channel: string) {}

  async listPublished(tx: Tx, now: Date): Promise<SigningKeyRecord[]> {
    const rows = await knexOf(tx)<SigningKeyRow>("signing_keys")
      .where((q) => {
        q.whereNull("not_after").orWhere("not_after", ">", now);
      })
      .orderBy("activates_at", "desc")
      .orderBy("created_at", "desc")
      .orderBy("kid", "desc");
    return rows.map((r) => ({
      kid: r.kid,
      alg: r.alg,
      publicJwk: r.public_jwk,
      privateJwkCiphertext: r.private_jwk_ciphertext,
      createdAt: new Date(r.created_at),
      activatesAt: new Date(r.activates_at),
      retiredAt: r.retired_at === null ? undefined : new Date(r.retired_at),
      notAfter: r.not_after === null ? undefined : new Date(r.not_after),
    }));
  }

  async lockForRotation(tx: Tx): Promise<void> {
    await knexOf(tx).raw("select pg_advisory_xact_lock(?)", [ROTATION_LOCK_KEY]);
  }

  async insert(tx: Tx, key: NewSigningKey): Promise<void> {
    await knexOf(tx)("signing_keys").insert({
      kid: key.kid,
      alg: key.alg,
      public_jwk: key.publicJwk,
      private_jwk_ciphertext: key.privateJwkCiphertext,
      created_at: key.createdAt,
      activates_at: key.activatesAt,
    });
  }

  async retireAll(
    tx: Tx,
    retiredAt: Date,
    notAfter: Date,
    options: { readonly except: string; readonly withdraw: boolean },
  ): Promise<void> {
    const db = knexOf(tx);
    await db("signing_keys")
      .whereNull("retired_at")
      .whereNot("kid", options.except)
      .update({ retired_at: retiredAt, not_after: notAfter });
    if (options.withdraw) {
      await db("signing_keys")
        .whereNot("kid", options.except)
        .where((q) => {
          q.whereNull("not_after").orWhere("not_after", ">", notAfter);
        })
        .update({ not_after: notAfter });
    }
  }

  async announceChange(tx: Tx): Promise<void> {
    await knexOf(tx).raw("select pg_notify(?, ?)", [this.channel, "signing-keys"]);
  }
}

/** The NOTIFY channel of one deployment's signing-key changes (beside its credential-change channel). */
export function signingKeyChangeChannel(schema: string): string {
  return `auth_signing_keys_${schema}`.slice(0, 63);
}
