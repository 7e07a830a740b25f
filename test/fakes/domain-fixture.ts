import { invalidArgument } from "../../src/errors/domain-error.js";
import crypto from "node:crypto";
import type { Knex } from "knex";
import type { ApiUserAdmin } from "../../src/domain/api-users/api-user-admin.js";
import type { ApiUserProvisioning } from "../../src/domain/api-users/api-user-provisioning.js";
import { createApiUserArea } from "../../src/domain/api-users/index.js";
import type { ApiUser, ApiUserCredentialType, ApiUserRole } from "../../src/domain/api-users/model.js";
import type { ScimAuthenticator } from "../../src/domain/api-users/scim-authenticator.js";
import { deriveKeyMaterial, type KeyMaterial } from "../../src/domain/shared/key-material.js";
import { openScimToken } from "../../src/domain/shared/scim-token.js";
import { tenantScope } from "../../src/domain/shared/tenant-scope.js";
import { createTenantArea } from "../../src/domain/tenants/index.js";
import type { TenantService } from "../../src/domain/tenants/tenant-service.js";
import { VerifiedTokens } from "../../src/domain/tokens/verified-tokens.js";
import { AccessTokens } from "../../src/domain/tokens/access-tokens.js";
import { ClientAuthenticator } from "../../src/domain/tokens/client-authenticator.js";
import { ClientRecordCache } from "../../src/domain/shared/client-record-cache.js";
import {
  clientCredentialsOf,
  type ClientCredentials,
  type PresentedCredentials,
} from "../../src/domain/shared/client-credentials.js";
import {
  CredentialGenerations,
  type CredentialGenerationsOptions,
} from "../../src/domain/tokens/credential-generations.js";
import { credentialStateSource } from "../../src/domain/tokens/credential-state-source.js";
import { SigningKeyRing } from "../../src/domain/tokens/signing-key-ring.js";
import { TokenService, type TokenServiceSettings } from "../../src/domain/tokens/token-service.js";
import { TrustedIssuers } from "../../src/domain/tokens/trusted-issuers.js";
import { issuerKeySetOf } from "../../src/domain/tokens/issuer-key-set.js";
import { KeySetFetchFailed, RemoteKeySets } from "../../src/domain/shared/remote-key-sets.js";
import type { UnitOfWork } from "../../src/domain/shared/unit-of-work.js";
import type { Repositories } from "../../src/store/postgres/repositories/index.js";
import { FakeChangeFeed, type NotificationSource } from "./change-feed.js";
import { FakeClock } from "./clock.js";
import { FakeGenerationCache } from "./generation-cache.js";
import type { Instrumented } from "./instrumented-repositories.js";
import { RecordingLabelledCounter, RecordingLogger } from "./observability.js";
import { pgliteTestStore, type PgliteTestStore } from "./pglite-store.js";

export const ISSUER = "http://auth.test";
export const AUDIENCE = "http://auth.test/v2";
export const OTHER_API = "http://travel.test/v2";
export const ACCESS_TTL = 3600;
export const LEGACY_TTL = 86_400;
export const REFRESH_TTL = 30 * 86_400;
/** SIGNING_KEY_PREPUBLISH_SECONDS's default. */
export const PREPUBLISH_SECONDS = 900;
export const TMC_ADMIN_SCOPES = [
  "api-users",
  "users:read",
  "users:write",
  "air-credits:read",
  "air-credits:write",
  "scim",
  "openid",
];
export const COMPANY_ADMIN_SCOPES = TMC_ADMIN_SCOPES.filter((s) => s !== "api-users");
/** What createDomainServices passes with the default CREDENTIAL_CACHE_SECONDS (300). */
export const GENERATION_OPTIONS: CredentialGenerationsOptions = { logRetentionSeconds: 360, reconcileBatch: 1000 };

/**
 * The domain wired by hand over the real repositories on the process's PGlite (createPgliteFixture;
 * createFixtureOver for repositories a test opened itself), a frozen clock, a breakable generation
 * cache and a controllable change feed, with real crypto and real jose: what createDomainServices
 * builds, minus the parts the domain tests replace (rate limiter and audit sink are constructed
 * per test). `startInstance` adds more instances over the same database and cache, each with its
 * own feed. PGlite is one database per process: one fixture per test.
 */
/** The same domain over the real Postgres repositories on the process's PGlite (test/fakes/pglite-store.ts). */
export type PgliteDomainFixture = DomainFixtureOver<PgliteTestStore>;

/** The stores a fixture runs over: the calls they record (and can fail or hold), and where their NOTIFYs are heard. */
export type FixtureStore = Instrumented<Repositories>;

