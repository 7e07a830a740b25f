import type { ApiUserRole } from "../api-users/model.js";
import { isResourceServerId } from "../resource-servers/model.js";
import type { ClientCredentials } from "../shared/client-credentials.js";

/** A credential a token depends on: the token is valid only while this is the client's generation. */
export type BoundCredential = readonly [clientId: string, generation: number];

export type SubjectKind = "CLIENT" | "USER";

/** What a verified access token says about its bearer. */
export interface Principal {
  /** The API user that obtained the token. */
  readonly clientId: string;
  readonly tmcId: string;
  readonly orgId: string | undefined;
  readonly role: ApiUserRole;
  readonly scopes: readonly string[];
  /** `sub`: the clientId itself, or the subject of an exchange (another client or a user id). */
  readonly subject: string;
  readonly subjectKind: SubjectKind;
  readonly audience: readonly string[];
  /** RFC 8693 `act`, outermost actor first. */
  readonly act: Record<string, unknown> | undefined;
  readonly credentials: readonly BoundCredential[];
  readonly tokenId: string;
  readonly issuer: string;
  readonly issuedAt: number;
  readonly expiresAt: number;
  /** RFC 9449 6.1 `cnf.jkt`: the thumbprint of the key a DPoP-bound token is bound to; undefined for a bearer token. */
  readonly confirmation: { readonly jkt: string } | undefined;
}

/** The only signature algorithm this service issues and accepts for its own tokens (access tokens and SETs). */
export const SIGNING_ALG = "EdDSA";

export const GRANT_CLIENT_CREDENTIALS = "client_credentials";
export const GRANT_TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
export const GRANT_REFRESH_TOKEN = "refresh_token";
export const SUPPORTED_GRANTS: readonly string[] = [
  GRANT_CLIENT_CREDENTIALS,
  GRANT_TOKEN_EXCHANGE,
  GRANT_REFRESH_TOKEN,
];
export const TOKEN_TYPE_ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token";
export const TOKEN_TYPE_JWT = "urn:ietf:params:oauth:token-type:jwt";
export const TOKEN_TYPE_ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token";

export type { ClientCredentials, PresentedCredentials } from "../shared/client-credentials.js";

export interface TokenRequest {
  readonly grantType: string;
  /** Parsed where the request entered (clientCredentialsOf). */
  readonly credentials: ClientCredentials;
  readonly scope: string;
  readonly audience: string;
  readonly subjectToken: string;
  readonly subjectTokenType: string;
  readonly refreshToken: string;
  /** RFC 8693 requested_token_type; empty when not asked. */
  readonly requestedTokenType?: string;
  /** RFC 8707 resource indicators (the parameter may repeat); empty when none is asked. */
  readonly resources?: readonly string[];
  /** The DPoP proof key's thumbprint, set by the token endpoint once the proof passed: the token is bound to it. */
  readonly boundKey?: string;
}

export interface IssuedToken {
  readonly accessToken: string;
  /** "DPoP" when the token is bound to the key of the request's DPoP proof (RFC 9449 5). */
  readonly tokenType: "Bearer" | "DPoP";
  readonly expiresIn: number;
  readonly scope: string;
  readonly refreshToken?: string;
  readonly issuedTokenType?: string;
}

/** A stored signing key; the private half is encrypted at rest. */
/**
 * One signing key and its life, every instant stored with it (Postgres is the truth, so every
 * instance computes the same state from the same row): published from `createdAt`, signing from
 * `activatesAt` until a newer key activates, verifying until `notAfter` (then dropped).
 */
export interface SigningKeyRecord {
  readonly kid: string;
  readonly alg: string;
  readonly publicJwk: Record<string, unknown>;
  readonly privateJwkCiphertext: string;
  readonly createdAt: Date;
  readonly activatesAt: Date;
  /** When a newer key took over signing (set when that key was scheduled); undefined while none has. */
  readonly retiredAt: Date | undefined;
  /** From this instant no token it signed can be valid: it leaves the JWKS and stops verifying. */
  readonly notAfter: Date | undefined;
}

export type NewSigningKey = Omit<SigningKeyRecord, "retiredAt" | "notAfter">;

export interface RefreshTokenRecord {
  readonly id: string;
  readonly tokenHash: Buffer;
  readonly familyId: string;
  readonly clientId: string;
  readonly subject: string;
  readonly subjectKind: SubjectKind;
  readonly scope: string;
  readonly audience: string;
  readonly boundCredentials: readonly BoundCredential[];
  /** The RFC 8693 `act` chain of the exchange, re-issued on every refresh. */
  readonly act: Record<string, unknown>;
  readonly expiresAt: Date;
  readonly usedAt: Date | undefined;
  readonly revokedAt: Date | undefined;
}

export type NewRefreshToken = Omit<RefreshTokenRecord, "usedAt" | "revokedAt">;

export interface TrustedIssuer {
  readonly issuer: string;
  readonly jwksUri: string | undefined;
  readonly jwks: { keys: unknown[] } | undefined;
  readonly audience: string | undefined;
  /** The one company whose users its tokens may name; undefined: any company of the TMC. */
  readonly companyId: string | undefined;
  /**
   * Raised by the store on every registration of the issuer (1 for the first; ignored on upsert):
   * the version of its key set held by URL, so registering it again drops what was held.
   */
  readonly registration?: number;
}

