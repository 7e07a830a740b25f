import type { JSONWebKeySet } from "jose";
export type ApiUserRole = "TMC_ADMIN" | "COMPANY_ADMIN";
export type ApiUserCredentialType = "CLIENT_CREDENTIALS" | "SCIM_TOKEN";

/** A machine identity of a TMC: a client id and a credential (client secret or SCIM token). */
export interface ApiUser {
  readonly clientId: string;
  readonly tmcId: string;
  /** The company of a COMPANY_ADMIN. */
  readonly orgId: string | undefined;
  readonly role: ApiUserRole;
  readonly credentialType: ApiUserCredentialType;
  /** HMAC of the secret under the server pepper; never the secret. Empty: no secret (keys only). */
  readonly secretHash: Buffer;
  /** Bumped on rotation; every token carries the generation it was issued under. */
  readonly credentialGeneration: number;
  /** The public keys its client assertions are signed with (private_key_jwt); undefined: none registered. */
  readonly publicKeys?: JSONWebKeySet;
  /** RFC 9449 5.2 (client metadata dpop_bound_access_tokens): every token request must carry a DPoP proof. */
  readonly dpopBoundAccessTokens: boolean;
  /** Or the URL its public keys are fetched from (never both). */
  readonly jwksUri?: string;
}

export interface NewApiUser {
  readonly clientId: string;
  readonly orgId: string | undefined;
  readonly role: ApiUserRole;
  readonly credentialType: ApiUserCredentialType;
  readonly secretHash: Buffer;
  /** clientId of the creating admin, or "operator". */
  readonly createdBy: string;
}

/** The credential is in the result exactly once: it is never stored or shown again. */
export interface CreatedApiUser {
  readonly clientId: string;
  readonly clientSecret?: string;
  readonly scimToken?: string;
}

/** Who asks for an API-user change: a TMC admin's principal, reduced to what the rules need. */
export interface ApiUserAdminCaller {
  readonly clientId: string;
  readonly tmcId: string;
}

export interface CreateApiUserCommand {
  readonly tmcId: string;
  readonly orgId: string | undefined;
  readonly role: ApiUserRole;
  readonly credentialType: ApiUserCredentialType;
  /** clientId of the calling admin, or "operator". */
  readonly actor: string;
  readonly requestId: string;
}

export type { ClientKeyRegistration, RegisteredClientKeys } from "../shared/client-key-registration.js";
