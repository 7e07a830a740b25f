// private_key_jwt (RFC 7523 2.2) over HTTP for tests: the token request that carries an
// assertion, and the REST registration of a client's keys; the key pairs and assertions
// themselves are client-assertion-kit.ts's (which the unit tests use without a service).
import type { JWK } from "jose";
import { callApi } from "./api.js";
import { ASSERTION_TYPE } from "./client-assertion-kit.js";
import { accessTokenOf, postForm, TOKEN_PATH, type Client } from "./token-kit.js";

export { assertion, ASSERTION_TYPE, keyPair, refusalsIn, type KeyPair } from "./client-assertion-kit.js";

export const tokenWith = (baseUrl: string, clientAssertion: string, extra: Record<string, string> = {}) =>
  postForm(baseUrl, TOKEN_PATH, {
    grant_type: "client_credentials",
    client_assertion_type: ASSERTION_TYPE,
    client_assertion: clientAssertion,
    ...extra,
  });

/** Registers `keys` for `clientId` through the REST API as its TMC admin (or, as `{ jwksUri }`, their URL). */
export async function setKeys(
  baseUrl: string,
  admin: Client,
  clientId: string,
  keys: readonly JWK[] | { readonly jwksUri: string; readonly keys?: readonly JWK[] },
) {
  const adminToken = await accessTokenOf(baseUrl, admin);
  return callApi(baseUrl, "/v2/api-users/keys", adminToken, { clientId, ...(Array.isArray(keys) ? { keys } : keys) });
}
