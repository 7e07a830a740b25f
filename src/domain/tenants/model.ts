/** Spec section 8: five active API users per TMC unless the operator raises it. */
export const DEFAULT_MAX_API_USERS = 5;

/** A travel management company: the tenant that owns API users, companies and their users. */
export interface Tmc {
  readonly id: string;
  readonly name: string;
  readonly maxApiUsers: number;
}

/** A company (the API's "organization", orgId) under a TMC. */
export interface Company {
  readonly id: string;
  readonly tmcId: string;
  readonly name: string;
}

/** A traveler's profile as far as identity is concerned. */
export interface User {
  readonly id: string;
  readonly companyId: string;
  readonly tmcId: string;
  readonly email: string;
  readonly givenName: string;
  readonly familyName: string;
  readonly isActive: boolean;
}

export interface NewUser {
  readonly email: string;
  readonly givenName: string;
  readonly familyName: string;
  readonly isActive: boolean;
}
