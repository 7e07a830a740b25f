import type { JSONWebKeySet } from "jose";
import { DomainError, notFound } from "../../errors/domain-error.js";
import type { CredentialChangePublisher } from "../api-users/ports.js";
import { OPERATOR_ACTOR, type AuditEvent } from "../audit/model.js";
import type { AuditRepository } from "../audit/ports.js";
import { jwksDocumentOf } from "../shared/client-assertion.js";
import {
  checkedKeyRegistration,
  registeredKeysOf,
  type CheckedKeyRegistration,
  type RegisteredClientKeys,
} from "../shared/client-key-registration.js";
import { generateClientId, generateClientSecret, hashClientSecret, NO_SECRET } from "../shared/client-secret.js";
import type { KeyMaterial } from "../shared/key-material.js";
import type { RemoteKeySets } from "../shared/remote-key-sets.js";
import type { Tx, UnitOfWork } from "../shared/unit-of-work.js";
import {
  RESOURCE_SERVER_ID_PREFIX,
  type ResourceServer,
  type ResourceServerCredential,
  type ResourceServerListing,
} from "./model.js";
import type { ResourceServerRepository } from "./ports.js";
import { checkRegistration } from "./registration-rules.js";

/** A registration's answer: the server as registered, and its secret this once (or the ids of its keys). */
export interface RegisteredResourceServer extends ResourceServerCredential {
  readonly name: string;
  readonly audiences: readonly string[];
  /** The registered keys' ids (#index for a key without one); empty for a server with a secret. */
  readonly keyIds: readonly string[];
  /** The URL its keys are registered by, when they are. */
  readonly jwksUri?: string;
}

/** The operator's key registration of a resource server: a JWK Set document (JSON text) or its URL. */
export interface ResourceServerKeys {
  readonly jwks?: string;
  readonly jwksUri?: string;
}

/**
 * The operator's registry of resource servers: register, list, get, rotate the secret, set the
 * public keys (private_key_jwt), remove.
 * Each change commits with its audit event (actor "operator", no TMC, never the secret).
 * Rotation and removal are credential changes like an API user's: numbered in their transaction
 * (every instance hears of it at commit) and published to the shared cache before the call
 * answers, so the old secret is refused on every instance from then on.
 */
export class ResourceServerRegistry {
  constructor(
    private readonly deps: {
      readonly uow: UnitOfWork;
      readonly servers: ResourceServerRepository;
      readonly audit: AuditRepository;
      readonly credentials: CredentialChangePublisher;
      readonly pepper: KeyMaterial["secretPepper"];
      /** TOKEN_AUDIENCE: tokens for it are this service's own, never a resource server's. */
      readonly ownAudience: string;
      /** Sets registered by URL: fetched and checked at registration, as an API user's. */
      readonly keySets: Pick<RemoteKeySets, "registered">;
    },
  ) {}

  /**
   * A new resource server serving `audiences`. An audience another active server serves is 409
   * ALREADY_EXISTS naming it, and nothing is written (two concurrent registrations of one
   * audience: exactly one wins). With `jwks` (a JWK Set document, JSON, checked as an API user's)
   * or `jwksUri` (fetched and checked now, as an API user's) the server authenticates with
   * private_key_jwt only and gets no secret, as Hydra and Keycloak register a client with
   * `token_endpoint_auth_method=private_key_jwt` and its keys.
   */
  async register(
    name: string,
    audiences: readonly string[],
    requestId: string,
    keys: ResourceServerKeys = {},
  ): Promise<RegisteredResourceServer> {
    checkRegistration(name, audiences, this.deps.ownAudience);
    const withKeys = keys.jwks !== undefined || keys.jwksUri !== undefined;
    const registration = withKeys ? await this.checkedKeys(keys) : undefined;
    const clientId = `${RESOURCE_SERVER_ID_PREFIX}${generateClientId()}`;
    const clientSecret = registration ? "" : generateClientSecret();
    const sorted = [...audiences].sort();
    await this.deps.uow.transaction(async (tx) => {
      await this.deps.servers.insert(tx, {
        clientId,
        name,
        secretHash: registration ? NO_SECRET : hashClientSecret(this.deps.pepper, clientSecret),
        ...(registration?.publicKeys ? { publicKeys: registration.publicKeys } : {}),
        ...(registration?.jwksUri ? { jwksUri: registration.jwksUri } : {}),
        createdBy: OPERATOR_ACTOR,
      });
      const taken = await this.deps.servers.claimAudiences(tx, clientId, sorted);
      if (taken.length > 0) {
        throw new DomainError("ALREADY_EXISTS", "An audience is already served by another resource server", {
          params: taken.map((audience) => ({ name: "audiences", value: audience })),
        });
      }
      await this.deps.audit.append(tx, [
        event("RESOURCE_SERVER_CREATE", { clientId, name, audiences: sorted }, requestId),
      ]);
    });
    const answered = registration ? registeredKeysOf(registration) : { keyIds: [] };
    return { clientId, clientSecret, name, audiences: sorted, ...answered };
  }

