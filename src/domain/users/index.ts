import type { AuditRepository } from "../audit/ports.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { UserProfileRepository } from "./ports.js";
import { UserProfiles } from "./user-profiles.js";

/** What the users area is built from: the unit of work and its repositories, by the store's names. */
export interface UserAreaDeps {
  readonly uow: UnitOfWork;
  readonly repositories: { readonly users: UserProfileRepository; readonly audit: AuditRepository };
}

/** The users area: a TMC's view of its companies' user profiles. */
export function createUserArea({ uow, repositories: { users, audit } }: UserAreaDeps) {
  return { userProfiles: new UserProfiles({ uow, users, audit }) };
}
