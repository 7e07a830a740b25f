import type { CryptoKey } from "jose";
import type { ClientAuthPipeline } from "../shared/client-auth-pipeline.js";
import type { Clock } from "../shared/clock.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type {
  CredentialChangeLog,
  CredentialSnapshots,
  CredentialStateSource,
  RevokedTokenRepository,
  SecurityEventPositions,
} from "../tokens/ports.js";
import { CredentialChangeEndpoint } from "./credential-change-endpoint.js";
import { CredentialChangeReader } from "./credential-change-reader.js";
import {
  CredentialChangeStream,
  type ChangeStreamObserver,
  type CommittedChanges,
  type SigningKeyChanges,
} from "./credential-change-stream.js";
import { SecurityEventPoll } from "./security-event-poll.js";

/** The settings of the change stream and of SET polling (from TOKEN_*, CHANGE_STREAM_*, SSF_* and the request deadline). */
export interface CredentialChangesConfig {
  /** How long the log keeps changes: an older cursor gets a snapshot. */
  readonly logRetentionSeconds: number;
  /** Change streams one instance holds open at once, in all and per resource server. */
  readonly maxOpenStreams: number;
  readonly maxOpenStreamsPerResourceServer: number;
  /** `iss` of the SETs: the service's issuer. */
  readonly issuer: string;
  /** How long a SET poll may wait for a change (within the request deadline). */
  readonly longPollMs: number;
  /** SET polls one resource server holds open on one instance at once. */
  readonly maxOpenPollsPerResourceServer: number;
}

/**
 * The credential changes resource servers follow, as a stream and as polled Security Event
 * Tokens: both read the numbered log in Postgres (one reader), are woken by the credential
 * generations' feed of commits, and are admitted by the client-authentication pipeline.
 */
export function createCredentialChangesArea(
  deps: {
    readonly uow: UnitOfWork;
    readonly repositories: {
      readonly credentialChanges: CredentialChangeLog;
      readonly revokedTokens: RevokedTokenRepository;
      readonly credentialSnapshots: CredentialSnapshots;
      readonly securityEventPositions: SecurityEventPositions;
    };
    /** The current credential states (what each event carries). */
    readonly credentialStates: CredentialStateSource;
    /** The commits this instance hears of (the credential generations). */
    readonly committed: CommittedChanges;
    /** The signing keys: their changes end a stream's "fresh" heartbeats; the current one signs SETs. */
    readonly signingKeys: SigningKeyChanges & {
      readonly signingKey: { readonly kid: string; readonly key: CryptoKey };
    };
    readonly clock: Clock;
    readonly pipeline: ClientAuthPipeline;
    readonly observer: ChangeStreamObserver;
  },
  config: CredentialChangesConfig,
) {
  const { uow, repositories: repos, credentialStates: states, committed, signingKeys: keys, clock } = deps;
  const changes = repos.credentialChanges;
  const reader = new CredentialChangeReader({ changes, states, revokedTokens: repos.revokedTokens });
  const stream = new CredentialChangeStream(
    {
      uow,
      changes,
      states,
      revokedTokens: repos.revokedTokens,
      snapshots: repos.credentialSnapshots,
      committed,
      keys,
      clock,
    },
    {
      logRetentionSeconds: config.logRetentionSeconds,
      maxOpen: config.maxOpenStreams,
      maxOpenPerWatcher: config.maxOpenStreamsPerResourceServer,
      observer: deps.observer,
    },
  );
  const securityEvents = new SecurityEventPoll(
    { uow, changes, reader, positions: repos.securityEventPositions, committed, keys, clock },
    { issuer: config.issuer, longPollMs: config.longPollMs, maxOpenPerReceiver: config.maxOpenPollsPerResourceServer },
  );
  return {
    stream,
    securityEvents,
    endpoint: new CredentialChangeEndpoint({ pipeline: deps.pipeline, stream, securityEvents }),
  };
}
