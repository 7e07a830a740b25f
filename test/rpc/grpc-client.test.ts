// End-to-end test of the RPC faces of a real service instance (startService): an independent
// @grpc/grpc-js client (schema from proto/ via @grpc/proto-loader, error details decoded by hand
// from the grpc-status-details-bin trailer), then the same checks over the Connect protocol and
// gRPC-Web (connect-node clients over HTTP/1.1).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { ApiUserCredentialType, ApiUserRole, ApiUserService } from "../../gen/travel/apiuser/v2/api_user_pb.js";
import { AuthService } from "../../gen/travel/auth/v2/auth_pb.js";
import { ErrorResponseSchema, type ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";
import { OperatorService } from "../../gen/travel/operator/v1/operator_pb.js";
import { TEST_OPERATOR_TOKEN } from "../helpers/backend.js";
import { decodeRpcStatus, errorResponseIn } from "../helpers/grpc-status.js";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// gRPC status codes (identical to connect's Code values).
const STATUS = {
  INVALID_ARGUMENT: 3,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  UNIMPLEMENTED: 12,
  UNAUTHENTICATED: 16,
} as const;

// ---- a face-independent view of one RPC call ----------------------------------------

type Msg = Record<string, any>;
type ServiceKey = "operator" | "apiUser" | "auth";
/** `null`: no authorization metadata; a string: sent as `Bearer <token>`. */
type Token = string | null;

/** A failed call as every face reports it: status code plus the decoded ErrorResponse detail. */
class RpcFailure extends Error {
  constructor(
    readonly code: number,
    readonly errorResponse: ErrorResponse | undefined,
    readonly cause: unknown,
  ) {
    super(`RPC failed with code ${code}: ${(cause as Error)?.message}`);
  }
}

interface Face {
  readonly name: string;
  call(service: ServiceKey, method: string, request: Msg, token?: Token): Promise<Msg>;
  close(): void;
}

// ---- grpc-js face ----------------------------------------------------------------------

const grpcPackage = grpc.loadPackageDefinition(
  protoLoader.loadSync(
    ["travel/operator/v1/operator.proto", "travel/apiuser/v2/api_user.proto", "travel/auth/v2/auth.proto"],
    { includeDirs: [`${root}proto`], keepCase: false, longs: String, enums: String, defaults: true, oneofs: true },
  ),
) as any;

/** The ErrorResponse a grpc-js error carries in its grpc-status-details-bin trailer. */
function errorResponseOfGrpc(err: grpc.ServiceError): ErrorResponse | undefined {
  const [raw] = err.metadata?.get("grpc-status-details-bin") ?? [];
  if (raw === undefined) return undefined;
  assert.ok(Buffer.isBuffer(raw), "grpc-status-details-bin is binary metadata");
  const status = decodeRpcStatus(new Uint8Array(raw));
  assert.equal(status.code, err.code, "google.rpc.Status.code matches the grpc-status");
  // grpc-message is percent-encoded on the wire; grpc-js's decodeURI leaves reserved characters
  // such as %3A encoded, so compare with the fully decoded text.
  assert.equal(status.message, decodeURIComponent(err.details), "google.rpc.Status.message matches grpc-message");
  return errorResponseIn(status.details);
}

function grpcFace(baseUrl: string): Face {
  const address = new URL(baseUrl).host;
  const credentials = grpc.credentials.createInsecure();
  const clients: Record<ServiceKey, grpc.Client & Record<string, any>> = {
    operator: new grpcPackage.travel.operator.v1.OperatorService(address, credentials),
    apiUser: new grpcPackage.travel.apiuser.v2.ApiUserService(address, credentials),
    auth: new grpcPackage.travel.auth.v2.AuthService(address, credentials),
  };
  return {
    name: "grpc-js (gRPC over h2c)",
    call(service, method, request, token) {
      const metadata = new grpc.Metadata();
      if (token !== null && token !== undefined) metadata.set("authorization", `Bearer ${token}`);
      const client = clients[service];
      assert.equal(typeof client[method], "function", `${service}.${method} exists in the loaded protos`);
      return new Promise((resolve, reject) =>
        client[method](
          request,
          metadata,
          { deadline: Date.now() + 10_000 },
          (err: grpc.ServiceError | null, res: Msg) => {
            // grpc-js swallows exceptions thrown in this callback: settle the promise either way.
            if (!err) return resolve(res);
            try {
              reject(new RpcFailure(err.code, errorResponseOfGrpc(err), err));
            } catch (decodeFailure) {
              reject(decodeFailure);
            }
          },
        ),
      );
    },
    close: () => Object.values(clients).forEach((c) => c.close()),
  };
}

// ---- connect-es faces (Connect protocol, gRPC-Web) --------------------------------------

function connectFace(name: string, transport: Transport): Face {
  const clients: Record<ServiceKey, Record<string, any>> = {
    operator: createClient(OperatorService, transport),
    apiUser: createClient(ApiUserService, transport),
    auth: createClient(AuthService, transport),
  };
  return {
    name,
    async call(service, method, request, token) {
      const fn = clients[service][method];
      assert.equal(typeof fn, "function", `${service}.${method} exists in the generated client`);
      try {
        return await fn(request, {
          headers: token === null || token === undefined ? {} : { authorization: `Bearer ${token}` },
          timeoutMs: 10_000,
        });
      } catch (error) {
        const err = ConnectError.from(error);
        throw new RpcFailure(err.code, err.findDetails(ErrorResponseSchema)[0], err);
      }
    },
    close: () => {},
  };
}

// ---- service ---------------------------------------------------------------------------

let running: RunningService;
const faces: Face[] = [];

before(async () => {
  // Every face sends wrong operator tokens and secrets from 127.0.0.1; those share the per-address
  // failure budget (10 per 15 minutes by default), which three faces would spend.
  running = await startService({ env: { TOKEN_FAILURE_LIMIT: "100000/60" } });
});

after(async () => {
  faces.forEach((f) => f.close());
  await running?.stop();
  if (running) {
    await dropStorage(running.storage);
  }
});

const faceFactories: ReadonlyArray<[string, (baseUrl: string) => Face]> = [
  ["grpc-js", grpcFace],
  [
    "connect",
    (baseUrl) => connectFace("Connect protocol (HTTP/1.1)", createConnectTransport({ baseUrl, httpVersion: "1.1" })),
  ],
  [
    "grpc-web",
    (baseUrl) => connectFace("gRPC-Web (HTTP/1.1)", createGrpcWebTransport({ baseUrl, httpVersion: "1.1" })),
  ],
];

/** Awaits a call that must fail and returns its failure, checked for code and ErrorResponse. */
async function failure(
  promise: Promise<Msg>,
  code: number,
  errorCode: string,
): Promise<{ failure: RpcFailure; body: ErrorResponse }> {
  let caught: unknown;
  try {
    const res = await promise;
    assert.fail(`expected code ${code} (${errorCode}), got success ${JSON.stringify(res)}`);
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof RpcFailure, `expected an RPC failure, got ${String(caught)}`);
  assert.equal(caught.code, code, `status code (${caught.message})`);
  const body = caught.errorResponse;
  assert.ok(body, "the error carries a travel.common.v1.ErrorResponse detail");
  assert.equal(body.errorMessages.length, 1);
  assert.equal(body.errorMessages[0]!.errorCode, errorCode);
  assert.ok(body.errorMessages[0]!.message.length > 0, "errorMessages[0].message is set");
  assert.match(body.debugIdentifier, /\S/, "debugIdentifier is non-empty");
  return { failure: caught, body };
}

function parameterNames(body: ErrorResponse): string[] {
  return body.errorMessages.flatMap((m) => m.errorParameters.map((p) => p.name));
}

for (const [key, factory] of faceFactories) {
  describe(`RPC face: ${key}`, () => {
    let face: Face;
    before(() => {
      face = factory(running.baseUrl);
      faces.push(face);
    });
    const op = (method: string, request: Msg, token: Token = TEST_OPERATOR_TOKEN) =>
      face.call("operator", method, request, token);
    /** A TMC admin's access token, obtained through this face's AuthService.FetchOauth2Token. */
    const adminToken = async (): Promise<{ accessToken: string; clientId: string; clientSecret: string }> => {
      const tmc = await op("createTmc", { name: `TMC ${key} ${crypto.randomUUID()}` });
      const admin = await op("createApiUser", { tmcId: tmc.tmcId });
      const token = await face.call("auth", "fetchOauth2Token", {
        grantType: "client_credentials",
        clientId: admin.clientId,
        clientSecret: admin.clientSecret,
      });
      return { accessToken: token.accessToken, clientId: admin.clientId, clientSecret: admin.clientSecret };
    };

    it("provisions a TMC, company, user and API user with the operator token", async () => {
      const name = `TMC ${key} ${crypto.randomUUID()}`;
      const tmc = await op("createTmc", { name });
      assert.match(tmc.tmcId, UUID);
      assert.equal(tmc.name, name);
      assert.equal(tmc.maxApiUsers, 5, "the default limit is 5");

      const company = await op("createCompany", { tmcId: tmc.tmcId, name: "Acme" });
      assert.match(company.orgId, UUID);
      assert.equal(company.tmcId, tmc.tmcId);
      assert.equal(company.name, "Acme");

      const email = `Jane.${key}@Example.com`;
      const user = await op("createUser", { orgId: company.orgId, email, givenName: "Jane", familyName: "Doe" });
      assert.match(user.userId, UUID);
      assert.equal(user.orgId, company.orgId);
      assert.equal(user.tmcId, tmc.tmcId);
      assert.equal(user.email, email);
      assert.equal(user.isActive, true);

      const apiUser = await op("createApiUser", {
        tmcId: tmc.tmcId,
        role: ApiUserRole.TMC_ADMIN,
        credentialType: ApiUserCredentialType.CLIENT_CREDENTIALS,
      });
      assert.match(apiUser.clientId, /\S/);
      assert.match(apiUser.clientSecret, /\S/);
      assert.equal(apiUser.scimToken, "");

      const companyAdmin = await op("createApiUser", {
        tmcId: tmc.tmcId,
        orgId: company.orgId,
        role: ApiUserRole.COMPANY_ADMIN,
        credentialType: ApiUserCredentialType.CLIENT_CREDENTIALS,
      });
      assert.notEqual(companyAdmin.clientId, apiUser.clientId);
      assert.notEqual(companyAdmin.clientSecret, apiUser.clientSecret);

      const raised = await op("setTmcApiUserLimit", { tmcId: tmc.tmcId, maxApiUsers: 7 });
      assert.deepEqual([raised.tmcId, raised.name, raised.maxApiUsers], [tmc.tmcId, name, 7]);
    });

    it("rejects a missing or wrong operator token with UNAUTHENTICATED / USER_NOT_AUTHENTICATED, traceable in the logs", async () => {
      const ids: string[] = [];
      for (const token of [null, "not-the-operator-token", `${TEST_OPERATOR_TOKEN}x`]) {
        const { body } = await failure(
          op("createTmc", { name: "nope" }, token),
          STATUS.UNAUTHENTICATED,
          "USER_NOT_AUTHENTICATED",
        );
        ids.push(body.debugIdentifier);
      }
      assert.equal(new Set(ids).size, ids.length, "each request has its own debugIdentifier");
      const logs = running.logs();
      for (const id of ids) assert.ok(logs.includes(id), `debugIdentifier ${id} is found in the service's logs`);
      // The rejected credential never reaches the log.
      assert.ok(!logs.includes("not-the-operator-token"));
    });

    it("answers INVALID_ARGUMENT / API_VALIDATION_FAILED naming the invalid field", async () => {
      const { accessToken } = await adminToken();
      const limit = await failure(
        face.call("apiUser", "getApiUsers", { limit: 101 }, accessToken),
        STATUS.INVALID_ARGUMENT,
        "API_VALIDATION_FAILED",
      );
      assert.deepEqual(parameterNames(limit.body), ["limit"]);

      const name = await failure(op("createTmc", { name: "" }), STATUS.INVALID_ARGUMENT, "API_VALIDATION_FAILED");
      assert.deepEqual(parameterNames(name.body), ["name"]);

      const tmcId = await failure(
        op("setTmcApiUserLimit", { tmcId: "not-a-uuid", maxApiUsers: 3 }),
        STATUS.INVALID_ARGUMENT,
        "API_VALIDATION_FAILED",
      );
      assert.deepEqual(parameterNames(tmcId.body), ["tmcId"]);
    });

    it("checks the operator token before validating the request", async () => {
      await failure(op("createTmc", { name: "" }, null), STATUS.UNAUTHENTICATED, "USER_NOT_AUTHENTICATED");
    });

    it("issues an access token over this protocol, and refuses bad client credentials with PERMISSION_DENIED", async () => {
      const { accessToken, clientId } = await adminToken();
      const [, payload] = accessToken.split(".");
      const claims = JSON.parse(Buffer.from(payload!, "base64url").toString("utf8"));
      assert.equal(claims.sub, clientId);
      assert.equal(claims.gen, 1);
      const wrong = await failure(
        face.call("auth", "fetchOauth2Token", { grantType: "client_credentials", clientId, clientSecret: "wrong" }),
        STATUS.PERMISSION_DENIED,
        "INVALID_CLIENT",
      );
      assert.equal(wrong.body.error, "invalid_client");
    });

    it("refuses a protected RPC without an access token, and checks it before validating", async () => {
      await failure(
        face.call("apiUser", "getApiUsers", { limit: 101 }, null),
        STATUS.UNAUTHENTICATED,
        "USER_NOT_AUTHENTICATED",
      );
      await failure(
        face.call("apiUser", "getApiUsers", {}, TEST_OPERATOR_TOKEN),
        STATUS.UNAUTHENTICATED,
        "USER_NOT_AUTHENTICATED",
      );
    });

    it("manages API users over this protocol: create, rotate (old token refused at once), revoke, then NOT_FOUND", async () => {
      const { accessToken } = await adminToken();
      const created = await face.call("apiUser", "createApiUser", {}, accessToken);
      assert.match(created.clientId, /^[a-z2-7]{26}$/);
      const grant = (secret: string) =>
        face.call("auth", "fetchOauth2Token", {
          grantType: "client_credentials",
          clientId: created.clientId,
          clientSecret: secret,
        });
      const old = (await grant(created.clientSecret)).accessToken;
      assert.equal(Number((await face.call("apiUser", "getApiUsers", {}, old)).totalCount), 2);
      const rotated = await face.call("apiUser", "rotateClientSecret", { clientId: created.clientId }, accessToken);
      assert.equal(rotated.clientId, created.clientId);
      await failure(face.call("apiUser", "getApiUsers", {}, old), STATUS.UNAUTHENTICATED, "USER_NOT_AUTHENTICATED");
      await failure(grant(created.clientSecret), STATUS.PERMISSION_DENIED, "INVALID_CLIENT");
      const fresh = (await grant(rotated.clientSecret)).accessToken;
      await face.call("apiUser", "deleteApiUser", { clientId: created.clientId }, accessToken);
      await failure(face.call("apiUser", "getApiUsers", {}, fresh), STATUS.UNAUTHENTICATED, "USER_NOT_AUTHENTICATED");
      await failure(
        face.call("apiUser", "deleteApiUser", { clientId: created.clientId }, accessToken),
        STATUS.NOT_FOUND,
        "NOT_FOUND",
      );
    });

    it("answers a protected RPC for a TMC admin's token (ApiUserService.GetApiUsers lists its own TMC only)", async () => {
      const { accessToken, clientId } = await adminToken();
      const page = await face.call("apiUser", "getApiUsers", { limit: 10 }, accessToken);
      assert.deepEqual(
        page.apiUsers.map((u: { clientId: string }) => u.clientId),
        [clientId],
      );
      assert.equal(Number(page.totalCount), 1);
    });

    it("answers NOT_FOUND for SetTmcApiUserLimit on an unknown TMC", async () => {
      const tmcId = crypto.randomUUID();
      const { body } = await failure(
        op("setTmcApiUserLimit", { tmcId, maxApiUsers: 3 }),
        STATUS.NOT_FOUND,
        "NOT_FOUND",
      );
      assert.deepEqual(
        body.errorMessages[0]!.errorParameters.map((p) => [p.name, p.value]),
        [["tmcId", tmcId]],
      );
    });
  });
}
