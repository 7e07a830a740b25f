import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { internalsOf } from "../../src/app/test-access.js";
import { ScimAuthenticator } from "../../src/domain/api-users/scim-authenticator.js";
import { sealScimToken } from "../../src/domain/shared/scim-token.js";
import { DomainError } from "../../src/errors/domain-error.js";
import { PostgresApiUserRepository } from "../../src/store/postgres/repositories/api-user-repository.js";
import { KnexUnitOfWork } from "../../src/store/postgres/unit-of-work.js";
import { accessToken, callApi } from "../helpers/api.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";

// The end-to-end counterpart of test/unit/domain/scim-authenticator.test.ts: the same rules over the real
// API-user repository of a running service (both backends), with the users made and rotated through REST.
describe("SCIM token authentication", () => {
  let running: RunningService;
  let scim: ScimAuthenticator;
  let admin: string;
  let orgId: string;
  before(async () => {
    running = await startService();
    const { db, keys } = internalsOf(running.service);
    scim = new ScimAuthenticator({ uow: new KnexUnitOfWork(db), apiUsers: new PostgresApiUserRepository(), keys });
    const seed = await operatorCall<{ tmcId: string; orgId: string; clientId: string; clientSecret: string }>(
      running.baseUrl,
      "Seed",
      {},
    );
    orgId = seed.orgId;
    admin = await accessToken(running.baseUrl, seed.clientId, seed.clientSecret);
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });
  const refused = async (token: string) => {
    await assert.rejects(
      scim.authenticate(token),
      (e: unknown) =>
        e instanceof DomainError &&
        e.message === "A valid SCIM token is required" &&
        e.code === "USER_NOT_AUTHENTICATED",
    );
  };
  const createScimUser = async () =>
    (await (
      await callApi(running.baseUrl, "/v2/api-users", admin, {
        orgId,
        role: "COMPANY_ADMIN",
        credentialType: "SCIM_TOKEN",
      })
    ).json()) as { clientId: string; scimToken: string };

  test("a SCIM token issued at creation authenticates its API user", async () => {
    const user = await createScimUser();
    const authenticated = await scim.authenticate(user.scimToken);
    assert.equal(authenticated.clientId, user.clientId);
    assert.equal(authenticated.role, "COMPANY_ADMIN");
  });

  test("forged, re-pointed and client-credentials envelopes all get the same 401", async () => {
    const user = await createScimUser();
    const json = JSON.parse(Buffer.from(user.scimToken, "base64").toString("utf8"));
    const { keys } = internalsOf(running.service);
    const plain = (await (await callApi(running.baseUrl, "/v2/api-users", admin, {})).json()) as {
      clientId: string;
      clientSecret: string;
    };
    for (const token of [
      "",
      "garbage",
      Buffer.from(JSON.stringify({ ...json, clientId: plain.clientId })).toString("base64"),
      sealScimToken(keys.scimTokenKey, keys.scimTokenKeyId, { clientId: user.clientId, secret: "guessed" }),
      // A client-credentials user's real secret in a well-formed envelope: not a SCIM credential.
      sealScimToken(keys.scimTokenKey, keys.scimTokenKeyId, { clientId: plain.clientId, secret: plain.clientSecret }),
      sealScimToken(keys.scimTokenKey, keys.scimTokenKeyId, { clientId: "nobody", secret: "x" }),
    ]) {
      await refused(token);
    }
  });

  test("rotation returns a new SCIM token and kills the old one; revocation kills it for good", async () => {
    const user = await createScimUser();
    const rotated = (await (
      await callApi(running.baseUrl, "/v2/api-users/rotate", admin, { clientId: user.clientId })
    ).json()) as { scimToken: string; clientSecret?: string };
    assert.ok(rotated.scimToken);
    assert.equal(rotated.clientSecret, undefined);
    await refused(user.scimToken);
    assert.equal((await scim.authenticate(rotated.scimToken)).clientId, user.clientId);
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users/revoke", admin, { clientId: user.clientId })).status,
      204,
    );
    await refused(rotated.scimToken);
  });
});
