import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { OperatorService } from "../../gen/travel/operator/v1/operator_pb.js";
import { restRoutesOf } from "../../src/gateway/http-rules.js";
import { contractServices } from "../../src/rpc/areas.js";
import { seededAdminAuthorization } from "../helpers/api.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";

/** Every path the public API documents (spec section 4 and the legacy endpoint), with its RPC. */
const DOCUMENTED = [
  ["POST", "/v2/auth/oauth2-token", "travel.auth.v2.AuthService.FetchOauth2Token", "fetchOauth2Token"],
  ["POST", "/get-auth-token", "travel.auth.v2.AuthService.GetAuthToken", "getAuthToken"],
  ["POST", "/v2/auth/introspect", "travel.auth.v2.AuthService.IntrospectToken", "introspectToken"],
  ["POST", "/v2/auth/revoke", "travel.auth.v2.AuthService.RevokeToken", "revokeToken"],
  // RFC 8936 SET polling (docs/ssf.md), beside the documented API.
  ["POST", "/v2/ssf/poll", "travel.auth.v2.AuthService.PollSecurityEvents", "pollSecurityEvents"],
  ["POST", "/v2/api-users", "travel.apiuser.v2.ApiUserService.CreateApiUser", "createApiUser"],
  ["GET", "/v2/api-users", "travel.apiuser.v2.ApiUserService.GetApiUsers", "getApiUsers"],
  ["POST", "/v2/api-users/revoke", "travel.apiuser.v2.ApiUserService.DeleteApiUser", "deleteApiUser"],
  ["POST", "/v2/api-users/rotate", "travel.apiuser.v2.ApiUserService.RotateClientSecret", "rotateClientSecret"],
  ["POST", "/v2/api-users/keys", "travel.apiuser.v2.ApiUserService.SetClientKeys", "setClientKeys"],
  ["POST", "/v2/api-users/dpop", "travel.apiuser.v2.ApiUserService.SetClientDpopPolicy", "setClientDpopPolicy"],
  ["GET", "/v2/users/{user_id}", "travel.user.v2.UserService.GetUser", "getUserInfo"],
  ["PUT", "/v2/users/{user_id}", "travel.user.v2.UserService.UpdateUser", "updateUser"],
  [
    "POST",
    "/v3/air/company-transferable-unused-credits/list",
    "travel.aircredit.v3.AirCreditService.ListCompanyTransferableUnusedCredits",
    "fetchCompanyTransferableUnusedCredits",
  ],
  [
    "POST",
    "/v3/air/company-credits/migrations",
    "travel.aircredit.v3.AirCreditService.MigrateCompanyCredits",
    "migrateUnusedCreditsInCompanyCredits",
  ],
  // SCIM 2.0 (spec 2.5, 5.5): the base URL /v2/scim/v2 and the documented /v2/scim (operationId suffix _1: google.api.http additional_bindings).
  ...(["/v2/scim/v2", "/v2/scim"] as const).flatMap((base, i) => {
    const suffix = i === 0 ? "" : "_1";
    return [
      ["GET", `${base}/Users`, "travel.scim.v2.ScimService.ListUsers", `scimListUsers${suffix}`],
      ["POST", `${base}/Users`, "travel.scim.v2.ScimService.CreateUser", `scimCreateUser${suffix}`],
      ["GET", `${base}/Users/{user_id}`, "travel.scim.v2.ScimService.GetUser", `scimGetUser${suffix}`],
      ["PUT", `${base}/Users/{user_id}`, "travel.scim.v2.ScimService.ReplaceUser", `scimReplaceUser${suffix}`],
      ["PATCH", `${base}/Users/{user_id}`, "travel.scim.v2.ScimService.PatchUser", `scimPatchUser${suffix}`],
      ["DELETE", `${base}/Users/{user_id}`, "travel.scim.v2.ScimService.DeleteUser", `scimDeleteUser${suffix}`],
      [
        "GET",
        `${base}/ServiceProviderConfig`,
        "travel.scim.v2.ScimService.GetServiceProviderConfig",
        `scimGetServiceProviderConfig${suffix}`,
      ],
      [
        "GET",
        `${base}/ResourceTypes`,
        "travel.scim.v2.ScimService.ListResourceTypes",
        `scimListResourceTypes${suffix}`,
      ],
      [
        "GET",
        `${base}/ResourceTypes/{resource_type_id}`,
        "travel.scim.v2.ScimService.GetResourceType",
        `scimGetResourceType${suffix}`,
      ],
      ["GET", `${base}/Schemas`, "travel.scim.v2.ScimService.ListSchemas", `scimListSchemas${suffix}`],
      ["GET", `${base}/Schemas/{schema_id}`, "travel.scim.v2.ScimService.GetSchema", `scimGetSchema${suffix}`],
    ] as const;
  }),
] as const;