export interface DomainFixtureOver<S extends FixtureStore> extends Instance {
  readonly clock: FakeClock;
  readonly store: S;
  readonly uow: UnitOfWork;
  readonly repos: Repositories;
  /** Where each instance's feed hears the store's NOTIFYs. */
  readonly notifications: NotificationSource;
  readonly keys: KeyMaterial;
  readonly cache: FakeGenerationCache;
  readonly generationOptions: CredentialGenerationsOptions;
  /** Key sets registered by URL: always refused as unreachable (no network). */
  readonly keySets: { registered(uri: string): Promise<never> };
  readonly signingKeys: SigningKeyRing;
  readonly trustedIssuers: TrustedIssuers;
  readonly tokenService: TokenService;
  readonly tenants: TenantService;
  readonly provisioning: ApiUserProvisioning;
  readonly admin: ApiUserAdmin;
  readonly clients: ClientAuthenticator;
  readonly scim: ScimAuthenticator;
}

/** One service instance's view of credential state: its own CredentialGenerations, feed and counters. */
export interface Instance {
  readonly feed: FakeChangeFeed;
  readonly fallbacks: RecordingLabelledCounter<"operation">;
  readonly logger: RecordingLogger;
  readonly generations: CredentialGenerations;
  /** Token verification on this instance (the signing keys are the fixture's). */
  readonly accessTokens: AccessTokens;
  /** The tokens accessTokens has verified (createDomainServices gives it the same cache). */
  readonly verifiedTokens: VerifiedTokens;
}

export interface FixtureOptions {
  settings?: Partial<TokenServiceSettings>;
  unknownKeyReloadIntervalMs?: number;
  generations?: Partial<CredentialGenerationsOptions>;
}

/** The domain over the real repositories on the process's PGlite, emptied first. */
export async function createPgliteFixture(options: FixtureOptions = {}): Promise<PgliteDomainFixture> {
  const store = await pgliteTestStore();
  return wire(new FakeClock(), store, store.uow, store.repositories, store.notifications, options);
}

/**
 * The same domain over repositories a test opened itself (test/store: the real ones on a Postgres
 * schema, where two transactions can be open at once), heard through `notifications`.
 */
export function createFixtureOver<S extends Instrumented<Repositories>>(
  store: S,
  uow: UnitOfWork,
  notifications: NotificationSource,
  options: FixtureOptions = {},
): Promise<DomainFixtureOver<S>> {
  return wire(new FakeClock(), store, uow, store.repositories, notifications, options);
}

async function wire<S extends FixtureStore>(
  clock: FakeClock,
  store: S,
  uow: UnitOfWork,
  repos: Repositories,
  notifications: NotificationSource,
  options: FixtureOptions,
): Promise<DomainFixtureOver<S>> {
  const keys = deriveKeyMaterial(crypto.randomBytes(32));
  const cache = new FakeGenerationCache();
  const generationOptions = { ...GENERATION_OPTIONS, ...options.generations };
  const feed = new FakeChangeFeed(notifications);
  const fallbacks = new RecordingLabelledCounter<"operation">();
  const logger = new RecordingLogger();
  const generations = new CredentialGenerations(
    {
      uow,
      source: credentialStatesOf(repos, clock),
      changes: repos.credentialChanges,
      cache,
      feed,
      logger,
      fallbacks,
      clock: clock.now,
    },
    generationOptions,
  );
  await startGenerations(generations, feed);
  // Tests start with a clean record (start-up's reconcile read the watermark once).
  cache.reads.length = 0;
  cache.writes.length = 0;
  const signingKeys = new SigningKeyRing(
    { uow, keys: repos.signingKeys, feed, encryptionKey: keys.signingKeyEncryptionKey, now: clock.now },
    {
      signingKeyPrepublishSeconds: PREPUBLISH_SECONDS,
      accessTokenTtlSeconds: ACCESS_TTL,
      legacyTokenTtlSeconds: LEGACY_TTL,
      unknownKeyReloadIntervalMs: options.unknownKeyReloadIntervalMs ?? 5_000,
    },
  );
  await signingKeys.start();
  const { accessTokens, verifiedTokens } = instanceTokens(signingKeys, generations, clock.now);
  const trustedIssuers = new TrustedIssuers({
    uow,
    tenants: repos.tenants,
    issuers: repos.trustedIssuers,
    now: clock.now,
    logger,
    // No network in domain tests: an issuer's key set registered by URL is unreachable.
    keySets: new RemoteKeySets(
      { fetch: () => Promise.reject(new KeySetFetchFailed("could not be reached")) },
      {
        jwksFetchTimeoutMs: 100,
        jwksCooldownMs: 0,
        jwksCacheMinAgeMs: 1_000,
        jwksCacheMaxAgeMs: 1_000,
        jwksUriAllowHttpLoopback: false,
      },
      issuerKeySetOf,
    ),
    settings: { externalTokenMaxLifetimeSeconds: 86_400 },
  });
  const settings: TokenServiceSettings = {
    audience: AUDIENCE,
    allowedAudiences: [OTHER_API],
    accessTokenTtlSeconds: ACCESS_TTL,
    legacyTokenTtlSeconds: LEGACY_TTL,
    refreshTokenTtlSeconds: REFRESH_TTL,
    pepper: keys.secretPepper,
    issuer: ISSUER,
    ...options.settings,
  };
  const tokenService = new TokenService({
    uow,
    tokens: accessTokens,
    trustedIssuers,
    tenants: repos.tenants,
    refreshTokens: repos.refreshTokens,
    apiUsers: repos.apiUsers,
    audiences: { registered: (audiences) => repos.resourceServers.registeredAudiences(uow.direct, audiences) },
    settings,
    now: clock.now,
  });
  // No network in domain tests: a key set registered by URL is refused as unreachable.
  const keySets = {
    registered: () => Promise.reject(invalidArgument("jwks_uri could not be reached", [])),
  };
  const apiUsers = createApiUserArea({
    uow,
    repositories: repos,
    credentials: generations,
    keys,
    clock: clock.now,
    keySets,
  });
  return {
    clock,
    store,
    uow,
    repos,
    notifications,
    keys,
    cache,
    generationOptions,
    keySets,
    feed,
    fallbacks,
    logger,
    generations,
    signingKeys,
    accessTokens,
    verifiedTokens,
    trustedIssuers,
    tokenService,
    tenants: createTenantArea({ uow, repositories: repos }).tenants,
    provisioning: apiUsers.provisioning,
    admin: apiUsers.admin,
    clients: new ClientAuthenticator({
      uow,
      apiUsers: repos.apiUsers,
      pepper: keys.secretPepper,
      records: new ClientRecordCache<ApiUser>(generations, 100),
    }),
    scim: apiUsers.scimAuthenticator,
  };
}

