import type { Tx } from "../shared/unit-of-work.js";
import type { CredentialStateSource } from "../tokens/ports.js";
import { credentialHolderOf, jtiOfTokenCredential, type CredentialState } from "../tokens/model.js";
import type { CredentialChangeLog, RevokedTokenRepository } from "../tokens/ports.js";

/** A change of the log that can invalidate access tokens, with the state it left as read now. */
export type LoggedChange =
  | {
      readonly kind: "credential_changed";
      readonly seq: number;
      readonly changedAt: Date;
      readonly clientId: string;
      /** The API user's current generation; undefined: revoked or removed. */
      readonly generation: number | undefined;
    }
  | {
      readonly kind: "token_revoked";
      readonly seq: number;
      readonly changedAt: Date;
      readonly jti: string;
      readonly expiresAt: Date;
    };

/** One page of the log: its token-invalidating changes, and the number of the last change read (`after` when none). */
export interface ChangePage {
  readonly changes: readonly LoggedChange[];
  readonly last: number;
  /** The page was full: there may be more changes after `last`. */
  readonly full: boolean;
}

/**
 * Reads the numbered credential-change log as the changes that can invalidate tokens (the one
 * reading of it, for the change stream and SET polling): an API user's change with its current
 * generation, a single token's revocation with its expiry; resource servers' own changes (they
 * hold no tokens) are passed over, but still read, so `last` moves past them.
 */
export class CredentialChangeReader {
  constructor(
    private readonly deps: {
      readonly changes: CredentialChangeLog;
      readonly states: CredentialStateSource;
      readonly revokedTokens: RevokedTokenRepository;
    },
  ) {}

  async page(tx: Tx, after: number, limit: number): Promise<ChangePage> {
    const batch = await this.deps.changes.since(tx, after, limit);
    const ids = [...new Set(batch.map((c) => c.clientId))];
    const apiUsers = ids.filter((id) => credentialHolderOf(id) === "API_USER");
    const jtis = ids.filter((id) => credentialHolderOf(id) === "ACCESS_TOKEN").map(jtiOfTokenCredential);
    const states =
      apiUsers.length > 0 ? await this.deps.states.credentialStates(tx, apiUsers) : new Map<string, CredentialState>();
    const revoked =
      jtis.length > 0
        ? await this.deps.revokedTokens.revocations(tx, jtis)
        : new Map<string, { readonly expiresAt: Date }>();
    const changes: LoggedChange[] = [];
    for (const { seq, clientId, changedAt } of batch) {
      const holder = credentialHolderOf(clientId);
      if (holder === "API_USER") {
        changes.push({
          kind: "credential_changed",
          seq,
          changedAt,
          clientId,
          generation: states.get(clientId)?.generation,
        });
      } else if (holder === "ACCESS_TOKEN") {
        const jti = jtiOfTokenCredential(clientId);
        const revocation = revoked.get(jti);
        if (revocation) changes.push({ kind: "token_revoked", seq, changedAt, jti, expiresAt: revocation.expiresAt });
      }
    }
    return { changes, last: batch.length > 0 ? batch[batch.length - 1]!.seq : after, full: batch.length === limit };
  }
}
