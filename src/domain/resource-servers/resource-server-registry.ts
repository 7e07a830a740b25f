import { DomainError, notFound } from "../../errors/domain-error.js";
import type { CredentialChangePublisher } from "../api-users/ports.js";
import { OPERATOR_ACTOR, type AuditEvent } from "../audit/model.js";
import type { AuditRepository } from "../audit/ports.js";
import { generateClientId, generateClientSecret, hashClientSecret } from "../shared/client-secret.js";
import type { KeyMaterial } from "../shared/key-material.js";
import type { Tx, UnitOfWork } from "../shared/unit-of-work.js";
import {
  RESOURCE_SERVER_ID_PREFIX,
  type ResourceServer,
  type ResourceServerCredential,
  type ResourceServerListing,
} from "./model.js";
import type { ResourceServerRepository } from "./ports.js";
import { checkRegistration } from "./registration-rules.js";

/** A registration's answer: the server as registered, and its secret this once. */
export interface RegisteredResourceServer extends ResourceServerCredential {
  readonly name: string;
  readonly audiences: readonly string[];
}

/**
 * The operator's registry of resource servers: register, list, get, rotate the secret, remove.
 * Each change commits with its audit event (actor "operator", no TMC, never the secret).
 * Rotation and removal are credential changes like an API user's: numbered in their transaction
 * (every instance hears of it at commit) and published to the shared cache before the call
 * answers, so the old secret is refused on every instance from then on.
 */
export class ResourceServerRegistry {
  constructor(
    private readonly uow: UnitOfWork,
    private readonly servers: ResourceServerRepository,
    private readonly audit: AuditRepository,
    private readonly credentials: CredentialChangePublisher,
    private readonly pepper: KeyMaterial["secretPepper"],
    /** TOKEN_AUDIENCE: tokens for it are this service's own, never a resource server's. */
    private readonly ownAudience: string,
  ) {}

  /**
   * A new resource server serving `audiences`. An audience another active server serves is 409
   * ALREADY_EXISTS naming it, and nothing is written (two concurrent registrations of one
   * audience: exactly one wins).
   */
  async register(name: string, audiences: readonly string[], requestId: string): Promise<RegisteredResourceServer> {
    checkRegistration(name, audiences, this.ownAudience);
    const clientId = `${RESOURCE_SERVER_ID_PREFIX}${generateClientId()}`;
    const clientSecret = generateClientSecret();
    const sorted = [...audiences].sort();
    await this.uow.transaction(async (tx) => {
      await this.servers.insert(tx, {
        clientId,
        name,
        secretHash: hashClientSecret(this.pepper, clientSecret),
        createdBy: OPERATOR_ACTOR,
      });
      const taken = await this.servers.claimAudiences(tx, clientId, sorted);
      if (taken.length > 0) {
        throw new DomainError("ALREADY_EXISTS", "An audience is already served by another resource server", {
          params: taken.map((audience) => ({ name: "audiences", value: audience })),
        });
      }
      await this.audit.append(tx, [event("RESOURCE_SERVER_CREATE", { clientId, name, audiences: sorted }, requestId)]);
    });
    return { clientId, clientSecret, name, audiences: sorted };
  }

  list(page: { limit: number; offset: number }): Promise<{ servers: ResourceServerListing[]; total: number }> {
    return this.servers.list(this.uow.direct, page);
  }

  async get(clientId: string): Promise<ResourceServerListing> {
    const server = await this.servers.get(this.uow.direct, clientId);
    if (!server) throw notFoundServer(clientId);
    return server;
  }

  /** A new secret, generation + 1: the old secret is refused at once on every instance. */
  async rotateSecret(clientId: string, requestId: string): Promise<ResourceServerCredential> {
    const clientSecret = generateClientSecret();
    const change = await this.uow.transaction(async (tx) => {
      const server = await this.lockActive(tx, clientId);
      await this.servers.setCredential(tx, clientId, {
        secretHash: hashClientSecret(this.pepper, clientSecret),
        generation: server.credentialGeneration + 1,
      });
      await this.audit.append(tx, [event("RESOURCE_SERVER_ROTATE", server, requestId)]);
      return this.credentials.recordChange(tx, clientId);
    });
    await this.credentials.publish(clientId, change);
    return { clientId, clientSecret };
  }

  /** Permanent: the row stays as a tombstone (the id is never reused); its audiences are free again. */
  async remove(clientId: string, requestId: string): Promise<void> {
    const change = await this.uow.transaction(async (tx) => {
      const server = await this.lockActive(tx, clientId);
      await this.servers.markRemoved(tx, clientId);
      await this.audit.append(tx, [event("RESOURCE_SERVER_REMOVE", server, requestId)]);
      return this.credentials.recordChange(tx, clientId);
    });
    await this.credentials.publish(clientId, change);
  }

  private async lockActive(tx: Tx, clientId: string): Promise<ResourceServer> {
    const server = await this.servers.lockActive(tx, clientId);
    // An unknown id and a removed one look the same.
    if (!server) throw notFoundServer(clientId);
    return server;
  }
}

const notFoundServer = (clientId: string) => notFound("Resource server", [{ name: "clientId", value: clientId }]);

/** What the trail says of a change: which server, its name and audiences; never the secret. */
function event(
  action: string,
  server: Pick<ResourceServer, "clientId" | "name" | "audiences">,
  requestId: string,
): AuditEvent {
  return {
    action,
    outcome: "SUCCESS",
    actor: OPERATOR_ACTOR,
    // Resource servers belong to the platform, not to a TMC.
    tmcId: null,
    targetClientId: server.clientId,
    debugIdentifier: requestId,
    details: { clientId: server.clientId, name: server.name, audiences: server.audiences.join(" ") },
  };
}
