// Shared fixtures of the token tests (test/tokens/*): a service with an injectable clock, token
// endpoint calls over plain HTTP, tenant provisioning through the operator RPCs, token crafting
// with the service's genuine signing key, and a grpc-js client that decodes ErrorResponse details.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { PassThrough } from "node:stream";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import * as DPoP from "dpop";
import { importJWK, type CryptoKey, type JWK } from "jose";
import { createService } from "../../src/app/compose.js";
import { loadConfig } from "../../src/config/config.js";
import { internalsOf } from "../../src/app/test-access.js";
import { open } from "../../src/domain/shared/aead.js";
import type { ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";
import { newStorage, serviceEnv, type Storage } from "./backend.js";
import { freePort } from "./free-port.js";
import { decodeRpcStatus, errorResponseIn } from "./grpc-status.js";
import { dropStorage, operatorCall, type RunningService } from "./service.js";

export const ISSUER = "http://auth.test";
export const AUDIENCE = "http://auth.test/v2";
export const TOKEN_PATH = "/v2/auth/oauth2-token";
export const INTROSPECT_PATH = "/v2/auth/introspect";
export const LEGACY_PATH = "/get-auth-token";
export const GRANT_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
export const TYPE_ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token";
export const TYPE_JWT = "urn:ietf:params:oauth:token-type:jwt";
export const TMC_ADMIN_SCOPES = [
  "api-users",
  "users:read",
  "users:write",
  "air-credits:read",
  "air-credits:write",
  "scim",
  "openid",
];
export const COMPANY_ADMIN_SCOPES = TMC_ADMIN_SCOPES.filter((s) => s !== "api-users");

/**
 * Every token test calls from 127.0.0.1, so the default failure budget per address (10 per 15
 * minutes) would lock a whole file out after a few deliberate wrong secrets. Files that do not
 * test rate limiting start their services with these roomy budgets instead.
 */
export const ROOMY_RATE_LIMITS: Record<string, string> = {
  TOKEN_RATE_LIMIT_PER_CLIENT: "100000/60",
  TOKEN_RATE_LIMIT_PER_ADDRESS: "100000/60",
  TOKEN_FAILURE_LIMIT: "100000/60",
};

/** A clock the service issues and verifies tokens with; tests move it forward. */
export class TestClock {
  private offsetMs = 0;
  readonly now = (): Date => new Date(Date.now() + this.offsetMs);
  advanceSeconds(seconds: number): void {
    this.offsetMs += seconds * 1000;
  }
  reset(): void {
    this.offsetMs = 0;
  }
}

/** Like startService (test/helpers/service.ts), plus an optional injected clock. */
export async function startTokenService(
  options: { env?: Record<string, string>; now?: () => Date; storage?: Storage } = {},
): Promise<RunningService> {
  const storage = options.storage ?? newStorage();
  // A short drain (as serviceEnv sets it): a stop() with a stream still open ends quickly.
  const config = loadConfig(serviceEnv(storage, { SHUTDOWN_TIMEOUT_MS: "500", ...options.env }));
  const chunks: string[] = [];
  const logStream = new PassThrough();
  logStream.on("data", (chunk: Buffer) => chunks.push(chunk.toString("utf8")));
  const service = await createService(config, { logStream, ...(options.now ? { now: options.now } : {}) });
  const baseUrl = await service.listen();
  return { service, baseUrl, storage, logs: () => chunks.join(""), stop: () => service.close() };
}

/**
 * A service with roomy budgets whose issuer is its own address (TOKEN_ISSUER and TOKEN_AUDIENCE
 * unset, the defaults), so discovery clients (oauth4webapi, openid-client) check it as they would.
 */
export async function startServiceAtOwnAddress(
  options: { now?: () => Date; env?: Record<string, string> } = {},
): Promise<RunningService> {
  return startTokenService({
    ...options,
    env: {
      ...ROOMY_RATE_LIMITS,
      HOST: "127.0.0.1",
      PORT: String(await freePort()),
      TOKEN_ISSUER: "",
      TOKEN_AUDIENCE: "",
      ...options.env,
    },
  });
}

/** Stops the service and removes its storage (schema, Redis keys, data directory). */
export async function disposeService(running: RunningService | undefined): Promise<void> {
  if (!running) return;
  await running.stop();
  await dropStorage(running.storage);
}

// ---- HTTP ----------------------------------------------------------------------------------

export interface HttpReply {
  status: number;
  headers: Headers;
  body: any;
}

async function reply(response: Response): Promise<HttpReply> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, headers: response.headers, body };
}