const SCIM_USER_ID = "6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f";
const SCIM_USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User";

/** A request each route's validation accepts, so the call reaches the RPC itself. */
const VALID_REQUEST: Record<string, { url: string; payload?: string; contentType?: string }> = {
  "/v2/auth/oauth2-token": {
    url: "/v2/auth/oauth2-token",
    payload: "grant_type=client_credentials&client_id=a&client_secret=b",
    contentType: "application/x-www-form-urlencoded",
  },
  "/get-auth-token": { url: "/get-auth-token", payload: JSON.stringify({ clientId: "a", clientSecret: "b" }) },
  "/v2/auth/introspect": {
    url: "/v2/auth/introspect",
    payload: "token=abc&client_id=a&client_secret=b",
    contentType: "application/x-www-form-urlencoded",
  },
  "/v2/auth/revoke": {
    url: "/v2/auth/revoke",
    payload: "token=abc&client_id=a&client_secret=b",
    contentType: "application/x-www-form-urlencoded",
  },
  "/v2/ssf/poll": {
    url: "/v2/ssf/poll",
    payload: JSON.stringify({ returnImmediately: true, client_id: "a", client_secret: "b" }),
  },
  "POST /v2/api-users": { url: "/v2/api-users", payload: JSON.stringify({ role: "TMC_ADMIN" }) },
  "GET /v2/api-users": { url: "/v2/api-users?limit=10&offset=0" },
  "/v2/api-users/revoke": { url: "/v2/api-users/revoke", payload: JSON.stringify({ clientId: "abc" }) },
  "/v2/api-users/rotate": { url: "/v2/api-users/rotate", payload: JSON.stringify({ clientId: "abc" }) },
  "/v2/api-users/keys": {
    url: "/v2/api-users/keys",
    payload: JSON.stringify({
      clientId: "abc",
      keys: [{ kty: "OKP", crv: "Ed25519", x: "UJx7EKp-xKWg_EniHNZ653W1xk8WMwFf62dD2E_kRdk" }],
    }),
  },
  "/v2/api-users/dpop": {
    url: "/v2/api-users/dpop",
    payload: JSON.stringify({ clientId: "abc", dpopBoundAccessTokens: true }),
  },
  "GET /v2/users/{user_id}": { url: "/v2/users/6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f?includeInactive=true" },
  "PUT /v2/users/{user_id}": {
    url: "/v2/users/6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f",
    payload: JSON.stringify({
      persona: "EMPLOYEE",
      businessInfo: {
        organizationRef: { id: "6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f" },
        legalEntityRef: { id: "6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f" },
      },
    }),
  },
  "/v3/air/company-transferable-unused-credits/list": {
    url: "/v3/air/company-transferable-unused-credits/list",
    payload: JSON.stringify({ companyId: { id: "6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f" }, offset: 0 }),
  },
  "/v3/air/company-credits/migrations": {
    url: "/v3/air/company-credits/migrations",
    payload: JSON.stringify({
      paymentSourceIds: ["6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f"],
      updateCreditUsageTypeTo: "COMPANY",
    }),
  },
};

for (const [i, base] of ["/v2/scim/v2", "/v2/scim"].entries()) {
  const user = (userName: string) => JSON.stringify({ schemas: [SCIM_USER_SCHEMA], userName });
  Object.assign(VALID_REQUEST, {
    [`GET ${base}/Users`]: {
      url: `${base}/Users?filter=${encodeURIComponent('userName eq "nobody@example.com"')}&startIndex=1&count=10`,
    },
    [`POST ${base}/Users`]: {
      url: `${base}/Users`,
      payload: user(`route${i}@example.com`),
      contentType: "application/scim+json",
    },
    [`GET ${base}/Users/{user_id}`]: { url: `${base}/Users/${SCIM_USER_ID}` },
    [`PUT ${base}/Users/{user_id}`]: {
      url: `${base}/Users/${SCIM_USER_ID}`,
      payload: user("replaced@example.com"),
      contentType: "application/scim+json",
    },
    [`PATCH ${base}/Users/{user_id}`]: {
      url: `${base}/Users/${SCIM_USER_ID}`,
      payload: JSON.stringify({
        schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        Operations: [{ op: "Replace", path: "active", value: "False" }],
      }),
      contentType: "application/scim+json",
    },
    [`DELETE ${base}/Users/{user_id}`]: { url: `${base}/Users/${SCIM_USER_ID}` },
    [`GET ${base}/ServiceProviderConfig`]: { url: `${base}/ServiceProviderConfig` },
    [`GET ${base}/ResourceTypes`]: { url: `${base}/ResourceTypes` },
    [`GET ${base}/ResourceTypes/{resource_type_id}`]: { url: `${base}/ResourceTypes/User` },
    [`GET ${base}/Schemas`]: { url: `${base}/Schemas` },
    [`GET ${base}/Schemas/{schema_id}`]: { url: `${base}/Schemas/${encodeURIComponent(SCIM_USER_SCHEMA)}` },
  });
}

