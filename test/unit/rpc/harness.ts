import { PostgresReplayCache, PostgresReplayCacheBirths } from "../../../src/store/postgres/replay-cache.js";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { AsyncLocalStorage } from "node:async_hooks";
import {
  Code,
  ConnectError,
  createClient,
  createContextValues,
  type Client,
  type Transport,
} from "@connectrpc/connect";
import { ApiUserService } from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import { AuthService } from "../../../gen/travel/auth/v2/auth_pb.js";
import { ErrorResponseSchema, type ErrorResponse } from "../../../gen/travel/common/v1/error_pb.js";
import { OperatorService } from "../../../gen/travel/operator/v1/operator_pb.js";
import { UserService } from "../../../gen/travel/user/v2/user_pb.js";
import { createDomainServices } from "../../../src/app/domain-services.js";
import { loadConfig } from "../../../src/config/config.js";
import { deriveKeyMaterial, type KeyMaterial } from "../../../src/domain/shared/key-material.js";
import { silentLogger } from "../../../src/domain/shared/observability.js";
import { createMetrics, type Metrics } from "../../../src/observability/metrics.js";
import { requestInfoKey, type RequestInfo } from "../../../src/rpc/request-context.js";
import { createRpcCore, type RpcCore } from "../../../src/rpc/routes.js";
import { openSharedState } from "../../../src/store/shared-state.js";
import { FakeChangeFeed } from "../../fakes/change-feed.js";
import { FakeClock } from "../../fakes/clock.js";
import { pgliteTestStore, type PgliteTestStore } from "../../fakes/pglite-store.js";

export const OPERATOR_TOKEN = "operator-token-for-tests";
export const ISSUER = "http://auth.test";
export const AUDIENCE = "http://auth.test/v2";

/**
 * The RPC tier: the real domain (createDomainServices) over the real repositories on the process's
 * PGlite (emptied first), the in-process twins of Redis and a fake change feed hearing PGlite's
 * NOTIFYs (as an instance over Postgres hears its own), the real interceptor chain, and Connect
 * clients on the router transport — no database server, no Redis, no port.
 */
export interface RpcHarness {
  readonly clock: FakeClock;
  readonly store: PgliteTestStore;
  readonly feed: FakeChangeFeed;
  readonly keys: KeyMaterial;
  readonly metrics: Metrics;
  readonly domain: ReturnType<typeof createDomainServices>;
  readonly rpc: RpcCore;
  readonly auth: Client<typeof AuthService>;
  readonly apiUsers: Client<typeof ApiUserService>;
  readonly operator: Client<typeof OperatorService>;
  readonly users: Client<typeof UserService>;
}

export async function startRpc(env: Record<string, string> = {}): Promise<RpcHarness> {
  const clock = new FakeClock();
  const store = await pgliteTestStore();
  const config = loadConfig({ TOKEN_ISSUER: ISSUER, ...env });
  const keys = deriveKeyMaterial(crypto.randomBytes(32));
  const shared = openSharedState(
    { ...config.storage, redisUrl: undefined, redisKeyPrefix: "t:" },
    {
      credentialCacheSeconds: 300,
      onRateLimitFallback: () => {},
      replay: {
        database: new PostgresReplayCache(store.uow.direct),
        births: new PostgresReplayCacheBirths(store.uow.direct),
      },
    },
    silentLogger,
  );
  const metrics = createMetrics();
  const feed = new FakeChangeFeed(store.notifications);
  const domain = createDomainServices({
    config,
    uow: store.uow,
    jobsUow: store.uow,
    repositories: store.repositories,
    shared,
    changeFeed: feed,
    keys,
    operatorToken: OPERATOR_TOKEN,
    logger: silentLogger,
    metrics,
    clock: clock.now,
  });
  await domain.signingKeys.start();
  await domain.generations.start();
  await feed.connecting;
  const core = createRpcCore(
    { ...domain, operator: { ...domain.operator, migrate: async () => [] } },
    { logger: silentLogger, metrics, principalBudget: config.principalBudget },
  );
  const rpc = { ...core, transport: withAmbientRequest(core.transport) };
  return {
    clock,
    store,
    feed,
    keys,
    metrics,
    domain,
    rpc,
    auth: createClient(AuthService, rpc.transport),
    apiUsers: createClient(ApiUserService, rpc.transport),
    operator: createClient(OperatorService, rpc.transport),
    users: createClient(UserService, rpc.transport),
  };
}

