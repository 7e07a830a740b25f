import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { WatchCredentialChangesResponseSchema } from "../../../gen/travel/auth/v2/auth_pb.js";
import type {
  ChangedCredential,
  ChangeStreamEvent,
  RevokedToken,
} from "../../domain/credential-changes/credential-change-stream.js";
import type { IssuedToken, Principal } from "../../domain/tokens/model.js";

export function tokenResponse(issued: IssuedToken) {
  return {
    accessToken: issued.accessToken,
    tokenType: issued.tokenType,
    expiresIn: issued.expiresIn,
    scope: issued.scope,
    refreshToken: issued.refreshToken ?? "",
    issuedTokenType: issued.issuedTokenType ?? "",
  };
}

/** RFC 7662 2.2: only `active` for an inactive token. */
export function introspectionResponse(principal: Principal | undefined) {
  if (!principal) return { active: false };
  return {
    active: true,
    scope: principal.scopes.join(" "),
    clientId: principal.clientId,
    // RFC 9449 6.2: a bound token is of type DPoP, and cnf names its key.
    tokenType: principal.confirmation ? "DPoP" : "Bearer",
    exp: principal.expiresAt,
    iat: principal.issuedAt,
    sub: principal.subject,
    aud: [...principal.audience],
    iss: principal.issuer,
    jti: principal.tokenId,
    tmcId: principal.tmcId,
    role: principal.role,
    orgId: principal.orgId ?? "",
    ...(principal.act ? { act: actorOf(principal.act) } : {}),
    ...(principal.confirmation ? { cnf: { jkt: principal.confirmation.jkt } } : {}),
  };
}

/** RFC 8693 `act` as the token carries it ({sub, act?: {…}}), nested as deep as the exchanges went. */
function actorOf(act: Record<string, unknown>): { sub: string; act?: ReturnType<typeof actorOf> } {
  const sub = typeof act.sub === "string" ? act.sub : "";
  const inner = act.act;
  return typeof inner === "object" && inner !== null
    ? { sub, act: actorOf(inner as Record<string, unknown>) }
    : { sub };
}

/** One event of the credential-change stream as the contract writes it (cursors in decimal, no generation: 0). */
export function changeEvent(event: ChangeStreamEvent): MessageInitShape<typeof WatchCredentialChangesResponseSchema> {
  const cursor = String(event.cursor);
  switch (event.kind) {
    case "credential_changed":
      return { cursor, event: { case: "credentialChanged" as const, value: changedCredential(event) } };
    case "token_revoked":
      return { cursor, event: { case: "tokenRevoked" as const, value: revokedToken(event) } };
    case "signing_keys_changed":
      return { cursor, event: { case: "signingKeysChanged" as const, value: {} } };
    case "heartbeat":
      return {
        cursor,
        event: {
          case: "heartbeat" as const,
          value: {
            serverTime: timestampFromDate(event.serverTime),
            lastEventCursor: event.sent.lastCursor === undefined ? "" : String(event.sent.lastCursor),
            eventsSent: BigInt(event.sent.count),
          },
        },
      };
    case "snapshot":
      return {
        cursor,
        event: {
          case: "snapshot" as const,
          value: {
            credentials: event.credentials.map(changedCredential),
            revokedTokens: event.revokedTokens.map(revokedToken),
            lastPage: event.lastPage,
          },
        },
      };
  }
}

const changedCredential = (c: ChangedCredential) => ({ clientId: c.clientId, generation: c.generation ?? 0 });
const revokedToken = (t: RevokedToken) => ({ jti: t.jti, expiresAt: timestampFromDate(t.expiresAt) });
