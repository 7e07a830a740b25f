import assert from "node:assert/strict";
import crypto from "node:crypto";
import { before, describe, test } from "node:test";
import { create, createFileRegistry, setExtension, type DescService } from "@bufbuild/protobuf";
import {
  FileDescriptorProtoSchema,
  file_google_protobuf_empty,
  file_google_protobuf_wrappers,
  ServiceOptionsSchema,
} from "@bufbuild/protobuf/wkt";
import { Code, createClient, createRouterTransport, type Client, type HandlerContext } from "@connectrpc/connect";
import { authentication, AuthenticationKind } from "../../../gen/travel/common/v1/authentication_pb.js";
import { sealScimToken } from "../../../src/domain/shared/scim-token.js";
import { principalKey, scimClientKey } from "../../../src/rpc/interceptors/authentication-interceptor.js";
import {
  accessToken,
  asOperator,
  asRequest,
  AUDIENCE,
  bearer,
  provisionTmc,
  rejectsWithRpc,
  startRpc,
  type RpcHarness,
} from "./harness.js";

const OTHER_API = "http://travel.test/v2";
const unauthenticated = (message: string) =>
  ({ code: Code.Unauthenticated, errorCode: "USER_NOT_AUTHENTICATED", message }) as const;
const denied = (message: string) => ({ code: Code.PermissionDenied, errorCode: "PERMISSION_DENIED", message }) as const;

/**
 * A service of the test's own making, declaring an authentication kind the contract does not use
 * yet (SCIM_TOKEN) or none at all, served through the real interceptor chain.
 */
function probeService(name: string, kind: AuthenticationKind | undefined): DescService {
  const options = create(ServiceOptionsSchema);
  if (kind !== undefined) setExtension(options, authentication, kind);
  const file = create(FileDescriptorProtoSchema, {
    name: `test/probe/${name}.proto`,
    package: "test.probe.v1",
    syntax: "proto3",
    dependency: ["google/protobuf/empty.proto", "google/protobuf/wrappers.proto"],
    service: [
      {
        name,
        options,
        method: [{ name: "Probe", inputType: ".google.protobuf.Empty", outputType: ".google.protobuf.StringValue" }],
      },
    ],
  });
  const registry = createFileRegistry(file, (dependency) =>
    dependency === "google/protobuf/empty.proto"
      ? file_google_protobuf_empty
      : dependency === "google/protobuf/wrappers.proto"
        ? file_google_protobuf_wrappers
        : undefined,
  );
  return registry.getService(`test.probe.v1.${name}`)!;
}

type ProbeClient = { probe(request: object, options?: object): Promise<{ value: string }> };

/** Answers who the interceptor put in the context: the SCIM client's id, or the principal's. */
function probeClient(h: RpcHarness, service: DescService): ProbeClient {
  const transport = createRouterTransport(
    (router) =>
      router.service(service, {
        probe: (_req: unknown, ctx: HandlerContext) => ({
          value: ctx.values.get(scimClientKey)?.clientId ?? ctx.values.get(principalKey)?.clientId ?? "",
        }),
      } as never),
    { router: { interceptors: h.rpc.interceptors } },
  );
  return createClient(service, transport) as Client<DescService> as unknown as ProbeClient;
}

