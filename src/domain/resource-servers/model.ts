import type { JSONWebKeySet } from "jose";

/**
 * Resource servers: the platform's other services (the "protected services" that accept this
 * service's tokens), each an identity of its own here. Not API users: they obtain no tokens,
 * belong to no TMC and count against no limit. They authenticate with a client id and secret of
 * their own, or with client assertions signed by keys they registered (private_key_jwt), to check
 * the tokens addressed to their audiences.
 */

/**
 * Every resource server's client id starts with it. API users' ids are lower-case base32 with no
 * '-', so the two id spaces never overlap: an API user's credential can never be taken for a
 * resource server's, and the credential machinery tells whose state an id names from the id alone.
 */
export const RESOURCE_SERVER_ID_PREFIX = "rs-";

export function isResourceServerId(id: string): boolean {
  return id.startsWith(RESOURCE_SERVER_ID_PREFIX);
}

/** The registration's bounds (the contract's buf.validate rules say the same). */
export const RESOURCE_SERVER_NAME_MAX_LENGTH = 200;
export const MAX_AUDIENCES_PER_RESOURCE_SERVER = 20;
export const AUDIENCE_MAX_LENGTH = 512;

/** An active resource server as authentication sees it. */
export interface ResourceServer {
  readonly clientId: string;
  readonly name: string;
  /** The audience URIs it serves (sorted): a token is for it when its `aud` names one of them. */
  readonly audiences: readonly string[];
  /** HMAC of the secret under the server pepper; never the secret. Empty: no secret (keys only). */
  readonly secretHash: Buffer;
  /** Bumped on rotation; removal leaves it without one. */
  readonly credentialGeneration: number;
  /** The public keys its client assertions are signed with (private_key_jwt); undefined: none registered inline. */
  readonly publicKeys?: JSONWebKeySet;
  /** The URL of its key set (private_key_jwt by jwks_uri), fetched as RemoteKeySets allows; undefined: none. */
  readonly jwksUri?: string;
}

/** An active resource server as the operator reads it: never its secret. */
export interface ResourceServerListing {
  readonly clientId: string;
  readonly name: string;
  readonly audiences: readonly string[];
  readonly createdAt: Date;
  /** Who registered it ("operator"). */
  readonly createdBy: string;
  readonly rotatedAt: Date | undefined;
  /** Its inline keys' ids (private_key_jwt); empty: it authenticates with its secret, or by jwksUri. */
  readonly keyIds: readonly string[];
  /** The URL of its key set when registered by URL (private_key_jwt by jwks_uri). */
  readonly jwksUri?: string;
}

export interface NewResourceServer {
  readonly clientId: string;
  readonly name: string;
  /** NO_SECRET for a server registered with keys. */
  readonly secretHash: Buffer;
  readonly publicKeys?: JSONWebKeySet;
  readonly jwksUri?: string;
  readonly createdBy: string;
}

/**
 * The answer of a registration or a rotation: the secret is in it this once, never stored or shown
 * again ("" for a server registered with keys, which has none).
 */
export interface ResourceServerCredential {
  readonly clientId: string;
  readonly clientSecret: string;
}
