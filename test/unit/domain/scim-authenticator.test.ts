import assert from "node:assert/strict";
import crypto from "node:crypto";
import { beforeEach, describe, test } from "node:test";
import { deriveKeyMaterial } from "../../../src/domain/shared/key-material.js";
import { sealScimToken } from "../../../src/domain/shared/scim-token.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import {
  createPgliteFixture,
  newApiUser,
  newTenant,
  type PgliteDomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";

const refused = { code: "USER_NOT_AUTHENTICATED", message: "A valid SCIM token is required" } as const;

describe("ScimAuthenticator", () => {
  let f: PgliteDomainFixture;
  let tmcId: string;
  let scimUser: ProvisionedApiUser;
  beforeEach(async () => {
    f = await createPgliteFixture();
    let orgId: string;
    ({ tmcId, orgId } = await newTenant(f));
    scimUser = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", credentialType: "SCIM_TOKEN", orgId });
  });

  const seal = (clientId: string, secret: string, keys = f.keys) =>
    sealScimToken(keys.scimTokenKey, keys.scimTokenKeyId, { clientId, secret });

  test("the SCIM token issued at creation authenticates its API user", async () => {
    assert.deepEqual(await f.scim.authenticate(scimUser.scimToken!), scimUser.user);
  });

  test("every forgery gets the same 401: malformed, re-pointed, wrong secret, wrong key, client-credentials user, unknown client", async () => {
    const plain = await newApiUser(f, tmcId);
    const json = JSON.parse(Buffer.from(scimUser.scimToken!, "base64").toString("utf8")) as Record<string, unknown>;
    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64");
    const forgeries = [
      "",
      "garbage",
      scimUser.scimToken!.slice(0, -6),
      encode({ ...json, clientId: plain.clientId }),
      encode({ ...json, scope: "api-users" }),
      seal(scimUser.clientId, "guessed-secret"),
      seal(scimUser.clientId, scimUser.secret, deriveKeyMaterial(crypto.randomBytes(32))),
      // A client-credentials user's genuine secret in a well-formed envelope is not a SCIM credential.
      seal(plain.clientId, plain.secret),
      seal("nobody", "x"),
    ];
    for (const forged of forgeries) await rejectsWith(f.scim.authenticate(forged), refused);
  });

  test("rotated-away and revoked SCIM tokens get the same 401", async () => {
    const caller = { clientId: "operator", tmcId };
    const rotated = await f.admin.rotate(caller, scimUser.clientId, "r");
    await rejectsWith(f.scim.authenticate(scimUser.scimToken!), refused);
    assert.equal((await f.scim.authenticate(rotated.scimToken!)).credentialGeneration, 2);
    await f.admin.revoke(caller, scimUser.clientId, "r");
    await rejectsWith(f.scim.authenticate(rotated.scimToken!), refused);
  });

  test("only a well-sealed envelope reaches the database; every refusal is the same 401", async () => {
    f.store.calls.length = 0;
    await rejectsWith(f.scim.authenticate("garbage"), refused);
    assert.deepEqual(f.store.calls, []);
    await rejectsWith(f.scim.authenticate(seal(scimUser.clientId, "wrong")), refused);
    assert.deepEqual(f.store.calls, ["apiUsers.findActive"]);
  });
});
