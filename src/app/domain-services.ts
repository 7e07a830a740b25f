import type { Config } from "../config/config.js";
import { createAirCreditArea } from "../domain/air-credits/index.js";
import { createApiUserArea } from "../domain/api-users/index.js";
import { createAuditArea } from "../domain/audit/index.js";
import { createCredentialChangesArea } from "../domain/credential-changes/area.js";
import { longPollBoundMs } from "../domain/credential-changes/security-event-poll.js";
import { createOperatorArea } from "../domain/operator/index.js";
import { createRateLimitArea } from "../domain/rate-limit/index.js";
import { createResourceServerArea } from "../domain/resource-servers/area.js";
import { createScimArea } from "../domain/scim/index.js";
import { createSeedArea } from "../domain/seed/index.js";
import { FairAdmission } from "../domain/shared/admission.js";
import type { Clock } from "../domain/shared/clock.js";
import type { KeyMaterial } from "../domain/shared/key-material.js";
import type { Logger } from "../domain/shared/observability.js";
import { clientKeySetOf } from "../domain/shared/client-assertion.js";
import { RemoteKeySets } from "../domain/shared/remote-key-sets.js";
import type { UnitOfWork } from "../domain/shared/unit-of-work.js";
import { createTenantArea } from "../domain/tenants/index.js";
import { createTokenArea } from "../domain/tokens/area.js";
import { issuerKeySetOf } from "../domain/tokens/issuer-key-set.js";
import { credentialLogRetentionSeconds } from "../domain/tokens/model.js";
import type { ChangeFeed } from "../domain/tokens/ports.js";
import { createUserArea } from "../domain/users/index.js";
import type { Metrics } from "../observability/metrics.js";
import type { Repositories } from "../store/postgres/repositories/index.js";
import type { SharedState } from "../store/shared-state.js";
import { HttpJwksDocumentFetcher } from "../store/http/jwks-document-fetcher.js";

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

/**
 * Every domain service, wired to its ports: the list of area factories, in the order their
 * dependencies need (audit and budgets → tokens → credential changes → the areas of API users,
 * which publish their credential changes through the token area's generations). Construction
 * only: nothing here touches I/O.
 */
export function createDomainServices(inputs: DomainInputs) {
  const { config, uow, repositories, keys, clock } = inputs;
  const ports = { uow, repositories, keys, clock };
  const audit = createAuditArea(auditPortsOf(inputs), config.audit);
  const rateLimit = createRateLimitArea(inputs.shared, config);
  // One per instance: the bearer RPCs (through the RPC core) and the token endpoints share it.
  const admission = new FairAdmission(config.admission, config.storage.databasePoolMax);
  inputs.metrics.observeAdmission(() => admission.state);
  const keySets = remoteKeySetsOf(config);
  const tokens = tokenAreaOf(inputs, audit.auditLog, rateLimit, admission, keySets);
  const credentialChanges = credentialChangesAreaOf(inputs, tokens);
  const tenants = createTenantArea(ports);
  const apiUsers = createApiUserArea({ ...ports, credentials: tokens.generations, keySets: keySets.clients });
  const operator = createOperatorArea(
    { ...ports, revoker: apiUsers.admin, limiter: rateLimit.limiter },
    { token: inputs.operatorToken },
  );
  const airCredits = createAirCreditArea(ports);
  const seed = createSeedArea({ ...ports, tenants: tenants.tenants, provisioning: apiUsers.provisioning });
  return {
    signingKeys: tokens.signingKeys,
    generations: tokens.generations,
    auditLog: audit.auditLog,
    limiter: rateLimit.limiter,
    /** Authenticates resource servers (introspection); the audiences each serves come with it. */
    resourceServerAuthenticator: tokens.resourceServers.authentication,
    admission,
    tokenEndpoint: tokens.tokenEndpoint,
    introspection: tokens.introspection,
    revocation: tokens.revocation,
    credentialChanges: credentialChanges.endpoint,
    changeStream: credentialChanges.stream,
    apiUserAdmin: apiUsers.admin,
    scimUsers: createScimArea(ports, config.tokens).scimUsers,
    userProfiles: createUserArea(ports).userProfiles,
    airCredits: { listing: airCredits.listing, migration: airCredits.migration },
    operator: {
      tenants: tenants.tenants,
      airCreditImport: airCredits.import,
      provisioning: apiUsers.provisioning,
      signingKeys: tokens.signingKeys,
      trustedIssuers: tokens.trustedIssuers,
      console: operator.console,
      seeder: seed.seeder,
      ...rateLimit,
      resourceServers: tokens.resourceServers.registry,
    },
    verifiers: {
      accessTokens: tokens.accessTokens,
      dpop: tokens.dpop,
      operator: operator.authenticator,
      scimTokens: apiUsers.scimAuthenticator,
      audience: config.tokens.audience,
    },
  };
}