/**
 * Another instance of the service over the same database and cache, with its own change feed
 * (connected unless `autoConnect: false`). Started like compose.ts starts one: `start()` first.
 */
export async function startInstance(
  f: DomainFixtureOver<FixtureStore>,
  options: { autoConnect?: boolean } = {},
): Promise<Instance> {
  const feed = new FakeChangeFeed(f.notifications, options);
  const fallbacks = new RecordingLabelledCounter<"operation">();
  const logger = new RecordingLogger();
  const generations = new CredentialGenerations(
    {
      uow: f.uow,
      source: credentialStatesOf(f.repos, f.clock),
      changes: f.repos.credentialChanges,
      cache: f.cache,
      feed,
      logger,
      fallbacks,
      clock: f.clock.now,
    },
    f.generationOptions,
  );
  await startGenerations(generations, feed);
  return {
    feed,
    fallbacks,
    logger,
    generations,
    ...instanceTokens(f.signingKeys, generations, f.clock.now),
  };
}

/** Where an instance reads credential states, as createDomainServices wires it: API users, resource servers, revoked tokens. */
function credentialStatesOf(repos: Repositories, clock: FakeClock) {
  return credentialStateSource(
    { apiUsers: repos.apiUsers, resourceServers: repos.resourceServers, revokedTokens: repos.revokedTokens },
    clock.now,
  );
}

/**
 * start(), then (when the feed connects by itself) the catching up it triggers, so nothing is left
 * running. A reconcile that fails (a cache refusing writes) is the instance's business: it counts it.
 */
async function startGenerations(generations: CredentialGenerations, feed: FakeChangeFeed): Promise<void> {
  await generations.start();
  await feed.connecting;
  await generations.reconcile().catch(() => {});
}

/** Any fixture (PGlite's, or one over repositories a test opened), for the helpers that only go through the domain and the repositories. */
export type AnyFixture = DomainFixtureOver<FixtureStore>;

/** A TMC with one company. */
export async function newTenant(f: AnyFixture, maxApiUsers = 5): Promise<{ tmcId: string; orgId: string }> {
  const tmc = await f.tenants.createTmc(`TMC ${crypto.randomUUID().slice(0, 8)}`, maxApiUsers);
  const company = await f.tenants.createCompany(tmc.id, "Acme");
  return { tmcId: tmc.id, orgId: company.id };
}

export interface ProvisionedApiUser {
  readonly clientId: string;
  /** The client secret, or the secret sealed inside the SCIM token. */
  readonly secret: string;
  readonly scimToken: string | undefined;
  /** The stored user, as the repository returns it. */
  readonly user: ApiUser;
}

