import type { KeyMaterial } from "../shared/key-material.js";
import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import type { ApiUser } from "../api-users/model.js";
import type { ApiUserRepository } from "../api-users/ports.js";
import { verifyClientSecret } from "../shared/client-secret.js";
import { holdsForbiddenText } from "../shared/text.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { ClientRecordCache } from "./client-record-cache.js";
import type { PresentedCredentials } from "./model.js";
import { invalidClient, invalidRequest, type InvalidClientReason } from "./oauth-errors.js";

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
    private readonly records?: ClientRecordCache,
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
    const { clientId, clientSecret } = credentialsOf(presented);
    // RFC 6749 5.2 (and RFC 8693 5): no client authentication at all is 401 invalid_client.
    if (!clientId && !clientSecret)
      throw new DomainError(
        "CLIENT_AUTHENTICATION_REQUIRED",
        "Client authentication is required (HTTP Basic, or client_id and client_secret)",
      );
    if (!clientId || !clientSecret)
      throw invalidRequest("Client authentication is required (client_id and client_secret)", "client_id");
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
    if (!this.records) return undefined;
    let credentials: { clientId: string; clientSecret: string };
    try {
      credentials = credentialsOf(presented);
    } catch {
      return undefined;
    }
    if (!credentials.clientId || !credentials.clientSecret) return undefined;
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

function credentialsOf(presented: PresentedCredentials): { clientId: string; clientSecret: string } {
  const basic = parseBasic(presented.authorization);
  if (basic && (presented.formClientId || presented.formClientSecret)) {
    // RFC 6749 2.3: a client must not use more than one authentication method per request.
    if (presented.formClientSecret || presented.formClientId !== basic.clientId) {
      throw invalidRequest("Use either HTTP Basic or client_secret in the body, not both");
    }
  }
  return basic ?? { clientId: presented.formClientId, clientSecret: presented.formClientSecret };
}

/**
 * The longest client_id and client_secret a request may present: the form fields' max_len in the
 * contract (auth.proto), which a unit test compares with these, so Basic is held to the same bounds.
 */
export const CLIENT_CREDENTIAL_MAX_LENGTH = { client_id: 256, client_secret: 1024 } as const;

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * RFC 6749 2.3.1: Basic base64(urlencode(id) ":" urlencode(secret)). The decoded id and secret are
 * held to the rules of the client_id and client_secret form fields (the text rule, the lengths),
 * with the same 400 naming the field: issue 18 found a NUL in Basic reaching Postgres (500).
 */
function parseBasic(header: string | null): { clientId: string; clientSecret: string } | undefined {
  if (!header || !/^basic /i.test(header)) return undefined;
  const malformed = () => invalidRequest("Malformed HTTP Basic credentials");
  const encoded = header.slice(6).trim();
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(encoded)) throw malformed();
  let decoded: string;
  let clientId: string;
  let clientSecret: string;
  try {
    decoded = strictUtf8.decode(Buffer.from(encoded, "base64"));
    const colon = decoded.indexOf(":");
    if (colon < 0) throw malformed();
    clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, " "));
    clientSecret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, " "));
  } catch {
    throw malformed();
  }
  checkLikeFormField("client_id", clientId);
  checkLikeFormField("client_secret", clientSecret);
  return { clientId, clientSecret };
}

/** The refusals the form field would get: the text interceptor's, and protovalidate's max_len. */
function checkLikeFormField(field: keyof typeof CLIENT_CREDENTIAL_MAX_LENGTH, value: string): void {
  if (holdsForbiddenText(value)) {
    throw invalidArgument(`HTTP Basic ${field} contains control characters or invalid Unicode`, [
      { name: field, value: "invalid characters" },
    ]);
  }
  const max = CLIENT_CREDENTIAL_MAX_LENGTH[field];
  // Counted in code points, as protovalidate counts max_len.
  if ([...value].length > max)
    throw invalidArgument(`HTTP Basic ${field} must be at most ${max} characters`, [
      { name: field, value: "too long" },
    ]);
}
