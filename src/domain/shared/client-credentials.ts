import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import type { PresentedCredentials } from "../tokens/model.js";
import { holdsForbiddenText } from "./text.js";

/**
 * Client credentials as a request presents them: HTTP Basic (client_secret_basic, RFC 6749
 * 2.3.1) or the client_id and client_secret form fields (client_secret_post). One parser for
 * every caller that authenticates with a client id and secret: API users at the token endpoints,
 * resource servers at introspection.
 */

/** A malformed OAuth request; the OAuth dialect adds RFC 6749's `error` at the edge. */
export const invalidRequest = (message: string, parameter?: string) =>
  new DomainError("INVALID_REQUEST", message, { params: parameter ? [{ name: parameter, value: "invalid" }] : [] });

/**
 * The client id and secret a request presents (either may be empty). Basic together with a body
 * secret, or with another body client_id, is refused (RFC 6749 2.3: one method per request).
 */
export function credentialsOf(presented: PresentedCredentials): { clientId: string; clientSecret: string } {
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
 * The id and secret when the request presents both, well formed; undefined for anything else
 * (the one-round-trip paths leave those to the step-by-step path, which answers them).
 */
export function plainCredentialsOf(
  presented: PresentedCredentials,
): { clientId: string; clientSecret: string } | undefined {
  try {
    const credentials = credentialsOf(presented);
    return credentials.clientId && credentials.clientSecret ? credentials : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Both halves, or the refusal: none at all is 401 invalid_client (RFC 6749 5.2, RFC 8693 5),
 * only one of them 400 invalid_request. Nothing is looked up yet.
 */
export function requiredCredentialsOf(presented: PresentedCredentials): { clientId: string; clientSecret: string } {
  const credentials = credentialsOf(presented);
  if (!credentials.clientId && !credentials.clientSecret)
    throw new DomainError(
      "CLIENT_AUTHENTICATION_REQUIRED",
      "Client authentication is required (HTTP Basic, or client_id and client_secret)",
    );
  if (!credentials.clientId || !credentials.clientSecret)
    throw invalidRequest("Client authentication is required (client_id and client_secret)", "client_id");
  return credentials;
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
