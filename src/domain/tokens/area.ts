import type { RemoteKeySets } from "../shared/remote-key-sets.js";
import type { ReplayCache } from "../replay/ports.js";
import { clientAssertionAudiences } from "./discovery.js";
import type { ApiUser } from "../api-users/model.js";
import type { ApiUserRepository, CredentialChangePublisher } from "../api-users/ports.js";
import type { AuditSink } from "../audit/model.js";
import type { ResourceServer } from "../resource-servers/model.js";
import type { ResourceServerRepository } from "../resource-servers/ports.js";
import type { Admission } from "../shared/admission.js";
import { ClientAuthPipeline } from "../shared/client-auth-pipeline.js";
import { ClientRecordCache, type CurrentGenerations } from "../shared/client-record-cache.js";
import type { ClientAssertionRules } from "../shared/client-assertion-check.js";
import type { Clock } from "../shared/clock.js";
import type { KeyMaterial } from "../shared/key-material.js";
import type { LabelledCounter, Logger } from "../shared/observability.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { TenantRepository } from "../tenants/ports.js";
import { AccessTokens } from "./access-tokens.js";
import { ClientAuthenticator } from "./client-authenticator.js";
import { CredentialGenerations } from "./credential-generations.js";
import { credentialStateSource } from "./credential-state-source.js";
import { DpopNonces, DpopProofs } from "./dpop-proofs.js";
import { IntrospectionEndpoint } from "./introspection-endpoint.js";
import { credentialLogRetentionSeconds, type TokenConfig } from "./model.js";
import type {
  ChangeFeed,
  ClientAuthentication,
  CredentialChangeLog,
  GenerationCache,
  RefreshTokenRepository,
  RevokedTokenRepository,
  SigningKeyRepository,
  TokenRequestLimiter,
  TrustedIssuerRepository,
} from "./ports.js";
import { RevocationEndpoint } from "./revocation-endpoint.js";
import { SigningKeyRing } from "./signing-key-ring.js";
import { TokenEndpoint } from "./token-endpoint.js";
import { TokenRevocation } from "./token-revocation.js";
import { TokenService } from "./token-service.js";
import { TrustedIssuers } from "./trusted-issuers.js";
import { VerifiedTokens } from "./verified-tokens.js";

/** API-user records kept per instance (about 1 KB each): the busiest clients, the rest read from Postgres. */
const CLIENT_RECORD_CACHE_SIZE = 10_000;
/** Access tokens whose signature this instance has checked (about 1.5 KB each): the live tokens of 20 000 clients. */
const VERIFIED_TOKEN_CACHE_SIZE = 20_000;

/** What the token area is built from: ports and the services of other areas it uses, by name. */
export interface TokenAreaDeps<RS> {
  readonly uow: UnitOfWork;
  /** The background jobs' own connections: signing keys, reconcile and prune never take a request's. */
  readonly jobsUow: UnitOfWork;
  readonly repositories: {
    readonly signingKeys: SigningKeyRepository;
    readonly apiUsers: ApiUserRepository;
    readonly resourceServers: ResourceServerRepository;
    readonly revokedTokens: RevokedTokenRepository;
    readonly credentialChanges: CredentialChangeLog;
    readonly tenants: TenantRepository;
    readonly trustedIssuers: TrustedIssuerRepository;
    readonly refreshTokens: RefreshTokenRepository;
  };
  /** The shared (Redis) cache of credential generations. */
  readonly generationCache: GenerationCache;
  /** Committed credential and signing-key changes pushed by the database. */
  readonly changeFeed: ChangeFeed;
  readonly keys: Pick<KeyMaterial, "secretPepper" | "signingKeyEncryptionKey" | "dpopNonceKey">;
  /** Ids used once, shared by every instance: client assertions' and DPoP proofs' `jti`. */
  readonly replayCache: ReplayCache;
  /** Client key sets registered by URL (jwks_uri), fetched and held by this instance. */
  readonly keySets: RemoteKeySets;
  /** Trusted issuers' key sets registered by URL (jwksUri), fetched and held by this instance (an IdP's key rules). */
  readonly issuerKeySets: RemoteKeySets;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly audit: AuditSink;
  /** The instance's fair-share admission (shared with the bearer RPCs). */
  readonly admission: Admission;
  /** The budgets of API users and of resource servers (sized and counted apart). */
  readonly limiters: { readonly apiUsers: TokenRequestLimiter; readonly resourceServers: TokenRequestLimiter };
  readonly counters: {
    /** Redis reads and writes that fell back to Postgres, by operation. */
    readonly redisFallbacks: LabelledCounter<"operation">;
    /** Which path decided each token-endpoint request: one_round_trip or step_by_step. */
    readonly admissions: LabelledCounter<"path">;
    /** Tokens introspected by each resource server, by answer. */
    readonly introspections: LabelledCounter<"resource_server" | "active">;
  };
  /**
   * The resource-server area, built on this area's credential generations (its records are
   * believed only at the current generation) and client-assertion rules (the API users'): its
   * authentication is the pipeline's for resource servers.
   */
  readonly resourceServerArea: (
    generations: CurrentGenerations & CredentialChangePublisher,
    assertions: ClientAssertionRules,
  ) => RS;
}

/**
 * The token area: signing keys, credential generations, access tokens, trusted issuers, the
 * grants, and the endpoints that take a client credential (token, introspection, revocation),
 * each over the one client-authentication pipeline.
 */
