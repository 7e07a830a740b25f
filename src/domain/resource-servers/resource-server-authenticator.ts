import { DomainError } from "../../errors/domain-error.js";
import type { AssertionRefusal } from "../shared/client-assertion.js";
import {
  provedAttempt,
  verdictOf,
  type AttemptAssertion,
  type ClientAssertionRules,
} from "../shared/client-assertion-check.js";
import { isPlain, requireCredentials, type ClientCredentials } from "../shared/client-credentials.js";
import type { ClientRecordCache } from "../shared/client-record-cache.js";
import { verifyClientSecret } from "../shared/client-secret.js";
import type { KeyMaterial } from "../shared/key-material.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { ClientAttempt, ClientAuthentication, HeldClient } from "../tokens/ports.js";
import { isResourceServerId, type ResourceServer } from "./model.js";
import type { ResourceServerRepository } from "./ports.js";

/** Why a resource server's authentication failed, for the operator's log line only. */
export type ResourceServerRefusal =
  "unknown or removed resource server" | "not a resource server id" | "wrong secret" | AssertionRefusal;

/** A resource server's authentication in progress; with a client assertion, its state. */
export interface ResourceServerAttempt extends ClientAttempt<ResourceServer> {
  readonly assertion?: AttemptAssertion;
}

/**
 * Authenticates a resource server (RFC 7662 2.1: the protected resource calling introspection)
 * with its own client id and secret, presented as the token endpoint takes them (HTTP Basic, or
 * client_id and client_secret in the form; the same parser), or with a client assertion signed by
 * a key it registered (private_key_jwt: the API users' rules, checkClientAssertion). The secret is
 * compared in constant time; an unknown or removed id, and an API user's id, run the same
 * comparison and get the same 401 invalid_client as a wrong secret; a server with keys has no
 * secret, so any secret is refused for it.
 *
 * The record may come from this instance's memory, but only while its generation is the current
 * one (CredentialGenerations: one Redis round trip, Postgres when the cache cannot be believed),
 * so a rotation or removal through any instance is refused here before that call has answered.
 */
export class ResourceServerAuthenticator implements ClientAuthentication<ResourceServer, ResourceServerAttempt> {
  constructor(
    private readonly deps: {
      readonly uow: UnitOfWork;
      readonly servers: ResourceServerRepository;
      readonly pepper: KeyMaterial["secretPepper"];
      /** Records held in process, believed only at the current generation; without it every call reads the database. */
      readonly records?: ClientRecordCache<ResourceServer>;
      /** Without them (tests of the secret only), every assertion is refused. */
      readonly assertions?: ClientAssertionRules;
    },
  ) {}

  /** The authenticated resource server (with the audiences it serves), or 401 RESOURCE_SERVER_AUTHENTICATION_FAILED. */
  async authenticate(credentials: ClientCredentials): Promise<ResourceServer> {
    return this.verify(await this.prove(await this.lookUp(credentials)));
  }

  /**
   * First step: the active resource server the credentials name (undefined: none). Nothing is
   * verified yet: the pipeline reserves a failure point in between, keyed on whether the server
   * exists (the token endpoint's lockout rules).
   */
  async lookUp(credentials: ClientCredentials): Promise<ResourceServerAttempt> {
    requireCredentials(credentials);
    const { clientId, clientSecret, assertion } = credentials;
    // Resource servers' ids are theirs alone: an API user's id is never looked up here.
    const client = isResourceServerId(clientId) ? await this.find(clientId) : undefined;
    return {
      clientId,
      secret: clientSecret,
      client,
      ...(assertion !== undefined ? { assertion: { presented: assertion } } : {}),
    };
  }

  /** The assertion's signature and jti, checked once the pipeline has reserved the attempt's failure point. */
  prove(attempt: ResourceServerAttempt): Promise<ResourceServerAttempt> {
    return provedAttempt(this.deps.assertions, attempt);
  }

  wrongSecret(clientId: string): DomainError {
    return resourceServerRefused(clientId, "wrong secret");
  }

  /** As ClientAuthentication says; undefined too when the id is not a resource server's. */
  held(credentials: ClientCredentials): HeldClient<ResourceServer> | undefined {
    const { records, pepper } = this.deps;
    if (!records || !isPlain(credentials) || !isResourceServerId(credentials.clientId)) return undefined;
    const held = records.held(credentials.clientId);
    if (!held) return undefined;
    const authenticated = verifyClientSecret(pepper, credentials.clientSecret, held.record.secretHash);
    return { record: held.record, knownChange: held.knownChange, authenticated };
  }

  verify(attempt: ResourceServerAttempt): ResourceServer {
    const { clientId, client: server, assertion } = attempt;
    // An assertion runs no secret comparison: an unknown id is answered without a signature check either.
    const matches = assertion === undefined && verifyClientSecret(this.deps.pepper, attempt.secret, server?.secretHash);
    if (!server)
      throw resourceServerRefused(
        clientId,
        isResourceServerId(clientId) ? "unknown or removed resource server" : "not a resource server id",
      );
    if (assertion === undefined) {
      if (!matches) throw resourceServerRefused(clientId, "wrong secret");
      return server;
    }
    const verdict = verdictOf(assertion);
    if (verdict !== "verified") throw resourceServerRefused(clientId, verdict);
    return server;
  }

  private find(clientId: string): Promise<ResourceServer | undefined> {
    const { uow, servers, records } = this.deps;
    const load = () => servers.findActive(uow.direct, clientId);
    return records ? records.find(clientId, load) : load();
  }
}

/** One answer for every failure; which client and which check go to the log line only. */
function resourceServerRefused(clientId: string, reason: ResourceServerRefusal): DomainError {
  return new DomainError("RESOURCE_SERVER_AUTHENTICATION_FAILED", "Client authentication failed", {
    logged: { clientId: clientId.slice(0, 256), refusalReason: reason },
  });
}