/** Two instances on one storage (one Postgres and Redis): what one changes, the other must answer at once. */
export async function startTwoTokenServices(
  env: Record<string, string>,
): Promise<{ a: RunningService; b: RunningService; stop(): Promise<void> }> {
  const storage = newStorage();
  const [a, b] = await Promise.all([startTokenService({ storage, env }), startTokenService({ storage, env })]);
  return {
    a,
    b,
    stop: async () => {
      await Promise.all([a.stop(), b.stop()]);
      await dropStorage(storage);
    },
  };
}

/** POST application/x-www-form-urlencoded. */
export async function postForm(
  baseUrl: string,
  path: string,
  fields: Record<string, string> | string,
  headers: Record<string, string> = {},
): Promise<HttpReply> {
  const body = typeof fields === "string" ? fields : new URLSearchParams(fields).toString();
  return reply(
    await fetch(`${baseUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body,
    }),
  );
}

export async function postJson(
  baseUrl: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<HttpReply> {
  return reply(
    await fetch(`${baseUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    }),
  );
}

/** GET with `Authorization: Bearer <token>` (token string), a raw Authorization value, or none. */
export async function getWith(
  baseUrl: string,
  path: string,
  auth: { token?: string; authorization?: string } = {},
): Promise<HttpReply> {
  const headers: Record<string, string> = {};
  if (auth.token !== undefined) headers.authorization = `Bearer ${auth.token}`;
  if (auth.authorization !== undefined) headers.authorization = auth.authorization;
  return reply(await fetch(`${baseUrl}${path}`, { headers }));
}

/** RFC 6749 2.3.1: Basic base64(urlencode(id) ":" urlencode(secret)). */
export function basicAuthorization(
  clientId: string,
  clientSecret: string,
  encode: (s: string) => string = formUrlEncode,
): string {
  return `Basic ${Buffer.from(`${encode(clientId)}:${encode(clientSecret)}`, "utf8").toString("base64")}`;
}

/** application/x-www-form-urlencoded encoding of one value (space as +). */
export function formUrlEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

/** Percent-encodes every character (legal, if unusual): the server must decode before comparing. */
export function percentEncodeAll(value: string): string {
  return [...Buffer.from(value, "utf8")].map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join("");
}

/** The client_credentials grant with client_secret_post. */
export function clientCredentials(
  baseUrl: string,
  client: Client,
  extra: Record<string, string> = {},
): Promise<HttpReply> {
  return postForm(baseUrl, TOKEN_PATH, {
    grant_type: "client_credentials",
    client_id: client.clientId,
    client_secret: client.clientSecret,
    ...extra,
  });
}

/**
 * A token request as `client` (client_secret_post) with `fields`; with `keys`, a DPoP proof by them
 * (panva's `dpop` package), retried once with the nonce a use_dpop_nonce refusal offers (RFC 9449 8).
 */
export async function dpopTokenRequest(
  baseUrl: string,
  client: Client,
  fields: Record<string, string>,
  keys?: DPoP.KeyPair,
): Promise<HttpReply> {
  const body = { client_id: client.clientId, client_secret: client.clientSecret, ...fields };
  const url = `${baseUrl}${TOKEN_PATH}`;
  const send = async (nonce?: string) =>
    postForm(baseUrl, TOKEN_PATH, body, keys ? { dpop: await DPoP.generateProof(keys, url, "POST", nonce) } : {});
  const first = await send();
  if (first.body?.error !== "use_dpop_nonce") return first;
  return send(first.headers.get("dpop-nonce") ?? undefined);
}

/** An access token for the client, asserting success. */
export async function accessTokenOf(
  baseUrl: string,
  client: Client,
  extra: Record<string, string> = {},
): Promise<string> {
  const res = await clientCredentials(baseUrl, client, extra);
  assert.equal(res.status, 200, `token request failed: ${JSON.stringify(res.body)}`);
  return res.body.access_token as string;
}

/** Asserts a token-endpoint ErrorResponse: status, errorCode, RFC 6749 `error` and `error_description`. */
export function assertOAuthError(res: HttpReply, status: number, errorCode: string, error: string): void {
  assert.equal(res.status, status, `expected ${status} ${errorCode}, got ${res.status} ${JSON.stringify(res.body)}`);
  assert.equal(res.body?.errorMessages?.[0]?.errorCode, errorCode, JSON.stringify(res.body));
  assert.equal(res.body.error, error);
  assert.equal(typeof res.body.error_description, "string");
  assert.ok(res.body.error_description.length > 0, "error_description is non-empty");
  assert.match(res.body.debugIdentifier, /\S/);
  assert.equal(res.headers.get("cache-control"), "no-store");
}

