import type { ApiUserRole } from "../api-users/model.js";

/**
 * A user profile as the reference's UserProfile JSON (proto JSON of travel.user.v2
 * GetUserResponse: JSON names, enum names, int64 as strings). The domain reads and writes only
 * the identity fields named in IDENTITY_FIELDS; the rest passes through as the caller wrote it.
 */
export type ProfileDocument = { [field: string]: unknown };

/**
 * The fields of the document whose truth is a `users` column (or a joined row), never the
 * stored profile. A parallel SCIM implementation relies on exactly this mapping.
 */
export const IDENTITY_FIELDS = {
  id: "id",
  companyId: "businessInfo.organizationRef.id",
  companyName: "businessInfo.organizationRef.name",
  tmcId: "contractingTmcRef.id",
  tmcName: "contractingTmcRef.name",
  email: "businessInfo.email",
  givenName: "personalInfo.name.given",
  familyName: "personalInfo.name.family1",
  isActive: "isActive",
  externalId: "externalId",
} as const;

/** A user's row with its company and TMC names, as the profile operations read it. */
export interface UserProfileRecord {
  readonly id: string;
  readonly tmcId: string;
  readonly tmcName: string;
  readonly companyId: string;
  readonly companyName: string;
  /** The identity email (SCIM userName, token-exchange match): businessInfo.email. */
  readonly email: string;
  readonly givenName: string;
  readonly familyName: string;
  readonly isActive: boolean;
  /** Owned by the IdP (SCIM externalId). */
  readonly externalId: string | undefined;
  /**
   * The email the IdP provisioned for the profile (SCIM emails: the primary one, then work, then
   * first; profileEmailOf in domain/scim/model.ts); undefined when it sent none.
   */
  readonly provisionedEmail?: string;
  /** The stored rest of the document (no identity field). */
  readonly profile: ProfileDocument;
}

/** What an update writes: the name columns and the rest of the document. */
export interface ProfileChange {
  readonly givenName: string;
  readonly familyName: string;
  readonly profile: ProfileDocument;
}

/** The API user calling a profile operation (the verified access token's principal). */
export interface ProfileCaller {
  readonly clientId: string;
  readonly tmcId: string;
  readonly orgId: string | undefined;
  readonly role: ApiUserRole;
}
