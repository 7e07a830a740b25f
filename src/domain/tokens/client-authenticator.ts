import {
  checkClientAssertion,
  provedAttempt,
  verdictOf,
  type AttemptAssertion,
  type ClientAssertionRules,
} from "../shared/client-assertion-check.js";
import type { KeyMaterial } from "../shared/key-material.js";
import type { ApiUser } from "../api-users/model.js";
import type { ApiUserRepository } from "../api-users/ports.js";
import { verifyClientSecret } from "../shared/client-secret.js";
import { isPlain, requireCredentials, type ClientCredentials } from "../shared/client-credentials.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { ClientRecordCache } from "../shared/client-record-cache.js";
import { invalidClient, type InvalidClientReason } from "./oauth-errors.js";
import type { ClientAttempt as Attempt, ClientAuthentication, HeldClient } from "./ports.js";

/**
 * API users' authentication at the token endpoints: client_secret_post as the spec documents,
 * client_secret_basic (RFC 6749 2.3.1) because standard OAuth libraries use it, and
 * private_key_jwt (RFC 7523 2.2) for a user that registered public keys. An unknown client runs
 * the same comparison as a wrong secret and gets the same answer.
 */
export class ClientAuthenticator implements ClientAuthentication<ApiUser, ClientAttempt> {
  private readonly uow: UnitOfWork;
  private readonly apiUsers: ApiUserRepository;
  private readonly pepper: KeyMaterial["secretPepper"];
  private readonly records: ClientRecordCache<ApiUser> | undefined;
  private readonly assertions: ClientAssertionRules | undefined;
  /** The requests (their credentials, one object per request) whose assertion's jti the one-round-trip path spent. */
  private readonly spentByHeldPath = new WeakSet<ClientCredentials>();

  constructor(deps: {
    readonly uow: UnitOfWork;
    readonly apiUsers: ApiUserRepository;
    readonly pepper: KeyMaterial["secretPepper"];
    /** Records kept in process, checked against the current generation; without it every lookup reads the database. */
    readonly records?: ClientRecordCache<ApiUser>;
    /** Without them (tests of the secret methods only), every assertion is refused. */
    readonly assertions?: ClientAssertionRules;
  }) {
    ({
      uow: this.uow,
      apiUsers: this.apiUsers,
      pepper: this.pepper,
      records: this.records,
      assertions: this.assertions,
    } = deps);
  }

  /**
   * First step: the client the credentials name if it exists and may use the token endpoint
   * (SCIM-token users authenticate with their SCIM token on SCIM paths only). Nothing is verified yet.
   */
  async lookUp(credentials: ClientCredentials): Promise<ClientAttempt> {
    requireCredentials(credentials);
    const { clientId, clientSecret } = credentials;
    const load = () => this.apiUsers.findActive(this.uow.direct, clientId);
    const user = this.records ? await this.records.find(clientId, load) : await load();
    const client = tokenEndpointClient(user);
    if (!client)
      return {
        clientId,
        secret: clientSecret,
        client,
        refusal: user ? "not a client-credentials API user (SCIM token)" : "unknown or revoked client",
      };
    if (credentials.assertion === undefined) return { clientId, secret: clientSecret, client };
    const spent = this.spentByHeldPath.has(credentials);
    return { clientId, secret: "", client, assertion: { presented: credentials.assertion, spent } };
  }

  /**
   * The assertion checked against the client's registered keys and the rules
   * (client-assertion-check.ts); its jti not spent again when this very request spent it on the
   * one-round-trip path (its held record was found stale: the signature is checked again with the
   * current keys).
   */
  prove(attempt: ClientAttempt): Promise<ClientAttempt> {
    return provedAttempt(this.assertions, attempt);
  }

  held(credentials: ClientCredentials): HeldClient<ApiUser> | undefined | Promise<HeldClient<ApiUser> | undefined> {
    if (credentials.method === "private_key_jwt") return this.heldAssertion(credentials);
    if (!this.records || !isPlain(credentials)) return undefined;
    const held = this.records.held(credentials.clientId);
    const client = tokenEndpointClient(held?.record);
    if (!held || !client) return undefined;
    const authenticated = verifyClientSecret(this.pepper, credentials.clientSecret, client.secretHash);
    return { record: client, knownChange: held.knownChange, authenticated };
  }

  /**
   * private_key_jwt on the one-round-trip path: the assertion verified with the held record's keys
   * and its jti spent, before the round trip that spends the budgets (a refused one spends a
   * failure point there, as a wrong secret does). Should that round trip find the record stale,
   * the step-by-step path checks the assertion again with the current keys, and does not spend
   * the jti a second time (this request spent it).
   */
  private async heldAssertion(credentials: ClientCredentials): Promise<HeldClient<ApiUser> | undefined> {
    if (!this.records || credentials.malformed || !credentials.clientId || credentials.assertion === undefined)
      return undefined;
    const held = this.records.held(credentials.clientId);
    const client = tokenEndpointClient(held?.record);
    if (!held || !client) return undefined;
    const verdict = await checkClientAssertion(this.assertions, client, credentials.assertion);
    if (verdict === "verified") this.spentByHeldPath.add(credentials);
    return {
      record: client,
      knownChange: held.knownChange,
      authenticated: verdict === "verified",
      ...(verdict === "verified" ? {} : { refusal: invalidClient(client.clientId, verdict) }),
    };
  }

  verify(attempt: ClientAttempt): ApiUser {
    if (attempt.assertion !== undefined) {
      if (!attempt.client) throw invalidClient(attempt.clientId, attempt.refusal);
      const verdict = verdictOf(attempt.assertion);
      if (verdict !== "verified") throw invalidClient(attempt.clientId, verdict);
      return attempt.client;
    }
    const matches = verifyClientSecret(this.pepper, attempt.secret, attempt.client?.secretHash);
    if (!attempt.client) throw invalidClient(attempt.clientId, attempt.refusal);
    if (!matches) throw invalidClient(attempt.clientId, "wrong secret");
    return attempt.client;
  }

  wrongSecret(clientId: string) {
    return invalidClient(clientId, "wrong secret");
  }
}

/** The user if it may use the token endpoint: SCIM-token users authenticate on SCIM paths only. */
function tokenEndpointClient(user: ApiUser | undefined): ApiUser | undefined {
  return user?.credentialType === "CLIENT_CREDENTIALS" ? user : undefined;
}

/** An API user's authentication in progress; `refusal` says why nobody who may use the token endpoint was found (for the log only). */
export interface ClientAttempt extends Attempt<ApiUser> {
  readonly refusal?: InvalidClientReason;
  /** private_key_jwt: the assertion as presented, then (after prove) its verdict. */
  readonly assertion?: AttemptAssertion;
}
