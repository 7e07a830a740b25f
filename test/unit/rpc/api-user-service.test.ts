import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { Code } from "@connectrpc/connect";
import { ApiUserCredentialType, ApiUserRole } from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import {
  accessToken,
  asOperator,
  asRequest,
  bearer,
  provisionTmc,
  rejectsWithRpc,
  startRpc,
  type RpcHarness,
} from "./harness.js";

const notFound = (clientId: string, debugIdentifier?: string) =>
  ({
    code: Code.NotFound,
    errorCode: "NOT_FOUND",
    message: "API user not found",
    params: [{ name: "clientId", value: clientId }],
    ...(debugIdentifier ? { debugIdentifier } : {}),
  }) as const;

describe("ApiUserService through the transport", () => {
  let h: RpcHarness;
  let tenant: Awaited<ReturnType<typeof provisionTmc>>;
  let admin: { headers: { authorization: string } };
  before(async () => {
    h = await startRpc();
    tenant = await provisionTmc(h, 4);
    admin = bearer(await accessToken(h, tenant.clientId, tenant.clientSecret));
  });

  test("create, list, rotate and revoke: the life of an API user", async () => {
    const created = await asRequest("req-create", "10.1.0.1", () => h.apiUsers.createApiUser({}, admin));
    assert.match(created.clientId, /^[a-z2-7]{26}$/);
    assert.equal(created.scimToken, "");
    const token = await accessToken(h, created.clientId, created.clientSecret);
    const listed = await h.apiUsers.getApiUsers({}, bearer(token));
    assert.deepEqual(
      listed.apiUsers.map((u) => u.clientId),
      [tenant.clientId, created.clientId],
    );
    assert.equal(listed.totalCount, 2);

    const rotated = await asRequest("req-rotate", "10.1.0.1", () =>
      h.apiUsers.rotateClientSecret({ clientId: created.clientId }, admin),
    );
    assert.equal(rotated.clientId, created.clientId);
    assert.notEqual(rotated.clientSecret, created.clientSecret);
    await rejectsWithRpc(h.apiUsers.getApiUsers({}, bearer(token)), {
      code: Code.Unauthenticated,
      errorCode: "USER_NOT_AUTHENTICATED",
      message: "The access token has been revoked",
    });
    await rejectsWithRpc(
      h.auth.fetchOauth2Token({
        grantType: "client_credentials",
        clientId: created.clientId,
        clientSecret: created.clientSecret,
      }),
      {
        code: Code.PermissionDenied,
        errorCode: "INVALID_CLIENT",
        message: "Client authentication failed",
        error: "invalid_client",
        errorDescription: "Client authentication failed",
      },
    );
    const newToken = await accessToken(h, created.clientId, rotated.clientSecret);

    assert.deepEqual(
      await asRequest("req-revoke", "10.1.0.1", () =>
        h.apiUsers.deleteApiUser({ clientId: created.clientId }, admin),
      ).then((r) => ({ ...r })),
      {
        $typeName: "travel.apiuser.v2.DeleteApiUserResponse",
      },
    );
    await rejectsWithRpc(h.apiUsers.getApiUsers({}, bearer(newToken)), {
      code: Code.Unauthenticated,
      errorCode: "USER_NOT_AUTHENTICATED",
      message: "The access token has been revoked",
    });
    await rejectsWithRpc(
      asRequest("req-again", "10.1.0.1", () => h.apiUsers.deleteApiUser({ clientId: created.clientId }, admin)),
      notFound(created.clientId, "req-again"),
    );
    await rejectsWithRpc(
      h.apiUsers.rotateClientSecret({ clientId: created.clientId }, admin),
      notFound(created.clientId),
    );

    const trail = await h.operator.listAuditEvents({ tmcId: tenant.tmcId, limit: 3 }, asOperator);
    assert.deepEqual(
      trail.events.map((e) => [e.action, e.outcome, e.actor, e.targetClientId, e.debugIdentifier]),
      [
        ["API_USER_REVOKE", "SUCCESS", tenant.clientId, created.clientId, "req-revoke"],
        ["API_USER_ROTATE", "SUCCESS", tenant.clientId, created.clientId, "req-rotate"],
        ["API_USER_CREATE", "SUCCESS", tenant.clientId, created.clientId, "req-create"],
      ],
    );
    assert.deepEqual(trail.events[2]!.details, { role: "TMC_ADMIN", credentialType: "CLIENT_CREDENTIALS" });
  });

  test("a SCIM-token company admin: a SCIM token instead of a secret; rotation answers a new SCIM token", async () => {
    const created = await h.apiUsers.createApiUser(
      { orgId: tenant.orgId, role: ApiUserRole.COMPANY_ADMIN, credentialType: ApiUserCredentialType.SCIM_TOKEN },
      admin,
    );
    assert.equal(created.clientSecret, "");
    assert.notEqual(created.scimToken, "");
    const rotated = await h.apiUsers.rotateClientSecret({ clientId: created.clientId }, admin);
    assert.deepEqual(
      [rotated.clientSecret, rotated.scimToken === created.scimToken, rotated.scimToken.length > 0],
      ["", false, true],
    );
    await h.apiUsers.deleteApiUser({ clientId: created.clientId }, admin);
  });

  test("the creation rules answer with their documented codes", async () => {
    const other = await provisionTmc(h);
    await rejectsWithRpc(h.apiUsers.createApiUser({ tmcId: other.tmcId }, admin), {
      code: Code.PermissionDenied,
      errorCode: "PERMISSION_DENIED",
      message: "A TMC admin may create API users only for its own TMC",
    });
    await rejectsWithRpc(h.apiUsers.createApiUser({ orgId: other.orgId, role: ApiUserRole.COMPANY_ADMIN }, admin), {
      code: Code.NotFound,
      errorCode: "NOT_FOUND",
      message: "Organization not found",
      params: [{ name: "orgId", value: other.orgId }],
    });
    await rejectsWithRpc(h.apiUsers.createApiUser({ credentialType: ApiUserCredentialType.SCIM_TOKEN }, admin), {
      code: Code.InvalidArgument,
      errorCode: "API_VALIDATION_FAILED",
      message: "credentialType SCIM_TOKEN requires role COMPANY_ADMIN",
      params: [
        { name: "credentialType", value: "SCIM_TOKEN" },
        { name: "role", value: "TMC_ADMIN" },
      ],
    });
    await rejectsWithRpc(h.apiUsers.createApiUser({ role: ApiUserRole.COMPANY_ADMIN }, admin), {
      code: Code.InvalidArgument,
      errorCode: "API_VALIDATION_FAILED",
      message: "orgId is required for role COMPANY_ADMIN",
      params: [{ name: "orgId", value: "" }],
    });
  });

  test("beyond the TMC's limit: FailedPrecondition (HTTP 409) API_USER_LIMIT_EXCEEDED with limit and current count", async () => {
    const small = await provisionTmc(h, 2);
    const smallAdmin = bearer(await accessToken(h, small.clientId, small.clientSecret));
    await h.apiUsers.createApiUser({}, smallAdmin);
    await rejectsWithRpc(h.apiUsers.createApiUser({}, smallAdmin), {
      code: Code.FailedPrecondition,
      errorCode: "API_USER_LIMIT_EXCEEDED",
      message: "The maximum number of API users for this TMC already exists",
      params: [
        { name: "limit", value: "2" },
        { name: "currentCount", value: "2" },
      ],
    });
  });

  test("list pages by limit and offset; totalCount counts every active user; limit 0 counts only", async () => {
    const paged = await provisionTmc(h, 10);
    const pagedAdmin = bearer(await accessToken(h, paged.clientId, paged.clientSecret));
    const ids = [paged.clientId];
    for (let i = 0; i < 4; i++) ids.push((await h.apiUsers.createApiUser({}, pagedAdmin)).clientId);
    const page = async (limit?: number, offset?: number) => {
      const response = await h.apiUsers.getApiUsers(
        { ...(limit === undefined ? {} : { limit }), ...(offset === undefined ? {} : { offset }) },
        pagedAdmin,
      );
      return [response.apiUsers.map((u) => u.clientId), response.totalCount];
    };
    assert.deepEqual(await page(), [ids, 5]);
    assert.deepEqual(await page(2), [ids.slice(0, 2), 5]);
    assert.deepEqual(await page(2, 3), [ids.slice(3), 5]);
    assert.deepEqual(await page(undefined, 5), [[], 5]);
    assert.deepEqual(await page(0), [[], 5]);
  });

  test("another TMC's API user is 404 on rotate and revoke, exactly like an unknown one, and keeps working", async () => {
    const other = await provisionTmc(h);
    for (const clientId of [other.clientId, "nosuchclientnosuchclient26"]) {
      await rejectsWithRpc(h.apiUsers.rotateClientSecret({ clientId }, admin), notFound(clientId));
      await rejectsWithRpc(h.apiUsers.deleteApiUser({ clientId }, admin), notFound(clientId));
    }
    assert.equal(
      (
        await h.auth.fetchOauth2Token({
          grantType: "client_credentials",
          clientId: other.clientId,
          clientSecret: other.clientSecret,
        })
      ).tokenType,
      "Bearer",
    );
    assert.equal(
      (await h.apiUsers.getApiUsers({}, admin)).apiUsers.some((u) => u.clientId === other.clientId),
      false,
    );
  });

  test("an admin may revoke itself; its own token stops working at once", async () => {
    const lone = await provisionTmc(h);
    const loneToken = bearer(await accessToken(h, lone.clientId, lone.clientSecret));
    await h.apiUsers.deleteApiUser({ clientId: lone.clientId }, loneToken);
    await rejectsWithRpc(h.apiUsers.getApiUsers({}, loneToken), {
      code: Code.Unauthenticated,
      errorCode: "USER_NOT_AUTHENTICATED",
      message: "The access token has been revoked",
    });
  });
});