/**
 * A client's credential as of one change: its generation (undefined: revoked or unknown) and the
 * number of the change that made it so (0 before any change). The cache keeps the state with the
 * highest change number it was told, so an older state can never overwrite a newer one.
 */
export interface CredentialState {
  readonly generation: number | undefined;
  readonly changeSeq: number;
  /** How long a shared cache must keep this state at least (a revoked token's: until it expires); absent, the cache's default. */
  readonly ttlSeconds?: number;
}

/**
 * An access token revoked one by one (RFC 7009) takes part in credential checks as a credential
 * of its own, `jti:<jti>`: generation TOKEN_NOT_REVOKED while it is not revoked, none once it is.
 * Every token names its own, so revoking one is refused at once on every instance through the
 * same round trip that checks the API users' generations.
 */
export const tokenCredentialId = (jti: string): string => `jti:${jti}`;
export const isTokenCredentialId = (id: string): boolean => id.startsWith("jti:");
export const jtiOfTokenCredential = (id: string): string => id.slice("jti:".length);
export const TOKEN_NOT_REVOKED = 0;

/** Whose state a credential id names: an API user, a resource server (`rs-…`) or one access token (`jti:…`). */
export type CredentialHolder = "API_USER" | "RESOURCE_SERVER" | "ACCESS_TOKEN";

/**
 * The one dispatch rule of the credential machinery: where the state of a credential id is kept
 * (the state source reads it there, the change log stamps its change number there). The id spaces
 * never overlap: API users' ids are base32 with neither ':' nor '-'.
 */
export function credentialHolderOf(id: string): CredentialHolder {
  if (isTokenCredentialId(id)) return "ACCESS_TOKEN";
  if (isResourceServerId(id)) return "RESOURCE_SERVER";
  return "API_USER";
}

/** A revocation of one access token (RFC 7009), kept until the token would have expired. */
export interface RevokedAccessToken {
  readonly jti: string;
  /** The API user it was issued to. */
  readonly clientId: string;
  readonly expiresAt: Date;
}

/** The token settings (TOKEN_*, *_TTL_SECONDS, JWKS_*, SIGNING_KEY_*: src/config/config.ts reads them). */
export interface TokenConfig {
  /** `iss` of issued tokens; every instance of a deployment must use the same. */
  readonly issuer: string;
  /** The audience this service accepts in access tokens, and the default `aud` of new ones. */
  readonly audience: string;
  /** Further audiences clients may request tokens for (other APIs of the platform). */
  readonly allowedAudiences: readonly string[];
  readonly accessTokenTtlSeconds: number;
  /** Lifetime of tokens from the deprecated /get-auth-token (documented as 86400 s). */
  readonly legacyTokenTtlSeconds: number;
  readonly refreshTokenTtlSeconds: number;
  /** How long a credential generation cached in Redis lives before it is re-read from Postgres. */
  readonly credentialCacheSeconds: number;
  /** A token with an unknown `kid` reloads the signing keys at most this often. */
  readonly unknownKeyReloadIntervalMs: number;
  /**
   * How long `keys rotate` publishes the next signing key (JWKS, verification on every instance)
   * before any instance signs with it: longer than every JWKS cache downstream and than
   * SIGNING_KEY_RELOAD_INTERVAL_MS, so no verifier meets a token whose key it has not loaded.
   */
  readonly signingKeyPrepublishSeconds: number;
  /**
   * Fetching a JWKS by URL (a trusted issuer's, a client's jwks_uri): timeout, least time between
   * refetches (a client's: after a failure or for an unknown kid), and cache lifetime (its upper bound
   * for a client's set; the lower one bounds the max-age its server asks for).
   */
  readonly jwksFetchTimeoutMs: number;
  readonly jwksCooldownMs: number;
  readonly jwksCacheMaxAgeMs: number;
  readonly jwksCacheMinAgeMs: number;
  /** A client's jwks_uri may use http on a loopback host (development and tests); otherwise https only. */
  readonly jwksUriAllowHttpLoopback: boolean;
  /** Longest lifetime accepted from an external subject token (exp − iat). */
  readonly externalTokenMaxLifetimeSeconds: number;
  /** Credential-change streams one instance holds open at once, in all and per resource server. */
  readonly changeStreamMaxOpen: number;
  readonly changeStreamMaxOpenPerResourceServer: number;
  /** RFC 8936 polls (long or not) one resource server holds open on one instance at once. */
  readonly ssfPollMaxOpenPerResourceServer: number;
}

/** How long an issued token can be presented: the longer of the two access-token lifetimes. */
export function maxTokenLifetimeSeconds(tokens: Pick<TokenConfig, "accessTokenTtlSeconds" | "legacyTokenTtlSeconds">) {
  return Math.max(tokens.accessTokenTtlSeconds, tokens.legacyTokenTtlSeconds);
}

/**
 * How long the credential-change log is kept: a cached API-user state lives at most the cache's
 * TTL; a revoked token's must be republishable (after Redis lost it), and a change stream able to
 * resume, for as long as the token could be presented.
 */
export const credentialLogRetentionSeconds = (
  tokens: Pick<TokenConfig, "credentialCacheSeconds" | "accessTokenTtlSeconds" | "legacyTokenTtlSeconds">,
) => Math.max(tokens.credentialCacheSeconds, maxTokenLifetimeSeconds(tokens)) + 60;
