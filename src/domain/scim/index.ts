import type { AuditRepository } from "../audit/ports.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { TokenConfig } from "../tokens/model.js";
import type { ScimUserRepository } from "./ports.js";
import { ScimUsers } from "./scim-users.js";

/** What the scim area is built from: the unit of work and its repositories, by the store's names. */
export interface ScimAreaDeps {
  readonly uow: UnitOfWork;
  readonly repositories: { readonly scimUsers: ScimUserRepository; readonly audit: AuditRepository };
}

/** The scim area: SCIM 2.0 provisioning of a company's users, addressed under the service's public address (its issuer). */
export function createScimArea({ uow, repositories: r }: ScimAreaDeps, config: Pick<TokenConfig, "issuer">) {
  // meta.location and Location: the SCIM base URL under the issuer.
  const baseUrl = `${config.issuer.replace(/\/+$/, "")}/v2/scim/v2`;
  return { scimUsers: new ScimUsers({ uow, users: r.scimUsers, audit: r.audit }, baseUrl) };
}
