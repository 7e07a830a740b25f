import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { restRoutesOf } from "../../src/gateway/http-rules.js";
import { contractServices } from "../../src/rpc/routes.js";
import { seededAdminAuthorization } from "../helpers/api.js";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";

/** Every path the public API documents (spec section 4 and the legacy endpoint), with its RPC. */
const DOCUMENTED = [
  ["POST", "/v2/auth/oauth2-token", "travel.auth.v2.AuthService.FetchOauth2Token", "fetchOauth2Token"],
  ["POST", "/get-auth-token", "travel.auth.v2.AuthService.GetAuthToken", "getAuthToken"],
  ["POST", "/v2/auth/introspect", "travel.auth.v2.AuthService.IntrospectToken", "introspectToken"],
  ["POST", "/v2/api-users", "travel.apiuser.v2.ApiUserService.CreateApiUser", "createApiUser"],
  ["GET", "/v2/api-users", "travel.apiuser.v2.ApiUserService.GetApiUsers", "getApiUsers"],
  ["POST", "/v2/api-users/revoke", "travel.apiuser.v2.ApiUserService.DeleteApiUser", "deleteApiUser"],
  ["POST", "/v2/api-users/rotate", "travel.apiuser.v2.ApiUserService.RotateClientSecret", "rotateClientSecret"],
  ["GET", "/v2/users/{user_id}", "travel.user.v2.UserService.GetUser", "getUserInfo"],
  ["PUT", "/v2/users/{user_id}", "travel.user.v2.UserService.UpdateUser", "updateUser"],
  ["POST", "/v3/air/company-transferable-unused-credits/list", "travel.aircredit.v3.AirCreditService.ListCompanyTransferableUnusedCredits", "fetchCompanyTransferableUnusedCredits"],
  ["POST", "/v3/air/company-credits/migrations", "travel.aircredit.v3.AirCreditService.MigrateCompanyCredits", "migrateUnusedCreditsInCompanyCredits"],
] as const;

/** A request each route's validation accepts, so the call reaches the RPC itself. */
const VALID_REQUEST: Record<string, { url: string; payload?: string; contentType?: string }> = {
  "/v2/auth/oauth2-token": { url: "/v2/auth/oauth2-token", payload: "grant_type=client_credentials&client_id=a&client_secret=b", contentType: "application/x-www-form-urlencoded" },
  "/get-auth-token": { url: "/get-auth-token", payload: JSON.stringify({ clientId: "a", clientSecret: "b" }) },
  "/v2/auth/introspect": { url: "/v2/auth/introspect", payload: "token=abc&client_id=a&client_secret=b", contentType: "application/x-www-form-urlencoded" },
  "POST /v2/api-users": { url: "/v2/api-users", payload: JSON.stringify({ role: "TMC_ADMIN" }) },
  "GET /v2/api-users": { url: "/v2/api-users?limit=10&offset=0" },
  "/v2/api-users/revoke": { url: "/v2/api-users/revoke", payload: JSON.stringify({ clientId: "abc" }) },
  "/v2/api-users/rotate": { url: "/v2/api-users/rotate", payload: JSON.stringify({ clientId: "abc" }) },
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
    payload: JSON.stringify({ paymentSourceIds: ["6f1c3a52-4b7e-4f7a-9d41-1b2a3c4d5e6f"], updateCreditUsageTypeTo: "CREDIT_USAGE_TYPE_UNKNOWN" }),
  },
};

/** Routes whose RPC is implemented, with the answer to VALID_REQUEST only that RPC can give. */
const IMPLEMENTED: Record<string, { status: number; check: (body: any) => void }> = {
  "POST /v2/api-users": { status: 200, check: (b) => assert.match(b.clientId, /^[a-z2-7]{26}$/) },
  "GET /v2/api-users": { status: 200, check: (b) => assert.equal(typeof b.totalCount, "number") },
  "POST /v2/api-users/revoke": { status: 404, check: (b) => assert.deepEqual(b.errorMessages[0].errorParameters, [{ name: "clientId", value: "abc" }]) },
  "POST /v2/api-users/rotate": { status: 404, check: (b) => assert.deepEqual(b.errorMessages[0].errorParameters, [{ name: "clientId", value: "abc" }]) },
};

describe("REST gateway routes", () => {
  let running: RunningService;
  let authorization: string;
  before(async () => {
    running = await startService();
    authorization = await seededAdminAuthorization(running.baseUrl);
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  test("the contract declares exactly the documented paths, with the documented operationIds", () => {
    const declared = restRoutesOf(contractServices).map((r) => [r.verb, r.template, `${r.method.parent.typeName}.${r.method.name}`, r.operationId]);
    assert.deepEqual(
      declared.map((d) => d.join(" ")).sort(),
      DOCUMENTED.map((d) => d.join(" ")).sort(),
    );
  });

  for (const [verb, template, rpc] of DOCUMENTED) {
    test(`${verb} ${template} reaches ${rpc}`, async () => {
      const request = VALID_REQUEST[`${verb} ${template}`] ?? VALID_REQUEST[template]!;
      const isTokenEndpoint = rpc.startsWith("travel.auth.v2.");
      const response = await running.service.app.inject({
        method: verb,
        url: request.url,
        payload: request.payload,
        headers: {
          ...(request.payload ? { "content-type": request.contentType ?? "application/json" } : {}),
          ...(isTokenEndpoint ? {} : { authorization }),
        },
      });
      const body = response.json();
      if (response.statusCode >= 400) assert.equal(body.debugIdentifier, response.headers["x-request-id"]);
      const implemented = IMPLEMENTED[`${verb} ${template}`];
      if (isTokenEndpoint) {
        // Only the RPC knows that client "a" does not exist.
        assert.equal(response.statusCode, 403, response.body);
        assert.equal(body.errorMessages[0].errorCode, "INVALID_CLIENT");
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

  test("operator RPCs have no REST path", async () => {
    const response = await running.service.app.inject({ method: "POST", url: "/v1/operator/tmcs", payload: {} });
    assert.equal(response.statusCode, 404);
  });
});
