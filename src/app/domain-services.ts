import type { Config } from "../config/config.js";
import { AirCreditImport } from "../domain/air-credits/air-credit-import.js";
import { AirCreditListing } from "../domain/air-credits/air-credit-listing.js";
import { AirCreditMigration } from "../domain/air-credits/air-credit-migration.js";
import { ApiUserAdmin } from "../domain/api-users/api-user-admin.js";
import type { ApiUser } from "../domain/api-users/model.js";
import { ApiUserProvisioning } from "../domain/api-users/api-user-provisioning.js";
import { ScimAuthenticator } from "../domain/api-users/scim-authenticator.js";
import { AuditLog } from "../domain/audit/audit-log.js";
import { OperatorAuthenticator } from "../domain/operator/operator-authenticator.js";
import { OperatorConsole } from "../domain/operator/operator-console.js";
import { OperatorCredential } from "../domain/operator/operator-credential.js";
import { TokenRateLimiter } from "../domain/rate-limit/token-rate-limiter.js";
import type { ResourceServer } from "../domain/resource-servers/model.js";
import { ResourceServerAuthenticator } from "../domain/resource-servers/resource-server-authenticator.js";
import { ResourceServerRegistry } from "../domain/resource-servers/resource-server-registry.js";
import { ScimUsers } from "../domain/scim/scim-users.js";
import { DemoSeeder } from "../domain/seed/demo-seed.js";
import type { Clock } from "../domain/shared/clock.js";
import type { KeyMaterial } from "../domain/shared/key-material.js";
import type { Logger } from "../domain/shared/observability.js";
import type { UnitOfWork } from "../domain/shared/unit-of-work.js";
import { TenantService } from "../domain/tenants/tenant-service.js";
import { AccessTokens } from "../domain/tokens/access-tokens.js";
import { ClientAuthenticator } from "../domain/tokens/client-authenticator.js";
import { ClientRecordCache } from "../domain/shared/client-record-cache.js";
import { CredentialChangeReader } from "../domain/tokens/credential-change-reader.js";
import { CredentialChangeStream } from "../domain/tokens/credential-change-stream.js";
import { longPollBoundMs, SecurityEventPoll } from "../domain/tokens/security-event-poll.js";
import { CredentialGenerations } from "../domain/tokens/credential-generations.js";
import type { CredentialStateSource } from "../domain/tokens/credential-generations.js";
import { credentialStateSource } from "../domain/tokens/credential-state-source.js";
import { SigningKeyRing } from "../domain/tokens/signing-key-ring.js";
import { TokenEndpoint } from "../domain/tokens/token-endpoint.js";
import { FairAdmission, type Admission } from "../domain/shared/admission.js";
import { TokenRevocation } from "../domain/tokens/token-revocation.js";
import { TokenService } from "../domain/tokens/token-service.js";
import { maxTokenLifetimeSeconds } from "../domain/tokens/model.js";
import { TrustedIssuers } from "../domain/tokens/trusted-issuers.js";
import { UserProfiles } from "../domain/users/user-profiles.js";
import type { Metrics } from "../observability/metrics.js";
import type { Repositories } from "../store/postgres/repositories/index.js";
import type { SharedState } from "../store/shared-state.js";
import type { ChangeFeed } from "../domain/tokens/ports.js";
import { VerifiedTokens } from "../domain/tokens/verified-tokens.js";

/** API-user records kept per instance (about 1 KB each): the busiest clients, the rest read from Postgres. */
const CLIENT_RECORD_CACHE_SIZE = 10_000;
/** Resource-server records kept per instance: a platform has tens of services, not thousands. */
const RESOURCE_SERVER_RECORD_CACHE_SIZE = 1_000;
/** Access tokens whose signature this instance has checked (about 1.5 KB each): the live tokens of 20 000 clients. */
const VERIFIED_TOKEN_CACHE_SIZE = 20_000;

export interface DomainInputs {
  readonly config: Config;
  readonly uow: UnitOfWork;
  /** The background jobs' own connections (a small pool of their own on Postgres). */
  readonly jobsUow: UnitOfWork;
  readonly repositories: Repositories;
  readonly shared: SharedState;
  /** Committed credential changes pushed by the database. */
  readonly changeFeed: ChangeFeed;
  readonly keys: KeyMaterial;
  readonly operatorToken: string;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly clock: Clock;
}

