import type { JSONWebKeySet } from "jose";
import type { TenantScope } from "../shared/tenant-scope.js";
import type { Tx } from "../shared/unit-of-work.js";
import type { CredentialState } from "../tokens/model.js";
import type { NumberedChange } from "../tokens/ports.js";
import type { ApiUser, ApiUserCredentialType, ApiUserRole, NewApiUser } from "./model.js";

/** An active API user as the operator lists it: never its secret. */
export interface ApiUserListing {
  readonly clientId: string;
  readonly orgId: string | undefined;
  readonly role: ApiUserRole;
  readonly credentialType: ApiUserCredentialType;
  readonly createdAt: Date;
  /** clientId of the creating admin, or "operator". */
  readonly createdBy: string | undefined;
  readonly rotatedAt: Date | undefined;
  /**
   * When the client last got a token: its newest TOKEN_ISSUED audit event, kept on the user and
   * raised as the audit flush writes each batch (so it lags by the flush interval).
   */
  readonly lastTokenIssuedAt: Date | undefined;
  /** Every token request must carry a DPoP proof (RFC 9449 5.2). */
  readonly dpopBoundAccessTokens: boolean;
}

/**
 * A new credential generation: the secret's hash, and what else changes with it (undefined: kept).
 * Every change a cached client record could miss comes with a new generation (ClientRecordCache).
 */
export interface ApiUserCredentialChange {
  readonly secretHash: Buffer;
  readonly generation: number;
  /** A new key set (private_key_jwt): inline, or its URL (one set, the other null); null: none. */
  readonly publicKeys?: JSONWebKeySet | null;
  readonly jwksUri?: string | null;
  /** The DPoP policy (RFC 9449 5.2). */
  readonly dpopBoundAccessTokens?: boolean;
}

/** API users, active and revoked (revoked rows stay as tombstones so a clientId is never reused). */
export interface ApiUserRepository {
  insert(tx: Tx, scope: TenantScope, user: NewApiUser): Promise<void>;
  countActive(tx: Tx, scope: TenantScope): Promise<number>;
  /**
   * A page of the client ids of active users by creation time, then client id, with the number of
   * active users in all (the page and its total in one round trip).
   */
  listActive(
    tx: Tx,
    scope: TenantScope,
    page: { limit: number; offset: number },
  ): Promise<{ clientIds: string[]; total: number }>;
  /** The same page as `listActive`, with what the operator sees of each user, and the same total. */
  listActiveDetails(
    tx: Tx,
    scope: TenantScope,
    page: { limit: number; offset: number },
  ): Promise<{ users: ApiUserListing[]; total: number }>;
  /** Locks an active user of the tenant for the rest of the transaction. */
  lockActive(tx: Tx, scope: TenantScope, clientId: string): Promise<ApiUser | undefined>;
  setCredential(tx: Tx, scope: TenantScope, clientId: string, credential: ApiUserCredentialChange): Promise<void>;
  markRevoked(tx: Tx, scope: TenantScope, clientId: string): Promise<void>;
  /**
   * The active API user a presented credential names. Unscoped by nature: authentication is
   * how the tenant becomes known.
   */
  findActive(tx: Tx, clientId: string): Promise<ApiUser | undefined>;
  /**
   * The credential state of each known client among `clientIds`, revoked ones included (token
   * verification; unscoped for the same reason). Unknown ids are absent.
   */
  credentialStates(tx: Tx, clientIds: readonly string[]): Promise<Map<string, CredentialState>>;
}

/** Tells every instance about a credential change (implemented by the tokens area's CredentialGenerations). */
export interface CredentialChangePublisher {
  /** Numbers the change inside its transaction (last); every instance hears of the number at commit. */
  recordChange(tx: Tx, clientId: string): Promise<NumberedChange>;
  /** After commit, before the caller is answered: puts the committed state in the shared cache. */
  publish(clientId: string, change: NumberedChange): Promise<void>;
}

/** Refresh tokens die with their client (implemented by the tokens area's repository). */
export interface ClientRefreshTokens {
  revokeAllOfClient(tx: Tx, scope: TenantScope, clientId: string, now: Date): Promise<void>;
}
