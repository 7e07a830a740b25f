import type { TenantScope } from "../../../domain/shared/tenant-scope.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import type { TrustedIssuer } from "../../../domain/tokens/model.js";
import type { TrustedIssuerRepository } from "../../../domain/tokens/ports.js";
import type { TrustedIssuerRow } from "../tables.js";
import { knexOf } from "../unit-of-work.js";

export class PostgresTrustedIssuerRepository implements TrustedIssuerRepository {
  /** Registers the issuer, or replaces its registration and raises its registration number. */
  async upsert(tx: Tx, scope: TenantScope, issuer: TrustedIssuer): Promise<void> {
    const knex = knexOf(tx);
    const registered = {
      jwks_uri: issuer.jwksUri ?? null,
      jwks: issuer.jwks ? JSON.stringify(issuer.jwks) : null,
      audience: issuer.audience ?? null,
      company_id: issuer.companyId ?? null,
    };
    await knex("trusted_issuers")
      .insert({ tmc_id: scope.tmcId, issuer: issuer.issuer, ...registered })
      .onConflict(["tmc_id", "issuer"])
      .merge({ ...registered, registration: knex.raw("trusted_issuers.registration + 1") });
  }

  async find(tx: Tx, scope: TenantScope, issuer: string): Promise<TrustedIssuer | undefined> {
    const row = await knexOf(tx)<TrustedIssuerRow>("trusted_issuers").where({ tmc_id: scope.tmcId, issuer }).first();
    return row && toIssuer(row);
  }

  async list(tx: Tx, scope: TenantScope): Promise<TrustedIssuer[]> {
    // Byte order (C collation), the same on every database's default collation.
    const rows = await knexOf(tx)<TrustedIssuerRow>("trusted_issuers")
      .where({ tmc_id: scope.tmcId })
      .orderByRaw('issuer collate "C"');
    return rows.map(toIssuer);
  }

  async remove(tx: Tx, scope: TenantScope, issuer: string): Promise<boolean> {
    // RETURNING: the embedded driver does not report a row count for DELETE.
    const deleted = await knexOf(tx)<TrustedIssuerRow>("trusted_issuers")
      .where({ tmc_id: scope.tmcId, issuer })
      .delete()
      .returning("issuer");
    return deleted.length > 0;
  }
}

function toIssuer(row: TrustedIssuerRow): TrustedIssuer {
  return {
    issuer: row.issuer,
    jwksUri: row.jwks_uri ?? undefined,
    jwks: row.jwks ?? undefined,
    audience: row.audience ?? undefined,
    companyId: row.company_id ?? undefined,
    registration: row.registration,
  };
}