/** Routes whose RPC is implemented, with the answer to VALID_REQUEST only that RPC can give. */
const IMPLEMENTED: Record<string, { status: number; check: (body: any) => void }> = {
  "POST /v2/api-users": { status: 200, check: (b) => assert.match(b.clientId, /^[a-z2-7]{26}$/) },
  "GET /v2/api-users": { status: 200, check: (b) => assert.equal(typeof b.totalCount, "number") },
  "POST /v2/api-users/revoke": {
    status: 404,
    check: (b) => assert.deepEqual(b.errorMessages[0].errorParameters, [{ name: "clientId", value: "abc" }]),
  },
  "POST /v2/api-users/rotate": {
    status: 404,
    check: (b) => assert.deepEqual(b.errorMessages[0].errorParameters, [{ name: "clientId", value: "abc" }]),
  },
  "POST /v2/api-users/keys": {
    status: 404,
    check: (b) => assert.deepEqual(b.errorMessages[0].errorParameters, [{ name: "clientId", value: "abc" }]),
  },
  "POST /v2/api-users/dpop": {
    status: 404,
    check: (b) => assert.deepEqual(b.errorMessages[0].errorParameters, [{ name: "clientId", value: "abc" }]),
  },
  // Only the RPC knows that no user of the caller's TMC has this id.
  "GET /v2/users/{user_id}": {
    status: 404,
    check: (b) =>
      assert.deepEqual(b.errorMessages[0].errorParameters, [
        { name: "userId", value: "6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f" },
      ]),
  },
  "PUT /v2/users/{user_id}": {
    status: 404,
    check: (b) =>
      assert.deepEqual(b.errorMessages[0].errorParameters, [
        { name: "userId", value: "6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f" },
      ]),
  },
  // Only the RPCs know that no company, and no payment source, of the caller's TMC has this id.
  "POST /v3/air/company-transferable-unused-credits/list": {
    status: 404,
    check: (b) =>
      assert.deepEqual(b.errorMessages[0].errorParameters, [
        { name: "companyId.id", value: "6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f" },
      ]),
  },
  "POST /v3/air/company-credits/migrations": {
    status: 200,
    check: (b) =>
      assert.deepEqual(b.migrationStatus, [
        {
          paymentSourceId: "6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f",
          status: "FAILED",
          failureReason: "PAYMENT_SOURCE_NOT_FOUND",
        },
      ]),
  },
};

// SCIM: answers only the SCIM RPCs can give (the SCIM error dialect on a miss).
const scimMissing = (b: any) =>
  assert.deepEqual([b.status, b.errorMessages[0].errorParameters], ["404", [{ name: "id", value: SCIM_USER_ID }]]);
for (const [i, base] of ["/v2/scim/v2", "/v2/scim"].entries()) {
  Object.assign(IMPLEMENTED, {
    [`GET ${base}/Users`]: {
      status: 200,
      check: (b: any) => assert.deepEqual([b.totalResults, b.startIndex, b.Resources], [0, 1, []]),
    },
    [`POST ${base}/Users`]: { status: 201, check: (b: any) => assert.equal(b.userName, `route${i}@example.com`) },
    [`GET ${base}/Users/{user_id}`]: { status: 404, check: scimMissing },
    [`PUT ${base}/Users/{user_id}`]: { status: 404, check: scimMissing },
    [`PATCH ${base}/Users/{user_id}`]: { status: 404, check: scimMissing },
    [`DELETE ${base}/Users/{user_id}`]: { status: 404, check: scimMissing },
    [`GET ${base}/ServiceProviderConfig`]: { status: 200, check: (b: any) => assert.equal(b.patch.supported, true) },
    [`GET ${base}/ResourceTypes`]: { status: 200, check: (b: any) => assert.equal(b.Resources[0].id, "User") },
    [`GET ${base}/ResourceTypes/{resource_type_id}`]: {
      status: 200,
      check: (b: any) => assert.equal(b.endpoint, "/Users"),
    },
    [`GET ${base}/Schemas`]: { status: 200, check: (b: any) => assert.equal(b.Resources[0].id, SCIM_USER_SCHEMA) },
    [`GET ${base}/Schemas/{schema_id}`]: { status: 200, check: (b: any) => assert.equal(b.id, SCIM_USER_SCHEMA) },
  });
}

