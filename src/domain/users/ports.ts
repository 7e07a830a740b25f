import type { TenantScope } from "../shared/tenant-scope.js";
import type { Tx } from "../shared/unit-of-work.js";
import type { ProfileChange, UserProfileRecord } from "./model.js";

/** Users' profiles, confined to one tenant (TMC). Active and inactive users alike. */
export interface UserProfileRepository {
  /** The tenant's user with this id (with its company's and TMC's names). */
  find(tx: Tx, scope: TenantScope, userId: string): Promise<UserProfileRecord | undefined>;
  /** Like `find`, locking the user's row for the rest of the transaction. */
  lock(tx: Tx, scope: TenantScope, userId: string): Promise<UserProfileRecord | undefined>;
  /** Writes the name columns and the stored profile, and sets updated_at. */
  update(tx: Tx, scope: TenantScope, userId: string, change: ProfileChange): Promise<void>;
}
