import { DomainError } from "../../errors/domain-error.js";
import { plainCredentialsOf, requiredCredentialsOf } from "../shared/client-credentials.js";
import type { ClientRecordCache } from "../shared/client-record-cache.js";
import { verifyClientSecret } from "../shared/client-secret.js";
import type { KeyMaterial } from "../shared/key-material.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { PresentedCredentials } from "../tokens/model.js";
import type { ResourceServerAttempt, ResourceServerAuthentication } from "../tokens/ports.js";
import { isResourceServerId, type ResourceServer } from "./model.js";
import type { ResourceServerRepository } from "./ports.js";

/** Why a resource server's authentication failed, for the operator's log line only. */
export type ResourceServerRefusal = "unknown or removed resource server" | "not a resource server id" | "wrong secret";

/**
 * Authenticates a resource server (RFC 7662 2.1: the protected resource calling introspection)
 * with its own client id and secret, presented as the token endpoint takes them (HTTP Basic, or
 * client_id and client_secret in the form; the same parser). The secret is compared in constant
 * time; an unknown or removed id, and an API user's id, run the same comparison and get the same
 * 401 invalid_client as a wrong secret.
 *
 * The record may come from this instance's memory, but only while its generation is the current
 * one (CredentialGenerations: one Redis round trip, Postgres when the cache cannot be believed),
 * so a rotation or removal through any instance is refused here before that call has answered.
 */
export class ResourceServerAuthenticator implements ResourceServerAuthentication {
  constructor(
    private readonly uow: UnitOfWork,
    private readonly servers: ResourceServerRepository,
    private readonly pepper: KeyMaterial["secretPepper"],
    /** Records held in process, believed only at the current generation; without it every call reads the database. */
    private readonly records?: ClientRecordCache<ResourceServer>,
  ) {}

  /** The authenticated resource server (with the audiences it serves), or 401 RESOURCE_SERVER_AUTHENTICATION_FAILED. */
  async authenticate(presented: PresentedCredentials): Promise<ResourceServer> {
    return this.verify(await this.lookUp(presented));
  }

  /**
   * First step: the credentials presented, and the active resource server they name (undefined:
   * none). Nothing is verified yet: the caller reserves a failure point in between, keyed on
   * whether the server exists (the token endpoint's lockout rules).
   */
  async lookUp(presented: PresentedCredentials): Promise<ResourceServerAttempt> {
    const { clientId, clientSecret } = requiredCredentialsOf(presented);
    // Resource servers' ids are theirs alone: an API user's id is never looked up here.
    const server = isResourceServerId(clientId) ? await this.find(clientId) : undefined;
    return { clientId, secret: clientSecret, server };
  }

  wrongSecret(clientId: string): DomainError {
    return resourceServerRefused(clientId, "wrong secret");
  }

  /**
   * The one-round-trip path's first step (the token endpoint's heldAttempt): the record this
   * instance holds for the named resource server, with the presented secret already compared to
   * it in constant time; still to be checked against the current generation, with `knownChange`,
   * in the same round trip as its budgets. Undefined when none is held, the id is not a resource
   * server's, or the credentials are not a plain id and secret: the step-by-step path answers those.
   */
  heldAttempt(
    presented: PresentedCredentials,
  ): { readonly record: ResourceServer; readonly knownChange: number; readonly authenticated: boolean } | undefined {
    const credentials = plainCredentialsOf(presented);
    if (!this.records || !credentials || !isResourceServerId(credentials.clientId)) return undefined;
    const held = this.records.held(credentials.clientId);
    if (!held) return undefined;
    const authenticated = verifyClientSecret(this.pepper, credentials.clientSecret, held.record.secretHash);
    return { record: held.record, knownChange: held.knownChange, authenticated };
  }

  /** Second step, in constant time: an unknown id runs the same comparison and gets the same answer as a wrong secret. */
  verify(attempt: ResourceServerAttempt): ResourceServer {
    const { clientId, server } = attempt;
    const matches = verifyClientSecret(this.pepper, attempt.secret, server?.secretHash);
    if (!server)
      throw resourceServerRefused(
        clientId,
        isResourceServerId(clientId) ? "unknown or removed resource server" : "not a resource server id",
      );
    if (!matches) throw resourceServerRefused(clientId, "wrong secret");
    return server;
  }

  private find(clientId: string): Promise<ResourceServer | undefined> {
    const load = () => this.servers.findActive(this.uow.direct, clientId);
    return this.records ? this.records.find(clientId, load) : load();
  }
}

/** One answer for every failure; which client and which check go to the log line only. */
function resourceServerRefused(clientId: string, reason: ResourceServerRefusal): DomainError {
  return new DomainError("RESOURCE_SERVER_AUTHENTICATION_FAILED", "Client authentication failed", {
    logged: { clientId: clientId.slice(0, 256), refusalReason: reason },
  });
}