/** Every domain service, wired to its ports. Construction only: nothing here touches I/O. */
export function createDomainServices(inputs: DomainInputs) {
  const { config, uow, repositories: repos, keys, clock } = inputs;
  const tokens = tokenServices(inputs);
  const { signingKeys, generations, accessTokens, trustedIssuers } = tokens;
  const auditLog = auditLogOf(inputs);
  const limiters = limitersOf(inputs);
  const { tenants, provisioning, apiUserAdmin } = apiUserServices(inputs, generations);
  const resourceServers = resourceServerServices(inputs, generations);
  // One per instance: the bearer RPCs (through the RPC core) and the token endpoints share it.
  const admission = new FairAdmission(config.admission, config.storage.databasePoolMax);
  return {
    signingKeys,
    generations,
    changeStream: tokens.changeStream,
    auditLog,
    limiter: limiters.limiter,
    /** Authenticates resource servers (introspection); the audiences each serves come with it. */
    resourceServerAuthenticator: resourceServers.authenticator,
    admission,
    tokenEndpoint: tokenEndpointOf(inputs, tokens, limiters, auditLog, resourceServers.authenticator, admission),
    apiUserAdmin,
    // meta.location and Location: the SCIM base URL under the service's public address (its issuer).
    scimUsers: new ScimUsers(
      uow,
      repos.scimUsers,
      repos.audit,
      `${config.tokens.issuer.replace(/\/+$/, "")}/v2/scim/v2`,
    ),
    userProfiles: new UserProfiles(uow, repos.users, repos.audit),
    airCredits: {
      listing: new AirCreditListing(uow, repos.airCredits, clock),
      migration: new AirCreditMigration(uow, repos.airCredits, repos.audit, clock),
    },
    operator: {
      tenants,
      airCreditImport: new AirCreditImport(uow, repos.tenants, repos.airCredits),
      provisioning,
      signingKeys,
      trustedIssuers,
      console: new OperatorConsole(uow, repos.tenants, repos.apiUsers, repos.trustedIssuers, repos.audit, apiUserAdmin),
      seeder: new DemoSeeder(uow, tenants, provisioning, repos.airCredits, clock),
      ...limiters,
      resourceServers: resourceServers.registry,
    },
    verifiers: {
      accessTokens,
      operator: new OperatorAuthenticator(new OperatorCredential(inputs.operatorToken), limiters.limiter),
      scimTokens: new ScimAuthenticator(uow, repos.apiUsers, keys),
      audience: config.tokens.audience,
    },
  };
}

/** TMCs and their API users: provisioning and the TMC admin's operations. */
function apiUserServices({ uow, repositories: repos, keys, clock }: DomainInputs, generations: CredentialGenerations) {
  const provisioning = new ApiUserProvisioning(uow, repos.tenants, repos.apiUsers, repos.audit, keys);
  return {
    tenants: new TenantService(uow, repos.tenants),
    provisioning,
    apiUserAdmin: new ApiUserAdmin(
      uow,
      repos.apiUsers,
      repos.refreshTokens,
      repos.audit,
      provisioning,
      generations,
      keys,
      clock,
    ),
  };
}

/** Signing keys, credential generations, access tokens, trusted issuers and the grants, from the token settings. */
function tokenServices({
  config,
  uow,
  jobsUow,
  repositories: repos,
  shared,
  changeFeed,
  keys,
  logger,
  metrics,
  clock,
}: DomainInputs) {
  const { tokens } = config;
  // Keys are read at start, on a timer and on an unknown kid, never per request: the jobs' connections.
  const signingKeys = new SigningKeyRing(
    jobsUow,
    repos.signingKeys,
    changeFeed,
    keys.signingKeyEncryptionKey,
    tokens,
    clock,
  );
  const credentialStates = credentialStateSource(
    { apiUsers: repos.apiUsers, resourceServers: repos.resourceServers, revokedTokens: repos.revokedTokens },
    clock,
  );
  const generations = new CredentialGenerations(
    uow,
    credentialStates,
    repos.credentialChanges,
    shared.generationCache,
    changeFeed,
    logger,
    metrics.redisFallbacks,
    clock,
    {
      logRetentionSeconds: logRetentionSecondsOf(tokens),
      reconcileBatch: 1000,
      backgroundUow: jobsUow,
    },
  );
  const accessTokens = new AccessTokens(
    signingKeys,
    generations,
    tokens.issuer,
    clock,
    new VerifiedTokens(VERIFIED_TOKEN_CACHE_SIZE),
  );
  const trustedIssuers = new TrustedIssuers(uow, repos.tenants, repos.trustedIssuers, clock, logger, tokens);
  const grants = new TokenService(
    uow,
    accessTokens,
    trustedIssuers,
    repos.tenants,
    repos.refreshTokens,
    repos.apiUsers,
    { registered: (audiences) => repos.resourceServers.registeredAudiences(uow.direct, audiences) },
    { ...tokens, pepper: keys.secretPepper },
    clock,
  );
  const changeStream = changeStreamOf(
    { uow, repos, clock, tokens, metrics },
    { credentialStates, generations, signingKeys },
  );
  const securityEvents = securityEventPollOf(
    { config, uow, repos, clock },
    { credentialStates, generations, signingKeys },
  );
  return { signingKeys, generations, accessTokens, trustedIssuers, grants, changeStream, securityEvents };
}

/**
 * How long the credential-change log is kept: a cached API-user state lives at most the cache's
 * TTL; a revoked token's must be republishable (after Redis lost it), and a change stream able to
 * resume, for as long as the token could be presented.
 */
const logRetentionSecondsOf = (tokens: Config["tokens"]) =>
  Math.max(tokens.credentialCacheSeconds, maxTokenLifetimeSeconds(tokens)) + 60;