/**
 * One of each per instance, with the same URL rules, limits and fetcher: the client key sets
 * registered by URL (registration and assertions, a client's strict key rules), and trusted
 * issuers' (token exchange, an IdP's lenient key rules; their fetches are counted apart, so
 * neither starves the other).
 */
function remoteKeySetsOf(config: Config) {
  const fetcher = new HttpJwksDocumentFetcher(config.tokens.jwksFetchTimeoutMs);
  return {
    clients: new RemoteKeySets(fetcher, config.tokens, clientKeySetOf),
    issuers: new RemoteKeySets(fetcher, config.tokens, issuerKeySetOf),
  };
}

/** The audit trail is written off the request path, by the audit flush job: on the jobs' connections. */
function auditPortsOf({ jobsUow, repositories, logger, metrics, clock }: DomainInputs) {
  const counters = {
    written: metrics.auditWritten,
    writeFailures: metrics.auditWriteFailures,
    dropped: metrics.auditDropped,
    rejected: metrics.auditRejected,
  };
  return { uow: jobsUow, repositories, logger, metrics: counters, clock };
}

/** The token area (with the resource-server area, built on its credential generations). */
function tokenAreaOf(
  { config, uow, jobsUow, repositories: repos, shared, changeFeed, keys, logger, metrics, clock }: DomainInputs,
  audit: ReturnType<typeof createAuditArea>["auditLog"],
  { limiter, resourceServerLimiter }: ReturnType<typeof createRateLimitArea>,
  admission: FairAdmission,
  keySets: { readonly clients: RemoteKeySets; readonly issuers: RemoteKeySets },
) {
  return createTokenArea(
    {
      uow,
      jobsUow,
      repositories: repos,
      generationCache: shared.generationCache,
      replayCache: shared.replayCache,
      keySets: keySets.clients,
      issuerKeySets: keySets.issuers,
      changeFeed,
      keys,
      logger,
      clock,
      audit,
      admission,
      limiters: { apiUsers: limiter, resourceServers: resourceServerLimiter },
      counters: {
        redisFallbacks: metrics.redisFallbacks,
        admissions: metrics.tokenAdmissions,
        introspections: metrics.resourceServerIntrospections,
      },
      resourceServerArea: (generations, assertions) =>
        createResourceServerArea(
          {
            uow,
            servers: repos.resourceServers,
            audit: repos.audit,
            generations,
            pepper: keys.secretPepper,
            assertions,
            keySets: keySets.clients,
          },
          { ownAudience: config.tokens.audience },
        ),
    },
    config.tokens,
  );
}

/** The credential-change stream and SET polling of resource servers, over the token area's generations and keys. */
function credentialChangesAreaOf(
  { config, uow, repositories: repos, metrics, clock }: DomainInputs,
  tokens: ReturnType<typeof tokenAreaOf>,
) {
  return createCredentialChangesArea(
    {
      uow,
      repositories: repos,
      credentialStates: tokens.credentialStates,
      committed: tokens.generations,
      signingKeys: tokens.signingKeys,
      clock,
      pipeline: tokens.pipeline,
      observer: {
        streamsOpen: (count) => metrics.changeStreamsOpen.set(count),
        eventSent: (kind) => metrics.changeStreamEvents.inc({ kind }),
      },
    },
    {
      logRetentionSeconds: credentialLogRetentionSeconds(config.tokens),
      maxOpenStreams: config.tokens.changeStreamMaxOpen,
      maxOpenStreamsPerResourceServer: config.tokens.changeStreamMaxOpenPerResourceServer,
      issuer: config.tokens.issuer,
      longPollMs: longPollBoundMs(config.http.requestDeadlineMs),
      maxOpenPollsPerResourceServer: config.tokens.ssfPollMaxOpenPerResourceServer,
    },
  );
}

/** Every domain service, as createDomainServices wires them. */
export type DomainServices = ReturnType<typeof createDomainServices>;
