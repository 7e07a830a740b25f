import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { seededAdminAuthorization } from "../helpers/api.js";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";

/**
 * The contract says which body each REST route takes (travel.common.v1.rest form_body): the
 * OAuth endpoints take a form and refuse JSON; every other route takes JSON and refuses a form.
 * Before this rule a form post of `credentialType=NOPE&bogus=1` to /v2/api-users created a user,
 * because form decoding ignores unknown fields and an unknown enum name.
 */
describe("request bodies follow the contract's content type", () => {
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

  const listed = async () => {
    const response = await running.service.app.inject({
      method: "GET",
      url: "/v2/api-users",
      headers: { authorization },
    });
    return response.json().totalCount as number;
  };

  test("a form post to a JSON route is 415 and creates nothing", async () => {
    const before = await listed();
    const response = await running.service.app.inject({
      method: "POST",
      url: "/v2/api-users",
      headers: { authorization, "content-type": "application/x-www-form-urlencoded" },
      payload: "credentialType=NOPE&bogus=1",
    });
    assert.equal(response.statusCode, 415, response.body);
    const body = response.json();
    assert.equal(body.errorMessages[0].errorCode, "UNSUPPORTED_MEDIA_TYPE");
    assert.equal(body.errorMessages[0].message, "This operation takes application/json");
    assert.equal(body.debugIdentifier, response.headers["x-request-id"]);
    assert.equal(await listed(), before, "no API user was created");
  });

  test("the same request as JSON is refused for its unknown field, not created", async () => {
    const response = await running.service.app.inject({
      method: "POST",
      url: "/v2/api-users",
      headers: { authorization, "content-type": "application/json" },
      payload: JSON.stringify({ credentialType: "NOPE", bogus: 1 }),
    });
    assert.equal(response.statusCode, 400, response.body);
  });

  for (const url of ["/v2/auth/oauth2-token", "/v2/auth/introspect"]) {
    test(`JSON to the form endpoint ${url} is 415, in the OAuth dialect`, async () => {
      const response = await running.service.app.inject({
        method: "POST",
        url,
        headers: { "content-type": "application/json" },
        payload: JSON.stringify({ grant_type: "client_credentials", client_id: "x", client_secret: "y", token: "t" }),
      });
      assert.equal(response.statusCode, 415, response.body);
      const body = response.json();
      assert.equal(body.errorMessages[0].errorCode, "UNSUPPORTED_MEDIA_TYPE");
      assert.equal(body.errorMessages[0].message, "This operation takes application/x-www-form-urlencoded");
      assert.equal(body.error, "invalid_request");
    });
  }

  test("the legacy /get-auth-token keeps its documented JSON body and refuses a form", async () => {
    const form = await running.service.app.inject({
      method: "POST",
      url: "/get-auth-token",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      payload: "clientId=x&clientSecret=y",
    });
    assert.equal(form.statusCode, 415, form.body);
    const json = await running.service.app.inject({
      method: "POST",
      url: "/get-auth-token",
      headers: { "content-type": "application/json" },
      payload: JSON.stringify({ clientId: "x", clientSecret: "y" }),
    });
    assert.equal(json.statusCode, 403, json.body);
    assert.equal(json.json().errorMessages[0].errorCode, "INVALID_CLIENT");
  });

  test("routes without a body are unaffected, and a form to the token endpoint still works", async () => {
    const response = await running.service.app.inject({
      method: "POST",
      url: "/v2/auth/oauth2-token",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      payload: "grant_type=client_credentials&client_id=nobody&client_secret=wrong",
    });
    assert.equal(response.statusCode, 403, response.body);
    assert.equal(response.json().error, "invalid_client");
  });
});