/** An API user created by the operator through ApiUserProvisioning. */
export async function newApiUser(
  f: AnyFixture,
  tmcId: string,
  options: { role?: ApiUserRole; credentialType?: ApiUserCredentialType; orgId?: string } = {},
): Promise<ProvisionedApiUser> {
  const created = await f.provisioning.create({
    tmcId,
    orgId: options.orgId,
    role: options.role ?? "TMC_ADMIN",
    credentialType: options.credentialType ?? "CLIENT_CREDENTIALS",
    actor: "operator",
    requestId: "setup",
  });
  const secret =
    created.clientSecret ??
    openScimToken(new Map([[f.keys.scimTokenKeyId, f.keys.scimTokenKey]]), created.scimToken!)!.secret;
  return {
    clientId: created.clientId,
    secret,
    scimToken: created.scimToken,
    user: (await currentUser(f, created.clientId))!,
  };
}

/** The active API user as stored now (undefined once revoked). */
export function currentUser(f: AnyFixture, clientId: string): Promise<ApiUser | undefined> {
  return f.repos.apiUsers.findActive(f.uow.direct, clientId);
}

/** The stored api_users row, tombstones included, read with SQL (undefined when there is none). */
export async function storedApiUser(db: Knex, clientId: string, schema = "public") {
  const row = (await db.withSchema(schema).from("api_users").where({ client_id: clientId }).first()) as
    | {
        tmc_id: string;
        org_id: string | null;
        role: string;
        credential_type: string;
        secret_hash: Buffer;
        credential_generation: number;
        change_seq: string | number;
        created_by: string;
        rotated_at: Date | null;
        revoked_at: Date | null;
      }
    | undefined;
  if (!row) return undefined;
  return {
    tmcId: row.tmc_id,
    orgId: row.org_id ?? undefined,
    role: row.role,
    credentialType: row.credential_type,
    secretHash: Buffer.from(row.secret_hash),
    credentialGeneration: row.credential_generation,
    changeSeq: Number(row.change_seq),
    createdBy: row.created_by,
    rotatedAt: row.rotated_at ? new Date(row.rotated_at) : undefined,
    revokedAt: row.revoked_at ? new Date(row.revoked_at) : undefined,
  };
}

export function auditOf(f: AnyFixture, tmcId: string) {
  return f.repos.audit.list(f.uow.direct, tenantScope(tmcId), 1000);
}

/** client_secret_post credentials, parsed as the RPC edge parses them. */
export function postCredentials(clientId: string, clientSecret: string): ClientCredentials {
  return clientCredentialsOf({ formClientId: clientId, formClientSecret: clientSecret, authorization: null });
}

/** Credentials as a request presents them (form fields and/or Basic), parsed as the RPC edge parses them. */
export function presentedCredentials(
  formClientId: string,
  formClientSecret: string,
  authorization: string | null,
): ClientCredentials {
  return clientCredentialsOf({ formClientId, formClientSecret, authorization });
}

/** RFC 6749 2.3.1: Basic base64(form-urlencode(id) ":" form-urlencode(secret)). */
export function basicHeader(clientId: string, clientSecret: string): string {
  const encode = (value: string) => encodeURIComponent(value).replace(/%20/g, "+");
  return `Basic ${Buffer.from(`${encode(clientId)}:${encode(clientSecret)}`).toString("base64")}`;
}

export function tokenRequest(
  fields: Partial<{
    grantType: string;
    scope: string;
    audience: string;
    subjectToken: string;
    subjectTokenType: string;
    refreshToken: string;
    requestedTokenType: string;
    resources: readonly string[];
  }> & {
    credentials?: ClientCredentials | PresentedCredentials;
  } = {},
) {
  return {
    grantType: fields.grantType ?? "client_credentials",
    credentials: !fields.credentials
      ? postCredentials("", "")
      : "method" in fields.credentials
        ? fields.credentials
        : clientCredentialsOf(fields.credentials),
    scope: fields.scope ?? "",
    audience: fields.audience ?? "",
    subjectToken: fields.subjectToken ?? "",
    subjectTokenType: fields.subjectTokenType ?? "",
    refreshToken: fields.refreshToken ?? "",
    // As the RPC handler passes it: the proto's empty string when not asked.
    requestedTokenType: fields.requestedTokenType ?? "",
    // As the RPC handler passes it: the repeated field, empty when not asked.
    resources: fields.resources ?? [],
  };
}

/** An instance's access tokens, as createDomainServices wires them: tokens verified once are not verified twice. */
function instanceTokens(signingKeys: SigningKeyRing, generations: CredentialGenerations, now: () => Date) {
  const verifiedTokens = new VerifiedTokens(1_000);
  return { verifiedTokens, accessTokens: new AccessTokens(signingKeys, generations, ISSUER, now, verifiedTokens) };
}
