import type { ClientCredentials } from "../shared/client-credentials.js";
import type { ClientAuthPipeline, TokenCall } from "../shared/client-auth-pipeline.js";
import type { ChangeStreamEvent, CredentialChangeStream } from "./credential-change-stream.js";
import type { SecurityEventPoll, SecurityEventPollRequest, SecurityEventPollResult } from "./security-event-poll.js";

/**
 * The credential changes resource servers follow (WatchCredentialChanges, and the same changes
 * as RFC 8936 Security Event Tokens, PollSecurityEvents), for resource servers only: admitted by
 * the client-authentication pipeline like batch introspection (an API user refused with 403
 * unauthorized_client; one call counted against the server's budget, not one per event;
 * refusals audited as refused introspections), all before the first event.
 */
export class CredentialChangeEndpoint {
  constructor(
    private readonly deps: {
      readonly pipeline: ClientAuthPipeline;
      readonly stream: CredentialChangeStream;
      readonly securityEvents: SecurityEventPoll;
    },
  ) {}

  /** The change stream from `sinceCursor` (checked before the first event); refusals audited with stream: "true". */
  async watchChanges(
    credentials: ClientCredentials,
    sinceCursor: string,
    signal: AbortSignal,
    call: TokenCall,
  ): Promise<AsyncIterable<ChangeStreamEvent>> {
    const { pipeline, stream } = this.deps;
    const server = await pipeline.admitResourceServer(credentials, call, {
      only: "The credential-change stream is for resource servers only",
      details: { stream: "true" },
    });
    return pipeline.slot(
      pipeline.resourceServers.party(server),
      () => stream.watch(sinceCursor, signal, server.clientId),
      signal,
    );
  }

  /** The server's SET feed, polled; the SETs are addressed to its client id. Refusals audited with ssf: "true". */
  async pollSecurityEvents(
    credentials: ClientCredentials,
    request: SecurityEventPollRequest,
    signal: AbortSignal,
    call: TokenCall,
  ): Promise<SecurityEventPollResult> {
    const { pipeline, securityEvents } = this.deps;
    const server = await pipeline.admitResourceServer(credentials, call, {
      only: "Security event polling is for resource servers only",
      details: { ssf: "true" },
    });
    const poll = () => securityEvents.poll(server.clientId, request, signal);
    // A long poll waits (without a connection) far longer than any call may hold a slot: only
    // an immediate poll's work is admitted; open polls are bounded per resource server apart.
    if (!request.returnImmediately) return poll();
    return pipeline.slot(pipeline.resourceServers.party(server), poll, signal);
  }

  /** Ends every open change stream and every waiting SET poll (at shutdown, before HTTP closes). */
  stop(): void {
    this.deps.stream.stop();
    this.deps.securityEvents.stop();
  }
}
