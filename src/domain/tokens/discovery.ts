import { ASSERTION_ALGORITHMS } from "../shared/client-assertion.js";
import { DPOP_ALGORITHMS } from "./dpop-proofs.js";
import { SUPPORTED_GRANTS, type TokenConfig } from "./model.js";
import { ADVERTISED_SCOPES } from "./scopes.js";

/** The endpoints that take a client credential, by their metadata name. */
export function clientAuthEndpoints(issuer: string) {
  return {
    token_endpoint: `${issuer}/v2/auth/oauth2-token`,
    introspection_endpoint: `${issuer}/v2/auth/introspect`,
    revocation_endpoint: `${issuer}/v2/auth/revoke`,
  };
}

/**
 * What a client assertion's `aud` may name (RFC 7523 3): the issuer, or the URL of the endpoint
 * it authenticates to (authlib sends the latter, oauth4webapi and openid-client the former).
 */
export function clientAssertionAudiences(issuer: string): string[] {
  return [issuer, ...Object.values(clientAuthEndpoints(issuer))];
}

const CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt"];

/** RFC 8414: what this authorization server offers, consistent with what it issues. */
export function authorizationServerMetadata(issuer: string): object {
  const endpoints = clientAuthEndpoints(issuer);
  const signing = [...ASSERTION_ALGORITHMS];
  return {
    issuer,
    token_endpoint: endpoints.token_endpoint,
    introspection_endpoint: endpoints.introspection_endpoint,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    grant_types_supported: SUPPORTED_GRANTS,
    token_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    token_endpoint_auth_signing_alg_values_supported: signing,
    introspection_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    introspection_endpoint_auth_signing_alg_values_supported: signing,
    revocation_endpoint: endpoints.revocation_endpoint,
    revocation_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    revocation_endpoint_auth_signing_alg_values_supported: signing,
    scopes_supported: ADVERTISED_SCOPES,
    // RFC 8414 makes this REQUIRED (and section 3.2 forbids an empty array), and validators such as
    // authlib refuse a document without it. There is no authorization endpoint (machine clients
    // only), so the one honest value is "none" (OAuth 2.0 Multiple Response Type Encoding
    // Practices, IANA-registered): the authorization endpoint issues nothing, because there is none.
    // "code" or "token" would claim a flow this server does not offer.
    response_types_supported: ["none"],
    // `sub` is the same for every client (an API user's client id or a user's id).
    subject_types_supported: ["public"],
    // Access tokens are RFC 9068 JWTs signed EdDSA (RFC 9068 section 2.1 names this metadata).
    access_token_signing_alg_values_supported: ["EdDSA"],
    // RFC 9449 5.1: the DPoP proof algorithms the token endpoint and every protected RPC accept.
    dpop_signing_alg_values_supported: DPOP_ALGORITHMS,
  };
}

/**
 * The same metadata as OpenID Provider metadata (OpenID Connect Discovery 1.0), served at
 * /.well-known/openid-configuration, where OpenID clients look first (openid-client's default
 * discovery, authlib's OpenIDProviderMetadata). That profile requires
 * `id_token_signing_alg_values_supported` with RS256 among its values, so it is listed: it says
 * how an ID token would be signed, and none is ever issued (there is no authorization endpoint,
 * and the client credentials and token exchange grants return none, as at Hydra or Keycloak).
 * Without it the document fails OpenID validators; removing the address would break the clients
 * that discover there.
 */
export function openIdProviderMetadata(issuer: string): object {
  return { ...authorizationServerMetadata(issuer), id_token_signing_alg_values_supported: ["RS256"] };
}

/**
 * OpenID Shared Signals Framework 1.0 transmitter metadata (/.well-known/ssf-configuration): SETs
 * by RFC 8936 poll only, signed with the access tokens' keys. No stream management: every resource
 * server has one stream (its feed at the poll endpoint) with every event and every subject, so
 * there is no configuration, status or verification endpoint to advertise (docs/ssf.md).
 */
export function ssfConfiguration(issuer: string): object {
  return {
    spec_version: "1_0",
    issuer,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    delivery_methods_supported: ["urn:ietf:rfc:8936"],
    // Resource servers authenticate with their client id and secret, HTTP Basic (RFC 7617), or a
    // client assertion signed by a key they registered (RFC 7523).
    authorization_schemes: [{ spec_urn: "urn:ietf:rfc:7617" }, { spec_urn: "urn:ietf:rfc:7523" }],
    // Every API user and every token of every tenant: a resource server verifies them all.
    default_subjects: "ALL",
  };
}

/**
 * How long a JWKS response may be cached: 5 minutes, or a third of the pre-publication period when
 * that is shorter, so a cache that follows it refetches at least twice between a key's publication
 * and its first token.
 */
export function jwksMaxAgeSeconds(tokens: Pick<TokenConfig, "signingKeyPrepublishSeconds">): number {
  return Math.min(300, Math.floor(tokens.signingKeyPrepublishSeconds / 3));
}