/** The credential-change stream of resource servers: the log, the states and the feed the credential checks use. */
function changeStreamOf(
  {
    uow,
    repos,
    clock,
    tokens,
    metrics,
  }: { uow: UnitOfWork; repos: Repositories; clock: Clock; tokens: Config["tokens"]; metrics: Metrics },
  parts: { credentialStates: CredentialStateSource; generations: CredentialGenerations; signingKeys: SigningKeyRing },
): CredentialChangeStream {
  const { credentialChanges, revokedTokens, credentialSnapshots } = repos;
  return new CredentialChangeStream(
    uow,
    credentialChanges,
    parts.credentialStates,
    revokedTokens,
    credentialSnapshots,
    parts.generations,
    parts.signingKeys,
    clock,
    {
      logRetentionSeconds: logRetentionSecondsOf(tokens),
      maxOpen: tokens.changeStreamMaxOpen,
      maxOpenPerWatcher: tokens.changeStreamMaxOpenPerResourceServer,
      observer: {
        streamsOpen: (count) => metrics.changeStreamsOpen.set(count),
        eventSent: (kind) => metrics.changeStreamEvents.inc({ kind }),
      },
    },
  );
}

/** RFC 8936 SET polling: the same reading of the log as the change stream, and the same keys as access tokens. */
function securityEventPollOf(
  { config, uow, repos, clock }: { config: Config; uow: UnitOfWork; repos: Repositories; clock: Clock },
  parts: { credentialStates: CredentialStateSource; generations: CredentialGenerations; signingKeys: SigningKeyRing },
): SecurityEventPoll {
  return new SecurityEventPoll(
    uow,
    repos.credentialChanges,
    new CredentialChangeReader(repos.credentialChanges, parts.credentialStates, repos.revokedTokens),
    repos.securityEventPositions,
    parts.generations,
    parts.signingKeys,
    clock,
    {
      issuer: config.tokens.issuer,
      longPollMs: longPollBoundMs(config.http.requestDeadlineMs),
      maxOpenPerReceiver: config.tokens.ssfPollMaxOpenPerResourceServer,
    },
  );
}

/** The token endpoints' budgets: API users', and resource servers' (their own sizes, counted apart). */
function limitersOf({ config, shared }: DomainInputs) {
  return {
    limiter: new TokenRateLimiter(config.rateLimits, shared.budgetCounters, shared.admission),
    resourceServerLimiter: new TokenRateLimiter(
      config.resourceServerRateLimits,
      shared.budgetCounters,
      shared.admission,
      "resource-server-",
    ),
  };
}

/** The operator's registry of resource servers, and their authentication (records held in process, checked by generation). */
function resourceServerServices(
  { config, uow, repositories: repos, keys }: DomainInputs,
  generations: CredentialGenerations,
) {
  return {
    registry: new ResourceServerRegistry(
      uow,
      repos.resourceServers,
      repos.audit,
      generations,
      keys.secretPepper,
      config.tokens.audience,
    ),
    authenticator: new ResourceServerAuthenticator(
      uow,
      repos.resourceServers,
      keys.secretPepper,
      new ClientRecordCache<ResourceServer>(generations, RESOURCE_SERVER_RECORD_CACHE_SIZE),
    ),
  };
}

/** The audit trail; buffered events are written off the request path, by the audit flush job. */
function auditLogOf({ config, jobsUow, repositories: repos, logger, metrics, clock }: DomainInputs): AuditLog {
  const counters = {
    written: metrics.auditWritten,
    writeFailures: metrics.auditWriteFailures,
    dropped: metrics.auditDropped,
    rejected: metrics.auditRejected,
  };
  return new AuditLog(jobsUow, repos.audit, logger, counters, clock, config.audit);
}

/** The token endpoint: admission, client authentication, the grants and revocation. */
function tokenEndpointOf(
  { uow, repositories: repos, keys, metrics, clock }: DomainInputs,
  tokens: ReturnType<typeof tokenServices>,
  { limiter, resourceServerLimiter }: ReturnType<typeof limitersOf>,
  auditLog: AuditLog,
  resourceServers: ResourceServerAuthenticator,
  admission: Admission,
): TokenEndpoint {
  const clientRecords = new ClientRecordCache<ApiUser>(tokens.generations, CLIENT_RECORD_CACHE_SIZE);
  return new TokenEndpoint(
    limiter,
    new ClientAuthenticator(uow, repos.apiUsers, keys.secretPepper, clientRecords),
    tokens.grants,
    auditLog,
    {
      revocation: new TokenRevocation(
        uow,
        tokens.accessTokens,
        repos.refreshTokens,
        repos.revokedTokens,
        tokens.generations,
        keys.secretPepper,
        clock,
      ),
      admissions: metrics.tokenAdmissions,
      resourceServers,
      resourceServerLimiter,
      introspections: metrics.resourceServerIntrospections,
      changeStream: tokens.changeStream,
      securityEvents: tokens.securityEvents,
      admission,
    },
  );
}

/** Every domain service, as createDomainServices wires them. */
export type DomainServices = ReturnType<typeof createDomainServices>;