describe("authentication interceptor", () => {
  let h: RpcHarness;
  let tenant: Awaited<ReturnType<typeof provisionTmc>>;
  let adminToken: string;
  before(async () => {
    h = await startRpc({ ALLOWED_AUDIENCES: OTHER_API });
    tenant = await provisionTmc(h);
    adminToken = await accessToken(h, tenant.clientId, tenant.clientSecret);
  });

  describe("ACCESS_TOKEN", () => {
    const list = (options?: object) => asRequest("req-auth", "10.0.0.1", () => h.apiUsers.getApiUsers({}, options));

    test("a valid TMC admin token passes, and the handler sees its principal", async () => {
      assert.equal((await list(bearer(adminToken))).totalCount, 1);
    });

    test("no token, or not a Bearer one: 401 with the request id as debugIdentifier", async () => {
      const expected = {
        ...unauthenticated("An access token is required (Authorization: Bearer <token>)"),
        debugIdentifier: "req-auth",
      };
      await rejectsWithRpc(list(), expected);
      await rejectsWithRpc(
        list({ headers: { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` } }),
        expected,
      );
      await rejectsWithRpc(list({ headers: { authorization: "Bearer" } }), expected);
      await rejectsWithRpc(list({ headers: { authorization: "Bearer two words" } }), expected);
    });

    test("a bad, expired or foreign-audience token: 401 saying which", async () => {
      await rejectsWithRpc(list(bearer("not-a-jwt")), unauthenticated("The access token is not valid"));
      const [header, payload] = adminToken.split(".");
      await rejectsWithRpc(
        list(bearer(`${header}.${payload}.${"A".repeat(86)}`)),
        unauthenticated("The access token is not valid"),
      );
      const foreign = (
        await h.auth.fetchOauth2Token({
          grantType: "client_credentials",
          clientId: tenant.clientId,
          clientSecret: tenant.clientSecret,
          audience: OTHER_API,
        })
      ).accessToken;
      await rejectsWithRpc(list(bearer(foreign)), unauthenticated("The access token is not meant for this service"));
      const expiring = await accessToken(h, tenant.clientId, tenant.clientSecret);
      h.clock.advanceSeconds(3600 + 5);
      try {
        await rejectsWithRpc(list(bearer(expiring)), unauthenticated("The access token has expired"));
      } finally {
        h.clock.advanceSeconds(-(3600 + 5));
      }
    });

    test("a valid token without the method's scope: 403", async () => {
      const narrow = await accessToken(h, tenant.clientId, tenant.clientSecret, "users:read");
      await rejectsWithRpc(list(bearer(narrow)), denied('The access token lacks the scope "api-users"'));
    });

    test("a valid token with the scope but not the role: 403", async () => {
      const companyAdmin = await h.operator.createApiUser(
        { tmcId: tenant.tmcId, orgId: tenant.orgId, role: 2 },
        asOperator,
      );
      // The token endpoint never grants api-users to a COMPANY_ADMIN; mint one with the service's own key to reach the role check.
      const { accessToken: minted } = await h.domain.verifiers.accessTokens.issue({
        clientId: companyAdmin.clientId,
        tmcId: tenant.tmcId,
        orgId: tenant.orgId,
        role: "COMPANY_ADMIN",
        scopes: ["api-users"],
        subject: companyAdmin.clientId,
        subjectKind: "CLIENT",
        audience: [AUDIENCE],
        credentials: [[companyAdmin.clientId, 1]],
        ttlSeconds: 60,
      });
      await rejectsWithRpc(list(bearer(minted)), denied("This operation requires the role TMC_ADMIN"));
    });

    test("a method without a role rule takes any role with the scope: the RPC itself answers", async () => {
      const companyAdmin = await h.operator.createApiUser(
        { tmcId: tenant.tmcId, orgId: tenant.orgId, role: 2 },
        asOperator,
      );
      const token = await accessToken(h, companyAdmin.clientId, companyAdmin.clientSecret);
      // Past the interceptor: only GetUser knows that no such user exists.
      const userId = crypto.randomUUID();
      await rejectsWithRpc(h.users.getUser({ userId }, bearer(token)), {
        code: Code.NotFound,
        errorCode: "NOT_FOUND",
        message: "User not found",
        params: [{ name: "userId", value: userId }],
      });
      await rejectsWithRpc(
        h.users.getUser({ userId: crypto.randomUUID() }),
        unauthenticated("An access token is required (Authorization: Bearer <token>)"),
      );
    });

    test("a protected method declaring no access rule is refused to every token", async () => {
      const probe = probeClient(h, probeService("RulelessService", AuthenticationKind.ACCESS_TOKEN));
      await rejectsWithRpc(
        probe.probe({}, bearer(adminToken)),
        denied("This operation is not available to access tokens"),
      );
    });
  });

  describe("OPERATOR", () => {
    test("the operator credential passes; none, a wrong one or a TMC admin's token are 401 alike", async () => {
      assert.equal((await h.operator.createTmc({ name: "Wanderlust" }, asOperator)).maxApiUsers, 5);
      const expected = unauthenticated("A valid operator credential is required");
      await rejectsWithRpc(h.operator.createTmc({ name: "x" }), expected);
      await rejectsWithRpc(h.operator.createTmc({ name: "x" }, bearer("operator-token-for-test")), expected);
      await rejectsWithRpc(h.operator.createTmc({ name: "x" }, bearer(adminToken)), expected);
    });
  });

  describe("SCIM_TOKEN", () => {
    test("a SCIM-token API user's token passes and names it; anything else is the same 401", async () => {
      const probe = probeClient(h, probeService("ScimProbeService", AuthenticationKind.SCIM_TOKEN));
      const scimUser = await h.operator.createApiUser(
        { tmcId: tenant.tmcId, orgId: tenant.orgId, role: 2, credentialType: 2 },
        asOperator,
      );
      assert.equal((await probe.probe({}, bearer(scimUser.scimToken))).value, scimUser.clientId);
      const expected = unauthenticated("A valid SCIM token is required");
      await rejectsWithRpc(probe.probe({}), expected);
      await rejectsWithRpc(probe.probe({}, bearer(adminToken)), expected);
      await rejectsWithRpc(
        probe.probe(
          {},
          bearer(
            sealScimToken(h.keys.scimTokenKey, h.keys.scimTokenKeyId, { clientId: scimUser.clientId, secret: "guess" }),
          ),
        ),
        expected,
      );
      await rejectsWithRpc(
        probe.probe(
          {},
          bearer(
            sealScimToken(h.keys.scimTokenKey, h.keys.scimTokenKeyId, {
              clientId: tenant.clientId,
              secret: tenant.clientSecret,
            }),
          ),
        ),
        expected,
      );
    });
  });

  describe("no declared kind", () => {
    test("an RPC of the contract that declares no authentication is refused to everyone", async () => {
      const probe = probeClient(h, probeService("UndeclaredService", undefined));
      const expected = denied("This operation declares no authentication and is refused");
      await rejectsWithRpc(probe.probe({}), expected);
      await rejectsWithRpc(probe.probe({}, bearer(adminToken)), expected);
      await rejectsWithRpc(probe.probe({}, asOperator), expected);
    });
  });

  describe("CLIENT_SECRET", () => {
    test("the token endpoints pass through to the token flow, whatever the Authorization header says", async () => {
      const ok = await h.auth.fetchOauth2Token(
        { grantType: "client_credentials", clientId: tenant.clientId, clientSecret: tenant.clientSecret },
        bearer("anything"),
      );
      assert.equal(ok.tokenType, "Bearer");
      await rejectsWithRpc(
        h.auth.fetchOauth2Token({ grantType: "client_credentials", clientId: tenant.clientId, clientSecret: "wrong" }),
        {
          code: Code.PermissionDenied,
          errorCode: "INVALID_CLIENT",
          message: "Client authentication failed",
          error: "invalid_client",
          errorDescription: "Client authentication failed",
        },
      );
    });
  });

  test("every outcome is counted by code", async () => {
    const text = await h.metrics.registry.getSingleMetricAsString("rpc_requests_total");
    assert.match(
      text,
      /rpc_requests_total\{service="travel.apiuser.v2.ApiUserService",method="GetApiUsers",code="unauthenticated"\} [1-9]/,
    );
    assert.match(
      text,
      /rpc_requests_total\{service="travel.apiuser.v2.ApiUserService",method="GetApiUsers",code="permission_denied"\} [1-9]/,
    );
    assert.match(
      text,
      /rpc_requests_total\{service="travel.apiuser.v2.ApiUserService",method="GetApiUsers",code="ok"\} [1-9]/,
    );
  });
});
