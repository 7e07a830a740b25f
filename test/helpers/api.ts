import { operatorCall } from "./service.js";

/** Small REST helpers for tests that act as an API user would. */
export async function fetchToken(
  baseUrl: string,
  clientId: string,
  clientSecret: string,
  extra: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${baseUrl}/v2/auth/oauth2-token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "client_credentials",
      client_id: clientId,
      client_secret: clientSecret,
      ...extra,
    }),
  });
}

/** An access token, or a thrown error naming the status. */
export async function accessToken(
  baseUrl: string,
  clientId: string,
  clientSecret: string,
  extra: Record<string, string> = {},
): Promise<string> {
  const response = await fetchToken(baseUrl, clientId, clientSecret, extra);
  const body = (await response.json()) as { access_token?: string };
  if (response.status !== 200 || !body.access_token)
    throw new Error(`token request failed with ${response.status}: ${JSON.stringify(body)}`);
  return body.access_token;
}

/** Calls a JSON REST path with a bearer token (GET without a body, POST with one). */
export function callApi(baseUrl: string, path: string, token: string, body?: object): Promise<Response> {
  return fetch(`${baseUrl}${path}`, {
    method: body ? "POST" : "GET",
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
}

/** Seeds a demo tenant through the operator API and returns its TMC admin's `Bearer …` header value. */
export async function seededAdminAuthorization(baseUrl: string): Promise<string> {
  const seed = await operatorCall<{ clientId: string; clientSecret: string }>(baseUrl, "Seed", {});
  return `Bearer ${await accessToken(baseUrl, seed.clientId, seed.clientSecret)}`;
}