describe("REST gateway routes", () => {
  let running: RunningService;
  let authorization: string;
  /** SCIM routes take the scimToken of a COMPANY_ADMIN SCIM_TOKEN API user. */
  let scimAuthorization: string;
  before(async () => {
    running = await startService();
    authorization = await seededAdminAuthorization(running.baseUrl);
    const { tmcId } = await operatorCall<{ tmcId: string }>(running.baseUrl, "CreateTmc", { name: "SCIM routes TMC" });
    const { orgId } = await operatorCall<{ orgId: string }>(running.baseUrl, "CreateCompany", {
      tmcId,
      name: "SCIM routes company",
    });
    const { scimToken } = await operatorCall<{ scimToken: string }>(running.baseUrl, "CreateApiUser", {
      tmcId,
      orgId,
      role: "COMPANY_ADMIN",
      credentialType: "SCIM_TOKEN",
    });
    scimAuthorization = `Bearer ${scimToken}`;
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  test("the contract declares exactly the documented paths, with the documented operationIds", () => {
    const declared = restRoutesOf(contractServices).map((r) => [
      r.verb,
      r.template,
      `${r.method.parent.typeName}.${r.method.name}`,
      r.operationId,
    ]);
    assert.deepEqual(declared.map((d) => d.join(" ")).sort(), DOCUMENTED.map((d) => d.join(" ")).sort());
  });

  // Every route the contract declares (DOCUMENTED above pins that set): a new RPC with an HTTP rule
  // is tested here once it has its VALID_REQUEST.
  for (const { verb, template, method } of restRoutesOf(contractServices)) {
    const rpc = `${method.parent.typeName}.${method.name}`;
    test(`${verb} ${template} reaches ${rpc}`, async () => {
      const request = VALID_REQUEST[`${verb} ${template}`] ?? VALID_REQUEST[template];
      assert.ok(request, `VALID_REQUEST needs a request for ${verb} ${template}`);
      const isTokenEndpoint = rpc.startsWith("travel.auth.v2.");
      const response = await running.service.app.inject({
        method: verb,
        url: request.url,
        payload: request.payload,
        headers: {
          ...(request.payload ? { "content-type": request.contentType ?? "application/json" } : {}),
          ...(isTokenEndpoint
            ? {}
            : { authorization: rpc.startsWith("travel.scim.") ? scimAuthorization : authorization }),
        },
      });
      const body = response.body === "" ? {} : response.json();
      if (response.statusCode >= 400) assert.equal(body.debugIdentifier, response.headers["x-request-id"]);
      const implemented = IMPLEMENTED[`${verb} ${template}`];
      if (isTokenEndpoint) {
        // Only the RPC knows that client "a" does not exist (SET polling: that "a" names no resource server).
        assert.equal(response.statusCode, 403, response.body);
        const refusal = rpc.endsWith(".PollSecurityEvents") ? "UNAUTHORIZED_CLIENT" : "INVALID_CLIENT";
        assert.equal(body.errorMessages[0].errorCode, refusal);
      } else if (implemented) {
        // An answer only that RPC can give.
        assert.equal(response.statusCode, implemented.status, response.body);
        implemented.check(body);
      } else {
        // Not implemented yet: the RPC itself (past authentication) answers UNIMPLEMENTED, naming itself.
        assert.equal(response.statusCode, 501, response.body);
        assert.equal(body.errorMessages[0].errorCode, "NOT_IMPLEMENTED");
        assert.equal(body.errorMessages[0].message, `${rpc} is not implemented`);
      }
    });
  }

  test("operator RPCs have no REST path", () => {
    // Whatever path a google.api.http rule on an OperatorService method named, the gateway would serve it:
    // the operator's RPCs stay on gRPC/Connect with the operator credential.
    const operatorRpcs = OperatorService.methods.map((m) => `${OperatorService.typeName}.${m.name}`);
    assert.ok(operatorRpcs.includes("travel.operator.v1.OperatorService.CreateTmc"));
    const routed = restRoutesOf(contractServices).map((r) => `${r.method.parent.typeName}.${r.method.name}`);
    assert.deepEqual(
      operatorRpcs.filter((rpc) => routed.includes(rpc)),
      [],
    );
  });
});
