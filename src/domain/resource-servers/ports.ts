import type { JSONWebKeySet } from "jose";
import type { Tx } from "../shared/unit-of-work.js";
import type { CredentialState } from "../tokens/model.js";
import type { NewResourceServer, ResourceServer, ResourceServerListing } from "./model.js";

/**
 * Resource servers, active and removed (a removed row stays as a tombstone: a client id is never
 * reused), and the audiences the active ones serve. No method is tenant-scoped: resource servers
 * belong to the platform, not to a TMC.
 */
export interface ResourceServerRepository {
  insert(tx: Tx, server: NewResourceServer): Promise<void>;
  /**
   * Makes `clientId` the server of each audience that no active resource server serves yet, and
   * returns the ones another serves already (those are left alone: the caller rolls back). An
   * audience registered concurrently by an uncommitted transaction is waited for, so of two
   * concurrent registrations of one audience exactly one gets it.
   */
  claimAudiences(tx: Tx, clientId: string, audiences: readonly string[]): Promise<string[]>;
  /** A page of the active servers by creation time, then client id, with their number in all (one round trip). */
  list(tx: Tx, page: { limit: number; offset: number }): Promise<{ servers: ResourceServerListing[]; total: number }>;
  /** One active server as the operator reads it. */
  get(tx: Tx, clientId: string): Promise<ResourceServerListing | undefined>;
  /** The active server a presented credential names (authentication). */
  findActive(tx: Tx, clientId: string): Promise<ResourceServer | undefined>;
  /** Locks an active server for the rest of the transaction. */
  lockActive(tx: Tx, clientId: string): Promise<ResourceServer | undefined>;
  /**
   * A new credential: a secret (`publicKeys` and `jwksUri` null: the keys go) or a key set, inline
   * or by URL (with NO_SECRET; the other one null).
   */
  setCredential(
    tx: Tx,
    clientId: string,
    credential: { secretHash: Buffer; generation: number; publicKeys: JSONWebKeySet | null; jwksUri: string | null },
  ): Promise<void>;
  /** Marks it removed (the tombstone stays) and frees its audiences. */
  markRemoved(tx: Tx, clientId: string): Promise<void>;
  /** The subset of `audiences` served by an active resource server (token requests naming an audience). */
  registeredAudiences(tx: Tx, audiences: readonly string[]): Promise<Set<string>>;
  /**
   * The credential state of each known server among `clientIds`, removed ones included (no
   * generation); unknown ids are absent.
   */
  credentialStates(tx: Tx, clientIds: readonly string[]): Promise<Map<string, CredentialState>>;
}

/** What token requests need of the registry: which of the audiences they name a resource server serves. */
export type RegisteredAudiences = Pick<ResourceServerRepository, "registeredAudiences">;