/**
 * Asserts the exact answer of GET /v2/api-users (GetApiUsers, implemented): 200 with the page of the
 * caller's TMC, `{apiUsers: [{clientId}…], totalCount}`, in creation order, and nothing else.
 */
export function assertApiUsersPage(res: HttpReply, clientIds: readonly string[], totalCount = clientIds.length): void {
  assert.equal(res.status, 200, `expected 200 with the TMC's API users, got ${res.status} ${JSON.stringify(res.body)}`);
  assert.deepEqual(res.body, { apiUsers: clientIds.map((clientId) => ({ clientId })), totalCount });
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
}

/** Asserts a plain ErrorResponse status and errorCode (protected RPCs). */
export function assertError(res: HttpReply, status: number, errorCode: string): void {
  assert.equal(res.status, status, `expected ${status} ${errorCode}, got ${res.status} ${JSON.stringify(res.body)}`);
  assert.equal(res.body?.errorMessages?.[0]?.errorCode, errorCode, JSON.stringify(res.body));
  assert.match(res.body.debugIdentifier, /\S/);
}

// ---- tenants ---------------------------------------------------------------------------------

export interface Client {
  clientId: string;
  clientSecret: string;
  tmcId: string;
  role: "TMC_ADMIN" | "COMPANY_ADMIN";
}

export interface Tenant {
  tmcId: string;
  orgId: string;
  admin: Client;
}

/** A fresh TMC with a company and a TMC admin (room for 50 API users). */
export async function newTenant(baseUrl: string): Promise<Tenant> {
  const tmc = await operatorCall<{ tmcId: string }>(baseUrl, "CreateTmc", {
    name: `Tokens ${crypto.randomUUID()}`,
    maxApiUsers: 50,
  });
  const company = await operatorCall<{ orgId: string }>(baseUrl, "CreateCompany", { tmcId: tmc.tmcId, name: "Acme" });
  const admin = await newApiUser(baseUrl, tmc.tmcId, "TMC_ADMIN");
  return { tmcId: tmc.tmcId, orgId: company.orgId, admin };
}

/** A resource server's credentials, as CreateResourceServer answers them (the secret shown once). */
export interface ResourceServerCredential {
  readonly clientId: string;
  readonly clientSecret: string;
}

/** Registers a resource server through the operator API; by default for one audience of its own. */
export const registerResourceServer = (
  baseUrl: string,
  name: string,
  audiences: readonly string[] = [`https://${name.toLowerCase()}-${crypto.randomUUID()}.platform.test/api`],
) => operatorCall<ResourceServerCredential>(baseUrl, "CreateResourceServer", { name, audiences });

export async function newApiUser(
  baseUrl: string,
  tmcId: string,
  role: "TMC_ADMIN" | "COMPANY_ADMIN",
  orgId?: string,
): Promise<Client> {
  const created = await operatorCall<{ clientId: string; clientSecret: string }>(baseUrl, "CreateApiUser", {
    tmcId,
    role,
    credentialType: "CLIENT_CREDENTIALS",
    ...(orgId ? { orgId } : {}),
  });
  return { clientId: created.clientId, clientSecret: created.clientSecret, tmcId, role };
}

export async function newUser(baseUrl: string, orgId: string, email: string, inactive = false): Promise<string> {
  const user = await operatorCall<{ userId: string }>(baseUrl, "CreateUser", {
    orgId,
    email,
    givenName: "Test",
    familyName: "User",
    inactive,
  });
  return user.userId;
}

// ---- JWTs ------------------------------------------------------------------------------------

export function b64urlJson(value: unknown): string {
  return Buffer.from(JSON.stringify(value), "utf8").toString("base64url");
}

/** The decoded header and payload of a compact JWS (no verification). */
export function partsOf(token: string): { header: Record<string, any>; payload: Record<string, any> } {
  const [h, p] = token.split(".");
  return {
    header: JSON.parse(Buffer.from(h!, "base64url").toString("utf8")),
    payload: JSON.parse(Buffer.from(p!, "base64url").toString("utf8")),
  };
}

