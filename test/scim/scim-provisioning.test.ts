import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { accessToken, callApi } from "../helpers/api.js";
import { internalsOf } from "../../src/app/test-access.js";
import { backend } from "../helpers/backend.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";
import {
  LIST_RESPONSE,
  newScimCompany,
  newTmc,
  newUser,
  PATCH_OP,
  scim,
  scimError,
  USER_SCHEMA,
  type ScimTenant,
} from "./scim-kit.js";

describe(`SCIM provisioning as Entra ID and Okta send it (${backend})`, () => {
  let running: RunningService;
  let a: ScimTenant;
  before(async () => {
    running = await startService();
    const tmcId = await newTmc(running.baseUrl, "SCIM TMC");
    a = await newScimCompany(running.baseUrl, tmcId, "Company A");
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  test('Entra ID: create, filter by userName, PATCH Replace attributes, PATCH active "False", GET shows inactive, DELETE', async () => {
    // Entra first looks the user up by userName.
    const missing = await scim(
      running,
      a.scimToken,
      "GET",
      `/v2/scim/v2/Users?filter=${encodeURIComponent('userName eq "grace@entra.example"')}`,
    );
    assert.equal(missing.status, 200);
    assert.match(missing.contentType, /^application\/scim\+json/);
    assert.deepEqual(missing.body, {
      schemas: [LIST_RESPONSE],
      totalResults: 0,
      itemsPerPage: 0,
      startIndex: 1,
      Resources: [],
    });

    const created = await scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", {
      schemas: [USER_SCHEMA, "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],
      externalId: "entra-0001",
      userName: "Grace@Entra.example",
      active: true,
      displayName: "Grace Hopper",
      emails: [{ primary: true, type: "work", value: "Grace@Entra.example" }],
      meta: { resourceType: "User" },
      name: { formatted: "Grace Hopper", familyName: "Hopper", givenName: "Grace" },
      title: "Rear Admiral",
      phoneNumbers: [{ type: "work", value: "+1 555 0100" }],
      "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": { department: "Navy", employeeNumber: "42" },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.match(created.contentType, /^application\/scim\+json/);
    const id = created.body.id as string;
    assert.match(id, /^[0-9a-f-]{36}$/);
    assert.equal(created.location, created.body.meta.location);
    assert.ok(created.location!.endsWith(`/v2/scim/v2/Users/${id}`), created.location!);
    assert.deepEqual(
      { ...created.body, meta: { ...created.body.meta, created: "-", lastModified: "-", location: "-" } },
      {
        schemas: [USER_SCHEMA, "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],
        id,
        externalId: "entra-0001",
        userName: "Grace@Entra.example",
        name: { givenName: "Grace", familyName: "Hopper", formatted: "Grace Hopper" },
        displayName: "Grace Hopper",
        title: "Rear Admiral",
        emails: [{ value: "Grace@Entra.example", type: "work", primary: true }],
        phoneNumbers: [{ type: "work", value: "+1 555 0100" }],
        active: true,
        "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": { department: "Navy", employeeNumber: "42" },
        meta: { resourceType: "User", created: "-", lastModified: "-", location: "-" },
      },
      "phoneNumbers, title and the enterprise extension are held",
    );

    // Filter by userName (case-insensitive), by externalId, and by the work email.
    for (const filter of [
      'userName eq "grace@entra.example"',
      'externalId eq "entra-0001"',
      'emails[type eq "work"].value eq "GRACE@entra.example"',
    ]) {
      const found = await scim(running, a.scimToken, "GET", `/v2/scim/v2/Users?filter=${encodeURIComponent(filter)}`);
      assert.equal(found.status, 200, filter);
      assert.equal(found.body.totalResults, 1, filter);
      assert.equal(found.body.Resources[0].id, id, filter);
    }

    // Entra's attribute update: "Replace" capitalised, one operation per path.
    const replaced = await scim(running, a.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [
        { op: "Replace", path: "name.givenName", value: "Grace B." },
        { op: "Replace", path: "name.familyName", value: "Murray" },
        { op: "Add", path: "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department", value: "Research" },
        { op: "Replace", path: 'emails[type eq "work"].value', value: "Grace@Entra.example" },
        { op: "Replace", path: "externalId", value: "entra-0001-b" },
      ],
    });
    assert.equal(replaced.status, 200, JSON.stringify(replaced.body));
    assert.deepEqual(
      [replaced.body.name.givenName, replaced.body.name.familyName, replaced.body.externalId, replaced.body.active],
      ["Grace B.", "Murray", "entra-0001-b", true],
    );

    // Entra's soft delete: active as the string "False".
    const disabled = await scim(running, a.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: "Replace", path: "active", value: "False" }],
    });
    assert.equal(disabled.status, 200);
    assert.equal(disabled.body.active, false);
    const shown = await scim(running, a.scimToken, "GET", `/v2/scim/v2/Users/${id}`);
    assert.equal(shown.status, 200);
    assert.equal(shown.body.active, false, "a deactivated user is still visible, as inactive");
    assert.equal(shown.body.name.givenName, "Grace B.");
    const inactive = await scim(
      running,
      a.scimToken,
      "GET",
      `/v2/scim/v2/Users?filter=${encodeURIComponent("active eq false")}`,
    );
    assert.deepEqual(
      inactive.body.Resources.map((u: any) => u.id),
      [id],
    );

    // Entra reactivates with "True".
    const enabled = await scim(running, a.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: "replace", path: "active", value: "True" }],
    });
    assert.equal(enabled.body.active, true);

    const deleted = await scim(running, a.scimToken, "DELETE", `/v2/scim/v2/Users/${id}`);
    assert.equal(deleted.status, 204);
    assert.equal(deleted.body, undefined);
    scimError(await scim(running, a.scimToken, "GET", `/v2/scim/v2/Users/${id}`), 404);
    scimError(await scim(running, a.scimToken, "DELETE", `/v2/scim/v2/Users/${id}`), 404);
    scimError(
      await scim(running, a.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, {
        schemas: [PATCH_OP],
        Operations: [{ op: "replace", path: "active", value: true }],
      }),
      404,
    );
    const afterDelete = await scim(
      running,
      a.scimToken,
      "GET",
      `/v2/scim/v2/Users?filter=${encodeURIComponent('userName eq "grace@entra.example"')}`,
    );
    assert.equal(afterDelete.body.totalResults, 0);

    // The userName is free again: a new user (a new id) can be provisioned with it.
    const again = await scim(running, a.scimToken, "POST", "/v2/scim/Users", newUser("grace@entra.example"));
    assert.equal(again.status, 201);
    assert.notEqual(again.body.id, id);
  });

  test("the deleted user stays in the table, inactive, for the profile API", async () => {
    const created = await scim(
      running,
      a.scimToken,
      "POST",
      "/v2/scim/v2/Users",
      newUser("deleted.profile@example.com"),
    );
    const id = created.body.id as string;
    assert.equal((await scim(running, a.scimToken, "DELETE", `/v2/scim/v2/Users/${id}`)).status, 204);
    const row = await internalsOf(running.service)
      .db("users")
      .where({ id })
      .first("is_active", "scim_deleted_at", "email");
    assert.equal(row.is_active, false);
    assert.ok(row.scim_deleted_at);
    assert.equal(row.email, "deleted.profile@example.com");
  });

  test("Okta: create, PUT replace, PATCH active false (value object without a path), list paged", async () => {
    const created = await scim(
      running,
      a.scimToken,
      "POST",
      "/v2/scim/v2/Users",
      {
        schemas: [USER_SCHEMA],
        userName: "alan@okta.example",
        name: { givenName: "Alan", familyName: "Turing" },
        emails: [{ primary: true, value: "alan@okta.example", type: "work" }],
        displayName: "Alan Turing",
        locale: "en-GB",
        externalId: "00u1okta",
        groups: [],
        password: "never-stored-1!",
        active: true,
      },
      "application/json",
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(
      JSON.stringify(created.body).includes("never-stored"),
      false,
      "the password is neither stored nor echoed",
    );
    const id = created.body.id as string;

    // Okta pages its lookups.
    const lookup = await scim(
      running,
      a.scimToken,
      "GET",
      `/v2/scim/v2/Users?filter=${encodeURIComponent('userName eq "alan@okta.example"')}&startIndex=1&count=100`,
    );
    assert.equal(lookup.body.totalResults, 1);

    const put = await scim(running, a.scimToken, "PUT", `/v2/scim/v2/Users/${id}`, {
      schemas: [USER_SCHEMA],
      id,
      userName: "alan.turing@okta.example",
      name: { givenName: "Alan M.", familyName: "Turing" },
      emails: [{ primary: true, value: "alan.turing@okta.example", type: "work" }],
      active: true,
      externalId: "00u1okta",
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.deepEqual(
      [put.body.userName, put.body.name.givenName, put.body.emails[0].value],
      ["alan.turing@okta.example", "Alan M.", "alan.turing@okta.example"],
    );
    assert.ok(put.body.meta.lastModified >= created.body.meta.lastModified);

    const patched = await scim(running, a.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: "replace", value: { active: false } }],
    });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.equal(patched.body.active, false);
    assert.equal(
      patched.body.userName,
      "alan.turing@okta.example",
      "a path-less replace changes only the attributes it names",
    );

    // Path-less value object with dotted names, as Entra sends for several attributes at once.
    const multi = await scim(running, a.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: "Replace", value: { "name.givenName": "Alan", active: true, externalId: "00u1okta-2" } }],
    });
    assert.deepEqual(
      [multi.status, multi.body.name.givenName, multi.body.active, multi.body.externalId],
      [200, "Alan", true, "00u1okta-2"],
    );

    // Remove externalId with a path.
    const removed = await scim(running, a.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: "remove", path: "externalId" }],
    });
    assert.equal(removed.status, 200);
    assert.equal("externalId" in removed.body, false);
  });

  test("the profile API finds a SCIM-deleted user with includeInactive=true (when the profile read is served)", async (t) => {
    const tmcAdmin = await operatorCall<{ clientId: string; clientSecret: string }>(running.baseUrl, "CreateApiUser", {
      tmcId: a.tmcId,
    });
    const token = await accessToken(running.baseUrl, tmcAdmin.clientId, tmcAdmin.clientSecret);
    const created = await scim(
      running,
      a.scimToken,
      "POST",
      "/v2/scim/v2/Users",
      newUser("profile.after.delete@example.com"),
    );
    await scim(running, a.scimToken, "DELETE", `/v2/scim/v2/Users/${created.body.id}`);
    const profile = await callApi(running.baseUrl, `/v2/users/${created.body.id}?includeInactive=true`, token);
    if (profile.status === 501 || profile.status === 400) {
      t.skip(`the profile read answers ${profile.status} in this build`);
      return;
    }
    assert.equal(profile.status, 200, await profile.clone().text());
    const body = (await profile.json()) as Record<string, unknown>;
    assert.ok(JSON.stringify(body).includes("profile.after.delete@example.com"));
  });
});