/** The request `asRequest` is running, for the harness's transport to hand over. */
const ambientRequest = new AsyncLocalStorage<RequestInfo>();

/** Runs `call` as the REST gateway would: with a request id and a source address. */
export function asRequest<T>(requestId: string, remoteAddress: string, call: () => Promise<T>): Promise<T> {
  return ambientRequest.run({ requestId, remoteAddress }, call);
}

/** The core's transport, giving each call the request of the `asRequest` around it as the gateway gives its own. */
function withAmbientRequest(transport: Transport): Transport {
  return {
    unary: (method, signal, timeoutMs, header, input, contextValues) => {
      const info = ambientRequest.getStore();
      const values = info ? (contextValues ?? createContextValues()).set(requestInfoKey, info) : contextValues;
      return transport.unary(method, signal, timeoutMs, header, input, values);
    },
    stream: (...args) => transport.stream(...args),
  };
}

export const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
export const asOperator = bearer(OPERATOR_TOKEN);

/** A TMC (limit `maxApiUsers`) with one company and a TMC admin created by the operator. */
export async function provisionTmc(
  h: RpcHarness,
  maxApiUsers = 5,
): Promise<{ tmcId: string; orgId: string; clientId: string; clientSecret: string }> {
  const { tmcId } = await h.operator.createTmc({ name: "Globetrotter TMC", maxApiUsers }, asOperator);
  const { orgId } = await h.operator.createCompany({ tmcId, name: "Acme" }, asOperator);
  const { clientId, clientSecret } = await h.operator.createApiUser({ tmcId }, asOperator);
  return { tmcId, orgId, clientId, clientSecret };
}

/** An access token by client_credentials over the transport (each from its own address, so budgets do not interfere). */
export async function accessToken(h: RpcHarness, clientId: string, clientSecret: string, scope = ""): Promise<string> {
  const address = `10.${crypto.randomInt(255)}.${crypto.randomInt(255)}.${crypto.randomInt(255)}`;
  const response = await asRequest("token", address, () =>
    h.auth.fetchOauth2Token({ grantType: "client_credentials", clientId, clientSecret, scope }),
  );
  return response.accessToken;
}

/** The ConnectError a call rejects with. */
export async function connectErrorOf(call: Promise<unknown>): Promise<ConnectError> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(
    error instanceof ConnectError,
    `expected a ConnectError, got ${error === undefined ? "success" : String(error)}`,
  );
  return error;
}

export interface ExpectedRpcError {
  readonly code: Code;
  readonly errorCode: string;
  readonly message: string;
  readonly params?: ReadonlyArray<{ name: string; value: string }>;
  /** OAuth dialect: RFC 6749 `error` (empty when the service speaks none). */
  readonly error?: string;
  readonly errorDescription?: string;
  readonly debugIdentifier?: string;
}

/** The Connect code and the ErrorResponse detail, exactly. */
export async function rejectsWithRpc(
  call: Promise<unknown>,
  expected: ExpectedRpcError,
): Promise<{ error: ConnectError; body: ErrorResponse }> {
  const error = await connectErrorOf(call);
  const [body, ...more] = error.findDetails(ErrorResponseSchema);
  assert.ok(body, `no ErrorResponse detail on ${Code[error.code]}: ${error.rawMessage}`);
  assert.equal(more.length, 0);
  assert.deepEqual(
    {
      code: Code[error.code],
      rawMessage: error.rawMessage,
      errorMessages: body.errorMessages.map((m) => ({
        errorCode: m.errorCode,
        message: m.message,
        errorParameters: m.errorParameters.map((p) => ({ name: p.name, value: p.value })),
        errorDetail: m.errorDetail,
      })),
      error: body.error,
      errorDescription: body.errorDescription,
      ...(expected.debugIdentifier === undefined ? {} : { debugIdentifier: body.debugIdentifier }),
    },
    {
      code: Code[expected.code],
      rawMessage: expected.message,
      errorMessages: [
        {
          errorCode: expected.errorCode,
          message: expected.message,
          errorParameters: [...(expected.params ?? [])],
          errorDetail: "",
        },
      ],
      error: expected.error ?? "",
      errorDescription: expected.errorDescription ?? "",
      ...(expected.debugIdentifier === undefined ? {} : { debugIdentifier: expected.debugIdentifier }),
    },
  );
  return { error, body };
}