/** The service's current signing key (kid, private key), decrypted from its database row: the newest one activated by now. */
export async function genuineSigningKey(
  running: RunningService,
  now: Date = new Date(),
): Promise<{ kid: string; key: CryptoKey }> {
  const rows: Array<{ kid: string; alg: string; private_jwk_ciphertext: string; activates_at: Date }> =
    await internalsOf(running.service).db("signing_keys").orderBy("activates_at", "desc");
  const row = rows.find((r) => new Date(r.activates_at).getTime() <= now.getTime()) ?? rows.at(-1);
  assert.ok(row, "the service has a signing key");
  const plaintext = open(
    internalsOf(running.service).keys.signingKeyEncryptionKey,
    Buffer.from(row.private_jwk_ciphertext, "base64url"),
    `signing-key:${row.kid}`,
  );
  assert.ok(plaintext, "the signing key decrypts with the test master key");
  const key = (await importJWK(JSON.parse(plaintext.toString("utf8")) as JWK, row.alg)) as CryptoKey;
  return { kid: row.kid, key };
}

// ---- gRPC ------------------------------------------------------------------------------------

const root = fileURLToPath(new URL("../../", import.meta.url));

let grpcPackage: any;
function loadGrpcPackage(): any {
  grpcPackage ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(["travel/apiuser/v2/api_user.proto", "travel/auth/v2/auth.proto"], {
      includeDirs: [`${root}proto`],
      keepCase: false,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    }),
  );
  return grpcPackage;
}

export interface GrpcOutcome {
  ok: boolean;
  response?: Record<string, any>;
  code?: number;
  errorResponse?: ErrorResponse;
  metadata?: grpc.Metadata;
  /** The error's text as grpc-js decoded it from grpc-message. */
  details?: string;
}

export interface GrpcClients {
  call(
    service: "auth" | "apiUser",
    method: string,
    request: Record<string, unknown>,
    token?: string,
    extraMetadata?: Record<string, string>,
  ): Promise<GrpcOutcome>;
  close(): void;
}

/** grpc-js clients (HTTP/2 cleartext) for AuthService and ApiUserService. */
export function grpcClients(baseUrl: string): GrpcClients {
  const pkg = loadGrpcPackage();
  const address = new URL(baseUrl).host;
  const credentials = grpc.credentials.createInsecure();
  const clients = {
    auth: new pkg.travel.auth.v2.AuthService(address, credentials) as grpc.Client & Record<string, any>,
    apiUser: new pkg.travel.apiuser.v2.ApiUserService(address, credentials) as grpc.Client & Record<string, any>,
  };
  return {
    call(service, method, request, token, extraMetadata = {}) {
      const metadata = new grpc.Metadata();
      if (token !== undefined) metadata.set("authorization", `Bearer ${token}`);
      for (const [name, value] of Object.entries(extraMetadata)) metadata.set(name, value);
      const client = clients[service];
      assert.equal(typeof client[method], "function", `${service}.${method} exists`);
      return new Promise((resolve) => {
        client[method](
          request,
          metadata,
          { deadline: Date.now() + 10_000 },
          (err: grpc.ServiceError | null, res: Record<string, any>) => {
            if (!err) return resolve({ ok: true, response: res });
            let errorResponse: ErrorResponse | undefined;
            try {
              errorResponse = errorResponseOfGrpc(err);
            } catch {
              errorResponse = undefined;
            }
            resolve({ ok: false, code: err.code, errorResponse, metadata: err.metadata, details: err.details });
          },
        );
      });
    },
    close() {
      clients.auth.close();
      clients.apiUser.close();
    },
  };
}

/** The ErrorResponse carried in a grpc-js error's grpc-status-details-bin trailer. */
function errorResponseOfGrpc(err: grpc.ServiceError): ErrorResponse | undefined {
  const [raw] = err.metadata?.get("grpc-status-details-bin") ?? [];
  if (raw === undefined || !Buffer.isBuffer(raw)) return undefined;
  return errorResponseIn(decodeRpcStatus(new Uint8Array(raw)).details);
}

export const GRPC = {
  INVALID_ARGUMENT: 3,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  UNAUTHENTICATED: 16,
} as const;

/** Asserts a failed grpc-js call: status code and the ErrorResponse detail's errorCode. */
export function assertGrpcFailure(outcome: GrpcOutcome, code: number, errorCode: string): ErrorResponse {
  assert.equal(outcome.ok, false, `expected gRPC code ${code}, got success ${JSON.stringify(outcome.response)}`);
  assert.equal(outcome.code, code, `gRPC status (${outcome.errorResponse?.errorMessages[0]?.message})`);
  assert.ok(outcome.errorResponse, "the error carries an ErrorResponse detail");
  assert.equal(outcome.errorResponse.errorMessages[0]?.errorCode, errorCode);
  return outcome.errorResponse;
}

// ---- known src/ bugs ---------------------------------------------------------------------------
