import type { CredentialChangePublisher } from "../api-users/ports.js";
import type { AuditRepository } from "../audit/ports.js";
import type { ClientAssertionRules } from "../shared/client-assertion-check.js";
import { ClientRecordCache, type CurrentGenerations } from "../shared/client-record-cache.js";
import type { KeyMaterial } from "../shared/key-material.js";
import type { RemoteKeySets } from "../shared/remote-key-sets.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { ResourceServer } from "./model.js";
import type { ResourceServerRepository } from "./ports.js";
import { ResourceServerAuthenticator } from "./resource-server-authenticator.js";
import { ResourceServerRegistry } from "./resource-server-registry.js";

/** Resource-server records kept per instance: a platform has tens of services, not thousands. */
const RESOURCE_SERVER_RECORD_CACHE_SIZE = 1_000;

/**
 * The resource-server area: the operator's registry, and the servers' authentication (records
 * held in process, believed only at the current credential generation).
 */
export function createResourceServerArea(
  deps: {
    readonly uow: UnitOfWork;
    readonly servers: ResourceServerRepository;
    readonly audit: AuditRepository;
    /** The credential generations: a registration, rotation or removal is a credential change. */
    readonly generations: CurrentGenerations & CredentialChangePublisher;
    readonly pepper: KeyMaterial["secretPepper"];
    /** How a server's client assertions are checked (private_key_jwt): the API users' rules. */
    readonly assertions: ClientAssertionRules;
    /** Key sets registered by URL (jwks_uri): checked at registration, held per instance for authentication; the API users' too. */
    readonly keySets: RemoteKeySets;
  },
  config: {
    /** TOKEN_AUDIENCE: tokens for it are this service's own, never a resource server's. */
    readonly ownAudience: string;
  },
) {
  const { uow, servers, audit, generations, pepper, assertions, keySets } = deps;
  return {
    registry: new ResourceServerRegistry({
      uow,
      servers,
      audit,
      credentials: generations,
      pepper,
      ownAudience: config.ownAudience,
      keySets,
    }),
    authentication: new ResourceServerAuthenticator({
      uow,
      servers,
      pepper,
      records: new ClientRecordCache<ResourceServer>(generations, RESOURCE_SERVER_RECORD_CACHE_SIZE),
      assertions: { ...assertions, keySets },
    }),
  };
}
