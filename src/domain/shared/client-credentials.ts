import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import { assertionSubject, CLIENT_ASSERTION_TYPE } from "./client-assertion.js";
import { holdsForbiddenText } from "./text.js";

/**
 * Client credentials as a request presents them: HTTP Basic (client_secret_basic, RFC 6749
 * 2.3.1), the client_id and client_secret form fields (client_secret_post), or a signed client
 * assertion (private_key_jwt, RFC 7523 2.2). One parser for
 * every caller that authenticates with a client id and secret: API users at the token endpoints,
 * resource servers at introspection.
 */

/** Credentials as the request carried them: form fields (client_secret_post) and/or a Basic header. */
export interface PresentedCredentials {
  readonly formClientId: string;
  readonly formClientSecret: string;
  readonly authorization: string | null;
  /** RFC 7521 4.2's form fields (absent where an endpoint takes no assertion). */
  readonly clientAssertionType?: string;
  readonly clientAssertion?: string;
}

/** A malformed OAuth request; the OAuth dialect adds RFC 6749's `error` at the edge. */
export const invalidRequest = (message: string, parameter?: string) =>
  new DomainError("INVALID_REQUEST", message, { params: parameter ? [{ name: parameter, value: "invalid" }] : [] });

/**
 * The client credentials of one request, parsed once where the request enters (the RPC edge):
 * what every step after reads (rate limiting and the audit key on `clientId` before anything
 * is authenticated; the authenticators compare `clientSecret`). Malformed credentials keep the
 * form's client id as the claimed one and carry their refusal, thrown where credentials are
 * required, so every caller answers them at the same point of its flow.
 */
export interface ClientCredentials {
  /** The client id the request names ("" when none). */
  readonly clientId: string;
  readonly clientSecret: string;
  /**
   * How they were presented. A method to come (a DPoP proof) adds its variant here, and the
   * authenticator of the clients that may use it reads it.
   */
  readonly method: "client_secret_basic" | "client_secret_post" | "private_key_jwt";
  /** private_key_jwt: the signed assertion (its `sub` is the claimed client id; never logged). */
  readonly assertion?: string;
  /** Why they cannot be used (malformed Basic, two methods at once); undefined when well formed. */
  readonly malformed?: DomainError;
}

/**
 * Parses what a request presents. Basic together with a body secret, or with another body
 * client_id, is refused (RFC 6749 2.3: one method per request).
 */
export function clientCredentialsOf(presented: PresentedCredentials): ClientCredentials {
  try {
    if (presented.clientAssertion || presented.clientAssertionType) return assertionCredentials(presented);
    const basic = parseBasic(presented.authorization);
    if (!basic)
      return {
        clientId: presented.formClientId,
        clientSecret: presented.formClientSecret,
        method: "client_secret_post",
      };
    // RFC 6749 2.3: a client must not use more than one authentication method per request.
    if (presented.formClientSecret || (presented.formClientId && presented.formClientId !== basic.clientId))
      throw invalidRequest("Use either HTTP Basic or client_secret in the body, not both");
    return { ...basic, method: "client_secret_basic" };
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    return { clientId: presented.formClientId, clientSecret: "", method: "client_secret_post", malformed: error };
  }
}

/**
 * RFC 7521 4.2 / RFC 7523 2.2: the assertion is the only credential (no secret, no Basic), of the
 * one assertion type; a client_id, if sent, must be the assertion's subject.
 */
function assertionCredentials(presented: PresentedCredentials): ClientCredentials {
  const assertion = presented.clientAssertion ?? "";
  if (presented.clientAssertionType !== CLIENT_ASSERTION_TYPE)
    throw invalidRequest(`client_assertion_type must be ${CLIENT_ASSERTION_TYPE}`, "client_assertion_type");
  if (!assertion) throw invalidRequest("client_assertion is required", "client_assertion");
  if (presented.formClientSecret || /^basic /i.test(presented.authorization ?? ""))
    throw invalidRequest("Use one client authentication method: the assertion, or a secret", "client_assertion");
  const subject = assertionSubject(assertion);
  if (presented.formClientId && presented.formClientId !== subject)
    throw invalidRequest("client_id is not the assertion's subject", "client_id");
  return { clientId: subject, clientSecret: "", method: "private_key_jwt", assertion };
}

/** The client id the request names, before authenticating it (rate limiting and the audit key on it). */
export const claimedClientId = (credentials: ClientCredentials): string | undefined =>
  credentials.clientId || undefined;

/**
 * Whether the request presents an id and a secret, well formed (the one-round-trip paths leave
 * anything else to the step-by-step path, which answers it).
 */
export const isPlain = (credentials: ClientCredentials): boolean =>
  !credentials.malformed && credentials.clientId !== "" && credentials.clientSecret !== "";

/**
 * Both halves, or the refusal: none at all is 401 invalid_client (RFC 6749 5.2, RFC 8693 5),
 * only one of them 400 invalid_request. Nothing is looked up yet.
 */
export function requireCredentials(credentials: ClientCredentials): void {
  if (credentials.malformed) throw credentials.malformed;
  if (credentials.method === "private_key_jwt") return;
  if (!credentials.clientId && !credentials.clientSecret)
    throw new DomainError(
      "CLIENT_AUTHENTICATION_REQUIRED",
      "Client authentication is required (HTTP Basic, or client_id and client_secret)",
    );
  if (!credentials.clientId || !credentials.clientSecret)
    throw invalidRequest("Client authentication is required (client_id and client_secret)", "client_id");
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
 * with the same 400 naming the field: a NUL in Basic once reached Postgres (500).
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
