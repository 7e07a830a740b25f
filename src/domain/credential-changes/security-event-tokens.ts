import { SignJWT, type CryptoKey } from "jose";
import type { LoggedChange } from "./credential-change-reader.js";
import { SIGNING_ALG } from "../tokens/model.js";

/** CAEP 1.0: an API user's client secret was rotated (`update`) or revoked/removed (`revoke`). */
export const CAEP_CREDENTIAL_CHANGE = "https://schemas.openid.net/secevent/caep/event-type/credential-change";
/** CAEP 1.0: a session ended; here the "session" is one access token, named by a `jwt_id` subject. */
export const CAEP_SESSION_REVOKED = "https://schemas.openid.net/secevent/caep/event-type/session-revoked";
/** RFC 8417 section 2.3: the `typ` header of a Security Event Token. */
export const SET_TYPE = "secevent+jwt";
/** The credential_type of an API user's credential (CAEP lets transmitter and receiver agree on others). */
export const CLIENT_SECRET_CREDENTIAL = "client_secret";

/** The SET's subject and event for one change (what the receiver acts on), as JSON. */
export function securityEventOf(
  issuer: string,
  change: LoggedChange,
): {
  readonly subId: Record<string, string>;
  readonly events: Record<string, Record<string, unknown>>;
} {
  if (change.kind === "credential_changed") {
    return {
      // The API user as access tokens name it: their `client_id` claim.
      subId: { format: "opaque", id: change.clientId },
      events: {
        [CAEP_CREDENTIAL_CHANGE]: {
          credential_type: CLIENT_SECRET_CREDENTIAL,
          change_type: change.generation === undefined ? "revoke" : "update",
          event_timestamp: eventTimestampOf(change.changedAt),
          // Extension member: the generation valid now (tokens' `gen` claim); absent when revoked.
          ...(change.generation !== undefined ? { credential_generation: change.generation } : {}),
        },
      },
    };
  }
  return {
    // SSF 1.0's JWT ID subject: the access token by its issuer and jti.
    subId: { format: "jwt_id", iss: issuer, jti: change.jti },
    events: {
      [CAEP_SESSION_REVOKED]: {
        event_timestamp: eventTimestampOf(change.changedAt),
        // Extension member: when the token expires anyway (a receiver may forget the jti then).
        token_expires_at: Math.floor(change.expiresAt.getTime() / 1000),
      },
    },
  };
}

/**
 * The change's time in whole seconds, rounded up: a receiver that knows only SSF refuses the
 * subject's tokens with `iat` before it, so no token issued before the change (its `iat` is at
 * most the change's second) is accepted; one issued later in that same second is refused too,
 * until the receiver reads the generation (the safe side).
 */
export function eventTimestampOf(changedAt: Date): number {
  return Math.ceil(changedAt.getTime() / 1000);
}

/** The SET's jti: the change's number, so a redelivered SET keeps it (unique within the receiver's feed). */
export const setIdOf = (seq: number): string => String(seq);

/** The change number a jti names, or undefined when it is not one of this feed's jtis. */
export function seqOfSetId(jti: string): number | undefined {
  if (!/^[1-9]\d{0,15}$/.test(jti)) return undefined;
  const seq = Number(jti);
  return Number.isSafeInteger(seq) ? seq : undefined;
}

/** Signs one SET (RFC 8417) for `audience` with the key that signs access tokens now. */
export async function signSecurityEvent(
  change: LoggedChange,
  context: { readonly issuer: string; readonly audience: string; readonly now: Date },
  signingKey: { readonly kid: string; readonly key: CryptoKey },
): Promise<string> {
  const { subId, events } = securityEventOf(context.issuer, change);
  return new SignJWT({ sub_id: subId, events, txn: String(change.seq) })
    .setProtectedHeader({ alg: SIGNING_ALG, typ: SET_TYPE, kid: signingKey.kid })
    .setIssuer(context.issuer)
    .setAudience(context.audience)
    .setIssuedAt(Math.floor(context.now.getTime() / 1000))
    .setJti(setIdOf(change.seq))
    .sign(signingKey.key);
}