export function createTokenArea<RS extends { readonly authentication: ClientAuthentication<ResourceServer> }>(
  deps: TokenAreaDeps<RS>,
  config: TokenConfig,
) {
  const { uow, repositories: repos, keys, clock, audit } = deps;
  const { signingKeys, credentialStates, generations, accessTokens } = credentialsOf(deps, config);
  const { trustedIssuers, grants } = grantsOf(deps, config, accessTokens);
  // One set of assertion rules for both kinds of client: the same replay cache, audiences and clock.
  const assertions = { replay: deps.replayCache, audiences: clientAssertionAudiences(config.issuer), clock };
  const resourceServers = deps.resourceServerArea(generations, assertions);
  const pipeline = pipelineOf(deps, generations, assertions, resourceServers.authentication);
  const dpop = new DpopProofs({ nonces: new DpopNonces(keys.dpopNonceKey), replay: deps.replayCache, now: clock });
  const revocation = new TokenRevocation({
    uow,
    accessTokens,
    refreshTokens: repos.refreshTokens,
    revokedTokens: repos.revokedTokens,
    generations,
    pepper: keys.secretPepper,
    clock,
  });
  return {
    signingKeys,
    generations,
    credentialStates,
    accessTokens,
    trustedIssuers,
    resourceServers,
    pipeline,
    dpop,
    tokenEndpoint: new TokenEndpoint({ pipeline, tokens: grants, audit, dpop }),
    introspection: new IntrospectionEndpoint({
      pipeline,
      tokens: grants,
      audit,
      introspections: deps.counters.introspections,
    }),
    revocation: new RevocationEndpoint({ pipeline, revocation, audit }),
  };
}

/** Signing keys, the credential generations and the access tokens signed and checked with them. */
function credentialsOf(deps: TokenAreaDeps<unknown>, config: TokenConfig) {
  const { uow, jobsUow, repositories: repos, keys, clock } = deps;
  // Keys are read at start, on a timer and on an unknown kid, never per request: the jobs' connections.
  const signingKeys = new SigningKeyRing(
    {
      uow: jobsUow,
      keys: repos.signingKeys,
      feed: deps.changeFeed,
      encryptionKey: keys.signingKeyEncryptionKey,
      now: clock,
    },
    config,
  );
  const credentialStates = credentialStateSource(
    { apiUsers: repos.apiUsers, resourceServers: repos.resourceServers, revokedTokens: repos.revokedTokens },
    clock,
  );
  const generations = new CredentialGenerations(
    {
      uow,
      source: credentialStates,
      changes: repos.credentialChanges,
      cache: deps.generationCache,
      feed: deps.changeFeed,
      logger: deps.logger,
      fallbacks: deps.counters.redisFallbacks,
      clock,
    },
    { logRetentionSeconds: credentialLogRetentionSeconds(config), reconcileBatch: 1000, backgroundUow: jobsUow },
  );
  const accessTokens = new AccessTokens(
    signingKeys,
    generations,
    config.issuer,
    clock,
    new VerifiedTokens(VERIFIED_TOKEN_CACHE_SIZE),
  );
  return { signingKeys, credentialStates, generations, accessTokens };
}

/** The trusted issuers (token exchange) and the grants. */
function grantsOf(deps: TokenAreaDeps<unknown>, config: TokenConfig, accessTokens: AccessTokens) {
  const { uow, repositories: repos, keys, clock } = deps;
  const trustedIssuers = new TrustedIssuers({
    uow,
    tenants: repos.tenants,
    issuers: repos.trustedIssuers,
    now: clock,
    logger: deps.logger,
    keySets: deps.issuerKeySets,
    settings: config,
  });
  const grants = new TokenService({
    uow,
    tokens: accessTokens,
    trustedIssuers,
    tenants: repos.tenants,
    refreshTokens: repos.refreshTokens,
    apiUsers: repos.apiUsers,
    audiences: { registered: (audiences) => repos.resourceServers.registeredAudiences(uow.direct, audiences) },
    settings: { ...config, pepper: keys.secretPepper },
    now: clock,
  });
  return { trustedIssuers, grants };
}

/** The one client-authentication pipeline: API users and resource servers, each with its own budget. */
function pipelineOf(
  deps: TokenAreaDeps<unknown>,
  generations: CredentialGenerations,
  assertions: ClientAssertionRules,
  resourceServers: ClientAuthentication<ResourceServer>,
) {
  const { uow, repositories: repos, keys } = deps;
  return new ClientAuthPipeline({
    apiUsers: {
      authentication: new ClientAuthenticator({
        uow,
        apiUsers: repos.apiUsers,
        pepper: keys.secretPepper,
        records: new ClientRecordCache<ApiUser>(generations, CLIENT_RECORD_CACHE_SIZE),
        assertions: { ...assertions, keySets: deps.keySets },
      }),
      limiter: deps.limiters.apiUsers,
    },
    resourceServers: { authentication: resourceServers, limiter: deps.limiters.resourceServers },
    audit: deps.audit,
    admission: deps.admission,
    admissions: deps.counters.admissions,
  });
}

/** What createTokenArea builds. */
export type TokenArea<RS extends { readonly authentication: ClientAuthentication<ResourceServer> }> = ReturnType<
  typeof createTokenArea<RS>
>;
