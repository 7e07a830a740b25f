import type { KeyMaterial } from "../shared/key-material.js";
import type { ApiUser } from "../api-users/model.js";
import type { ApiUserRepository } from "../api-users/ports.js";
import { verifyClientSecret } from "../shared/client-secret.js";
import { credentialsOf, plainCredentialsOf, requiredCredentialsOf } from "../shared/client-credentials.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { ClientRecordCache } from "../shared/client-record-cache.js";
import type { PresentedCredentials } from "./model.js";
import { invalidClient, type InvalidClientReason } from "./oauth-errors.js";

/**
 * Client authentication for the token endpoints: client_secret_post as the spec documents,
 * and client_secret_basic (RFC 6749 2.3.1) because standard OAuth libraries use it. An unknown
 * client runs the same comparison as a wrong secret and gets the same answer.
 */
export class ClientAuthenticator {
  constructor(
    private readonly uow: UnitOfWork,
    private readonly apiUsers: ApiUserRepository,
    private readonly pepper: KeyMaterial["secretPepper"],
    /** Records kept in process, checked against the current generation; without it every lookup reads the database. */
    private readonly records?: ClientRecordCache<ApiUser>,
  ) {}

  /** The client id the request names, before authenticating it (rate limiting keys on it). */
  static claimedClientId(presented: PresentedCredentials): string | undefined {
    try {
      return credentialsOf(presented).clientId || undefined;
    } catch {
      return presented.formClientId || undefined;
    }
  }

  /**
   * First step: the credentials the request presents, and the client they name if it exists and
   * may use the token endpoint (SCIM-token users authenticate with their SCIM token on SCIM paths
   * only). Nothing is verified yet.
   */
  async lookUp(presented: PresentedCredentials): Promise<ClientAttempt> {
    const { clientId, clientSecret } = requiredCredentialsOf(presented);
    const load = () => this.apiUsers.findActive(this.uow.direct, clientId);
    const user = this.records ? await this.records.find(clientId, load) : await load();
    const client = tokenEndpointClient(user);
    return {
      clientId,
      secret: clientSecret,
      client,
      ...(client
        ? {}
        : { refusal: user ? "not a client-credentials API user (SCIM token)" : "unknown or revoked client" }),
    };
  }

  /**
   * The one-round-trip path's first step: the record this instance holds for the named client,
   * with the presented secret already compared to it (in constant time). The record is still to
   * be checked against the current generation (with `knownChange`). Undefined when no record is
   * held or the credentials are not a plain id and secret: the step-by-step path answers those.
   */
  heldAttempt(presented: PresentedCredentials): HeldAttempt | undefined {
    const credentials = plainCredentialsOf(presented);
    if (!this.records || !credentials) return undefined;
    const held = this.records.held(credentials.clientId);
    const client = tokenEndpointClient(held?.record);
    if (!held || !client) return undefined;
    const authenticated = verifyClientSecret(this.pepper, credentials.clientSecret, client.secretHash);
    return { client, knownChange: held.knownChange, authenticated };
  }

  /** Second step, in constant time: an unknown client runs the same comparison and gets the same answer as a wrong secret. */
  verify(attempt: ClientAttempt): ApiUser {
    const matches = verifyClientSecret(this.pepper, attempt.secret, attempt.client?.secretHash);
    if (!attempt.client) throw invalidClient(attempt.clientId, attempt.refusal);
    if (!matches) throw invalidClient(attempt.clientId, "wrong secret");
    return attempt.client;
  }
}

/** The user if it may use the token endpoint: SCIM-token users authenticate on SCIM paths only. */
function tokenEndpointClient(user: ApiUser | undefined): ApiUser | undefined {
  return user?.credentialType === "CLIENT_CREDENTIALS" ? user : undefined;
}

/** A held record and whether the presented secret matches it. */
export interface HeldAttempt {
  readonly client: ApiUser;
  readonly knownChange: number;
  readonly authenticated: boolean;
}

/** A client authentication in progress: what was presented, and who it names (undefined: nobody who may). */
export interface ClientAttempt {
  readonly clientId: string;
  readonly secret: string;
  readonly client: ApiUser | undefined;
  /** Why nobody who may use the token endpoint was found (for the log only). */
  readonly refusal?: InvalidClientReason;
}