  list(page: { limit: number; offset: number }): Promise<{ servers: ResourceServerListing[]; total: number }> {
    return this.deps.servers.list(this.deps.uow.direct, page);
  }

  async get(clientId: string): Promise<ResourceServerListing> {
    const server = await this.deps.servers.get(this.deps.uow.direct, clientId);
    if (!server) throw notFoundServer(clientId);
    return server;
  }

  /**
   * A new secret, generation + 1: the old secret is refused at once on every instance. A server
   * with keys goes back to a secret: its keys are dropped with it (one credential at a time).
   */
  async rotateSecret(clientId: string, requestId: string): Promise<ResourceServerCredential> {
    const clientSecret = generateClientSecret();
    const secretHash = hashClientSecret(this.deps.pepper, clientSecret);
    const credential = { secretHash, publicKeys: null, jwksUri: null };
    await this.replaceCredential(clientId, credential, "RESOURCE_SERVER_ROTATE", requestId);
    return { clientId, clientSecret };
  }

  /**
   * Registers the server's public keys (private_key_jwt), a JWK Set document (`jwks`, JSON) or its
   * URL (`jwksUri`, fetched and checked now: an unusable one is 400 and nothing changes), in place
   * of its secret or its former keys: key rotation is replacing the set, and so is a move between
   * inline keys and a URL, or to another URL. Like a secret rotation, the generation rises and the
   * change is published before this returns, so an assertion signed by a removed key (or the former
   * secret) is refused at once on every instance, and a set held for the former URL is never used
   * again. Answers the registered key ids, and the URL when registered by URL.
   */
  async setKeys(clientId: string, keys: ResourceServerKeys, requestId: string): Promise<RegisteredClientKeys> {
    const registration = await this.checkedKeys(keys, async () => {
      // Nobody makes the service fetch a URL for a server that does not exist.
      if (!(await this.deps.servers.findActive(this.deps.uow.direct, clientId))) throw notFoundServer(clientId);
    });
    const { publicKeys, jwksUri } = registration;
    const credential = { secretHash: NO_SECRET, publicKeys, jwksUri };
    await this.replaceCredential(clientId, credential, "RESOURCE_SERVER_KEYS_SET", requestId);
    return registeredKeysOf(registration);
  }

  /** The registration checked as an API user's (checkedKeyRegistration), outside any transaction: no row lock held through a fetch. */
  private checkedKeys(keys: ResourceServerKeys, beforeFetch?: () => Promise<void>): Promise<CheckedKeyRegistration> {
    const registration = {
      jwks: keys.jwks === undefined ? undefined : jwksDocumentOf(keys.jwks),
      jwksUri: keys.jwksUri,
    };
    return checkedKeyRegistration(registration, this.deps.keySets, beforeFetch);
  }

  /** The credential change of a rotation or a new key set: generation + 1, audited, published before it returns. */
  private async replaceCredential(
    clientId: string,
    credential: {
      readonly secretHash: Buffer;
      readonly publicKeys: JSONWebKeySet | null;
      readonly jwksUri: string | null;
    },
    action: string,
    requestId: string,
  ): Promise<void> {
    const change = await this.deps.uow.transaction(async (tx) => {
      const server = await this.lockActive(tx, clientId);
      await this.deps.servers.setCredential(tx, clientId, {
        ...credential,
        generation: server.credentialGeneration + 1,
      });
      await this.deps.audit.append(tx, [event(action, server, requestId)]);
      return this.deps.credentials.recordChange(tx, clientId);
    });
    await this.deps.credentials.publish(clientId, change);
  }

  /** Permanent: the row stays as a tombstone (the id is never reused); its audiences are free again. */
  async remove(clientId: string, requestId: string): Promise<void> {
    const change = await this.deps.uow.transaction(async (tx) => {
      const server = await this.lockActive(tx, clientId);
      await this.deps.servers.markRemoved(tx, clientId);
      await this.deps.audit.append(tx, [event("RESOURCE_SERVER_REMOVE", server, requestId)]);
      return this.deps.credentials.recordChange(tx, clientId);
    });
    await this.deps.credentials.publish(clientId, change);
  }

  private async lockActive(tx: Tx, clientId: string): Promise<ResourceServer> {
    const server = await this.deps.servers.lockActive(tx, clientId);
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
