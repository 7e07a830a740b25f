import type { ApiUser } from "../api-users/model.js";
import type { ApiUserRepository } from "../api-users/ports.js";
import { verifyClientSecret } from "../shared/client-secret.js";
import type { UnitOfWork } from "../shared/unit-of-work.js";
import type { PresentedCredentials } from "./model.js";
import { invalidClient, invalidRequest } from "./oauth-errors.js";

/**
 * Client authentication for the token endpoints: client_secret_post as the spec documents,
 * and client_secret_basic (RFC 6749 2.3.1) because standard OAuth libraries use it. An unknown
 * client runs the same comparison as a wrong secret and gets the same answer.
 */
export class ClientAuthenticator {
  constructor(
    private readonly uow: UnitOfWork,
    private readonly apiUsers: ApiUserRepository,
    private readonly pepper: Buffer,
  ) {}

  /** The client id the request names, before authenticating it (rate limiting keys on it). */
  static claimedClientId(presented: PresentedCredentials): string | undefined {
    try {
      return credentialsOf(presented).clientId || undefined;
    } catch {
      return presented.formClientId || undefined;
    }
  }

  async authenticate(presented: PresentedCredentials): Promise<ApiUser> {
    const { clientId, clientSecret } = credentialsOf(presented);
    if (!clientId || !clientSecret) throw invalidRequest("Client authentication is required (client_id and client_secret)", "client_id");
    const user = await this.apiUsers.findActive(this.uow.direct, clientId);
    const matches = verifyClientSecret(this.pepper, clientSecret, user?.secretHash);
    // SCIM-token users authenticate with their SCIM token on SCIM paths only.
    if (!user || !matches || user.credentialType !== "CLIENT_CREDENTIALS") throw invalidClient();
    return user;
  }
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

/** RFC 6749 2.3.1: Basic base64(urlencode(id) ":" urlencode(secret)). */
function parseBasic(header: string | null): { clientId: string; clientSecret: string } | undefined {
  if (!header || !/^basic /i.test(header)) return undefined;
  const decoded = Buffer.from(header.slice(6).trim(), "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) throw invalidRequest("Malformed HTTP Basic credentials");
  try {
    return {
      clientId: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, " ")),
      clientSecret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, " ")),
    };
  } catch {
    throw invalidRequest("Malformed HTTP Basic credentials");
  }
}
