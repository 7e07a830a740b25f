import type { ApiUserCredentialType, ApiUserRole } from "../../domain/api-users/model.js";

/**
 * Row types of the tables created by the migrations (snake_case, as stored). Rows never leave
 * store/: each repository maps them to the domain's model types.
 */
export interface TmcRow {
  id: string;
  name: string;
  max_api_users: number;
  created_at: Date;
  updated_at: Date;
}

export interface CompanyRow {
  id: string;
  tmc_id: string;
  name: string;
  created_at: Date;
}

export interface UserRow {
  id: string;
  company_id: string;
  tmc_id: string;
  email: string;
  email_normalized: string;
  given_name: string;
  family_name: string;
  is_active: boolean;
  external_id: string | null;
  /** SCIM displayName and name.formatted as the IdP set them (users_scim_names migration). */
  display_name: string | null;
  name_formatted: string | null;
  profile: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  /** Set by a SCIM DELETE (users_scim migration): hidden from SCIM, still readable as an inactive profile. */
  scim_deleted_at: Date | null;
  /** SCIM attributes the profile has no place for, as the IdP sent them (users_scim_attributes migration). */
  scim_attributes: Record<string, unknown> | null;
}

export interface ApiUserRow {
  client_id: string;
  tmc_id: string;
  org_id: string | null;
  role: ApiUserRole;
  credential_type: ApiUserCredentialType;
  secret_hash: Buffer;
  credential_generation: number;
  /** jsonb: the client's public JWK Set (private_key_jwt), or null. */
  public_keys: unknown;
  /** RFC 9449 5.2: every token request must carry a DPoP proof. */
  dpop_bound_access_tokens: boolean;
  /** The URL of its JWK Set (private_key_jwt by jwks_uri), or null. */
  jwks_uri: string | null;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
  rotated_at: Date | null;
  revoked_at: Date | null;
  /** bigint: a string from pg, a number from PGlite. */
  change_seq: string | number;
}

/** When an API user last got a token, raised by each audit batch that holds a TOKEN_ISSUED event of it. */
export interface ApiUserTokenActivityRow {
  client_id: string;
  tmc_id: string;
  last_token_issued_at: Date;
}

export interface AuditEventRow {
  id: string;
  occurred_at: Date;
  action: string;
  outcome: string;
  actor: string | null;
  tmc_id: string | null;
  target_client_id: string | null;
  debug_identifier: string | null;
  details: Record<string, unknown>;
}

export interface PaymentSourceRow {
  id: string;
  company_id: string;
  fop_label: string;
  card_company: string | null;
  card_last4: string | null;
  credit_usage_type: string;
  transferable: boolean;
}

/**
 * An air credit as written and read (the air_credits, air_credits_v3 and air_credit_instants
 * migrations). Amounts and instants travel as text (never a float or a local-time Date); a
 * jsonb column is written as JSON text and read back as the object (pg) or its text (PGlite).
 */
export interface AirCreditRow {
  id: string;
  company_id: string;
  payment_source_id: string;
  traveler_user_id: string | null;
  supplier: string;
  pcc: string | null;
  airline_code: string;
  ticket_number: string;
  source_pnr: string | null;
  total_fare_amount: string;
  currency_code: string;
  issue_date: string;
  expiry_date: string;
  status: string;
  spotnana_pnr: string | null;
  airline_name: string | null;
  departure_date: string | null;
  used_date: string | null;
  passenger_name: Record<string, unknown> | string | null;
  email: string | null;
  departure_country: string | null;
  arrival_country: string | null;
  segments_available: string | null;
  ticket_type: string;
  source: string;
  trip_id: string | null;
  redeem_via: string | null;
  source_of_truth: string | null;
  owning_pcc: string | null;
  credit_usage_type: string;
  fop_label: string | null;
  fop_card_access_type: string | null;
  fop_info: Record<string, unknown> | string | null;
  previous_ticket: string | null;
  legal_entity_name: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface SigningKeyRow {
  kid: string;
  alg: string;
  public_jwk: Record<string, unknown>;
  private_jwk_ciphertext: string;
  created_at: Date;
  activates_at: Date;
  retired_at: Date | null;
  not_after: Date | null;
}

export interface RefreshTokenRow {
  id: string;
  token_hash: Buffer;
  family_id: string;
  client_id: string;
  tmc_id: string;
  subject: string;
  subject_kind: "CLIENT" | "USER";
  scope: string;
  audience: string;
  bound_credentials: Array<[string, number]>;
  act: Record<string, unknown> | null;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
  revoked_at: Date | null;
}

export interface TrustedIssuerRow {
  tmc_id: string;
  issuer: string;
  jwks_uri: string | null;
  jwks: { keys: unknown[] } | null;
  audience: string | null;
  company_id: string | null;
  registration: number;
}

export interface ResourceServerRow {
  client_id: string;
  name: string;
  secret_hash: Buffer;
  credential_generation: number;
  /** jsonb: the server's public JWK Set (private_key_jwt), or null. */
  public_keys: unknown;
  /** The URL of its JWK Set (private_key_jwt by jwks_uri), or null. */
  jwks_uri: string | null;
  /** bigint: a string from pg, a number from PGlite. */
  change_seq: string | number;
  created_by: string;
  created_at: Date;
  updated_at: Date;
  rotated_at: Date | null;
  removed_at: Date | null;
}

export interface ResourceServerAudienceRow {
  audience: string;
  client_id: string;
}

export interface CredentialChangeRow {
  /** bigint: a string from pg, a number from PGlite. */
  seq: string | number;
  client_id: string;
  changed_at: Date;
}

/** count(*) is a string in pg and a number in PGlite. */
export function toCount(value: unknown): number {
  return typeof value === "number" ? value : Number.parseInt(String((value as string | null | undefined) ?? "0"), 10);
}

export interface SsfPollPositionRow {
  resource_server_id: string;
  /** bigint: a string from pg, a number from PGlite. */
  acknowledged_through: string | number;
  updated_at: Date;
}

export interface SsfAcknowledgedSetRow {
  resource_server_id: string;
  seq: string | number;
}
