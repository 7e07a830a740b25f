// Entra ID's default attribute mappings and Okta's default SCIM 2.0 provisioning, request by
// request as their public documentation writes them, over REST on the backend TEST_BACKEND names:
// create → PATCH every mapped attribute → filter (userName eq, externalId eq) → deactivate
// (active false) → delete, asserting what the IdP checks (status, the resource it reads back, the
// ListResponse it matches on) and what the profile API shows.
//
// Sources:
// - Microsoft Learn, "Tutorial: Develop and plan provisioning for a SCIM endpoint in Microsoft Entra ID"
//   (https://learn.microsoft.com/en-us/entra/identity/app-provisioning/use-scim-to-provision-users-and-groups):
//   the default user attribute mappings table (userPrincipalName → userName, mail →
//   emails[type eq "work"].value, mailNickname → externalId, telephoneNumber / mobile /
//   facsimileTelephoneNumber → phoneNumbers[type eq "work"/"mobile"/"fax"].value, streetAddress, city,
//   state, postalCode, country → addresses[type eq "work"].*, physicalDeliveryOfficeName →
//   addresses[type eq "other"].formatted, preferredLanguage, jobTitle → title, department, employeeId,
//   manager) and its request examples (Create User with "roles": [], Update User [Multi-valued
//   properties] and [Single-valued properties], Disable User, Update Manager with a list of one
//   manager, Delete User).
// - Okta, "SCIM 2.0 protocol reference" (https://developer.okta.com/docs/api/openapi/okta-scim/guides/scim-20/)
//   and "Build a SCIM provisioning integration" (https://developer.okta.com/docs/guides/scim-provisioning-integration-prepare/main/):
//   the user lookup with filter=userName eq and startIndex/count, Create the user (emails primary work,
//   locale, groups [], password), Retrieve, Update a specific user (PUT), Update a specific user
//   (PATCH: "op": "replace" with a value object), deactivate with {"active": false}; the Okta user
//   profile's default SCIM attributes (nickName, middleName, honorificPrefix/Suffix, profileUrl,
//   userType, timezone, primaryPhone, the work address, the enterprise extension).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { accessToken } from "../helpers/api.js";
import { backend } from "../helpers/backend.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";
import {
  LIST_RESPONSE,
  newScimCompany,
  newTmc,
  PATCH_OP,
  scim,
  scimError,
  USER_SCHEMA,
  type ScimAnswer,
  type ScimTenant,
} from "./scim-kit.js";

const ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";
const USERS = "/v2/scim/v2/Users";

describe(`SCIM: Entra ID's default mappings and Okta's default provisioning, as documented (${backend})`, () => {
  let running: RunningService;
  let a: ScimTenant;
  let adminToken: string;
  const ok = (answer: ScimAnswer, status = 200) => {
    assert.equal(answer.status, status, JSON.stringify(answer.body));
    return answer.body as Record<string, any>;
  };
  const patch = (id: string, operations: unknown[]) =>
    scim(running, a.scimToken, "PATCH", `${USERS}/${id}`, { schemas: [PATCH_OP], Operations: operations });
  const filter = (expression: string) =>
    scim(running, a.scimToken, "GET", `${USERS}?filter=${encodeURIComponent(expression)}&startIndex=1&count=100`);
  const profile = async (id: string) => {
    const response = await fetch(`${running.baseUrl}/v2/users/${id}?includeInactive=true`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    assert.equal(response.status, 200);
    return (await response.json()) as Record<string, any>;
  };
  /** What the IdP matches on: exactly these users in a ListResponse. */
  const matches = async (expression: string, ids: string[]) => {
    const list = ok(await filter(expression));
    assert.deepEqual(list.schemas, [LIST_RESPONSE]);
    assert.equal(list.totalResults, ids.length, `${expression}: ${JSON.stringify(list)}`);
    assert.deepEqual(
      list.Resources.map((u: any) => u.id),
      ids,
      expression,
    );
    return list;
  };
  /** Entra and Okta both DELETE with a Content-Type header and no body. */
  const remove = (id: string) =>
    fetch(`${running.baseUrl}${USERS}/${id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${a.scimToken}`, "content-type": "application/scim+json" },
    });

  before(async () => {
    running = await startService();
    const tmcId = await newTmc(running.baseUrl, "IdP defaults TMC");
    a = await newScimCompany(running.baseUrl, tmcId, "IdP defaults company");
    const admin = await operatorCall<{ clientId: string; clientSecret: string }>(running.baseUrl, "CreateApiUser", {
      tmcId,
    });
    adminToken = await accessToken(running.baseUrl, admin.clientId, admin.clientSecret);
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  test("Entra ID: the default mappings (UPN ≠ mail) created, every mapped attribute PATCHed, filtered, disabled, deleted", async () => {
    const upn = "ada.lovelace@contoso.onmicrosoft.com";
    // Entra first asks whether the user exists.
    assert.equal(ok(await filter(`userName eq "${upn}"`)).totalResults, 0);
    const boss = ok(
      await scim(running, a.scimToken, "POST", USERS, {
        schemas: [USER_SCHEMA],
        userName: "charles.babbage@contoso.onmicrosoft.com",
        active: true,
        name: { givenName: "Charles", familyName: "Babbage" },
      }),
      201,
    );

    // Create User, as the tutorial's example with the default mappings' attributes.
    const body = {
      schemas: [USER_SCHEMA, ENTERPRISE],
      externalId: "alovelace",
      userName: upn,
      active: true,
      displayName: "Ada Lovelace",
      title: "Analyst",
      preferredLanguage: "en-GB",
      emails: [
        { primary: true, type: "work", value: "ada@contoso.example" },
        { type: "other", value: "smtp:ada.l@contoso.example" },
      ],
      meta: { resourceType: "User" },
      name: { formatted: "Ada Lovelace", familyName: "Lovelace", givenName: "Ada" },
      phoneNumbers: [
        { type: "work", value: "+44 20 7946 0001" },
        { type: "mobile", value: "+44 7700 900001" },
        { type: "fax", value: "+44 20 7946 0002" },
      ],
      addresses: [
        {
          type: "work",
          streetAddress: "12 St James's Square",
          locality: "London",
          region: "Greater London",
          postalCode: "SW1Y 4LB",
          country: "GB",
        },
        { type: "other", formatted: "Building 3, room 14" },
      ],
      roles: [],
      [ENTERPRISE]: { employeeNumber: "1815", department: "Analytical Engines" },
    };
    const created = ok(await scim(running, a.scimToken, "POST", USERS, body), 201);
    const id = created.id as string;
    const { meta: _meta, roles: _roles, ...sent } = body;
    const expected = { ...sent, id, schemas: [USER_SCHEMA, ENTERPRISE] };
    assert.deepEqual(
      withoutMeta(created),
      { ...expected, emails: [body.emails[0], body.emails[1]] },
      "201 echoes every mapped attribute; roles (accepted and ignored) is not returned",
    );
    assert.deepEqual(ok(await scim(running, a.scimToken, "GET", `${USERS}/${id}`)), created);

    // The profile: the UPN is the identity (businessInfo.email), the primary mail the profile's email.
    const shown = await profile(id);
    assert.equal(shown.businessInfo.email, upn);
    assert.equal(shown.personalInfo.email, "ada@contoso.example", "the primary email");
    assert.equal(shown.personalInfo.preferredLanguage, "en-GB");
    assert.equal(shown.businessInfo.designation, "Analyst");

    // Update User: one operation per mapped attribute, Entra's "Replace"/"Add" with paths.
    const patched = ok(
      await patch(id, [
        { op: "Replace", path: "userName", value: "ada.king@contoso.onmicrosoft.com" },
        { op: "Replace", path: 'emails[type eq "work"].value', value: "ada.king@contoso.example" },
        { op: "Add", path: 'emails[type eq "other"].value', value: "smtp:countess@contoso.example" },
        { op: "Replace", path: "name.givenName", value: "Augusta Ada" },
        { op: "Replace", path: "name.familyName", value: "King" },
        { op: "Replace", path: "name.formatted", value: "Augusta Ada King" },
        { op: "Replace", path: "displayName", value: "Ada King" },
        { op: "Replace", path: "title", value: "Countess" },
        { op: "Replace", path: "preferredLanguage", value: "fr-FR" },
        { op: "Replace", path: "externalId", value: "aking" },
        { op: "Replace", path: 'phoneNumbers[type eq "work"].value', value: "+44 20 7946 0101" },
        { op: "Replace", path: 'phoneNumbers[type eq "mobile"].value', value: "+44 7700 900101" },
        { op: "Replace", path: 'phoneNumbers[type eq "fax"].value', value: "+44 20 7946 0102" },
        { op: "Replace", path: 'addresses[type eq "work"].streetAddress', value: "1 Marylebone Road" },
        { op: "Replace", path: 'addresses[type eq "work"].locality', value: "Westminster" },
        { op: "Replace", path: 'addresses[type eq "work"].region', value: "London" },
        { op: "Replace", path: 'addresses[type eq "work"].postalCode', value: "NW1 5LR" },
        { op: "Replace", path: 'addresses[type eq "work"].country', value: "FR" },
        { op: "Replace", path: 'addresses[type eq "other"].formatted', value: "Building 4" },
        { op: "Replace", path: `${ENTERPRISE}:employeeNumber`, value: "1816" },
        { op: "Replace", path: `${ENTERPRISE}:department`, value: "Difference Engines" },
        // Update Manager: the tutorial's request sends a list of one manager.
        { op: "Add", path: `${ENTERPRISE}:manager`, value: [{ $ref: null, value: boss.id }] },
      ]),
    );
    assert.deepEqual(withoutMeta(patched), {
      schemas: [USER_SCHEMA, ENTERPRISE],
      id,
      externalId: "aking",
      userName: "ada.king@contoso.onmicrosoft.com",
      name: { givenName: "Augusta Ada", familyName: "King", formatted: "Augusta Ada King" },
      displayName: "Ada King",
      title: "Countess",
      preferredLanguage: "fr-FR",
      emails: [
        { primary: true, type: "work", value: "ada.king@contoso.example" },
        { type: "other", value: "smtp:countess@contoso.example" },
      ],
      phoneNumbers: [
        { type: "work", value: "+44 20 7946 0101" },
        { type: "mobile", value: "+44 7700 900101" },
        { type: "fax", value: "+44 20 7946 0102" },
      ],
      addresses: [
        {
          type: "work",
          streetAddress: "1 Marylebone Road",
          locality: "Westminster",
          region: "London",
          postalCode: "NW1 5LR",
          country: "FR",
        },
        { type: "other", formatted: "Building 4" },
      ],
      active: true,
      [ENTERPRISE]: {
        employeeNumber: "1816",
        department: "Difference Engines",
        manager: { value: boss.id, $ref: boss.meta.location, displayName: "Charles Babbage" },
      },
    });
    assert.deepEqual(ok(await scim(running, a.scimToken, "GET", `${USERS}/${id}`)), patched, "GET shows the PATCH");
    const after = await profile(id);
    assert.equal(after.businessInfo.email, "ada.king@contoso.onmicrosoft.com");
    assert.equal(after.personalInfo.email, "ada.king@contoso.example");
    assert.equal(after.personalInfo.preferredLanguage, "fr-FR");

    // Entra's removal of a mapped value that became empty in the directory.
    ok(await patch(id, [{ op: "Remove", path: 'phoneNumbers[type eq "fax"]' }]));
    assert.deepEqual(
      ok(await scim(running, a.scimToken, "GET", `${USERS}/${id}`)).phoneNumbers.map((p: any) => p.type),
      ["work", "mobile"],
    );

    // Matching: userName eq and externalId eq; the old UPN no longer matches.
    await matches('userName eq "ADA.KING@contoso.onmicrosoft.com"', [id]);
    await matches('externalId eq "aking"', [id]);
    await matches(`userName eq "${upn}"`, []);
    await matches('emails[type eq "work"].value eq "ada.king@contoso.example"', [id]);

    // Disable User: Entra sends the boolean as the string "False".
    const disabled = ok(await patch(id, [{ op: "Replace", path: "active", value: "False" }]));
    assert.equal(disabled.active, false);
    const still = await matches('externalId eq "aking"', [id]);
    assert.equal(still.Resources[0].active, false, "a disabled user is still found, inactive");

    // Delete User, with a Content-Type and no body.
    const deleted = await remove(id);
    assert.equal(deleted.status, 204, await deleted.text());
    scimError(await scim(running, a.scimToken, "GET", `${USERS}/${id}`), 404);
    await matches('externalId eq "aking"', []);
  });

  test("Okta: lookup, create with its default profile, GET, PUT, PATCH every mapped attribute, filter, deactivate, delete", async () => {
    const userName = "isaac.brock@example.com";
    await matches(`userName eq "${userName}"`, []);
    // Create the user: Okta's request, with the default SCIM attributes of an Okta user profile.
    const body = {
      schemas: [USER_SCHEMA, ENTERPRISE],
      userName,
      name: {
        givenName: "Isaac",
        familyName: "Brock",
        middleName: "Kent",
        honorificPrefix: "Mr.",
        honorificSuffix: "Jr.",
      },
      emails: [{ primary: true, value: userName, type: "work" }],
      displayName: "Isaac Brock",
      nickName: "Ike",
      profileUrl: "https://example.com/isaac",
      title: "Lead",
      userType: "Employee",
      preferredLanguage: "en-US",
      locale: "en-US",
      timezone: "America/Los_Angeles",
      phoneNumbers: [{ primary: true, type: "mobile", value: "+1 555 0101" }],
      addresses: [
        {
          primary: true,
          type: "work",
          streetAddress: "100 First St",
          locality: "San Francisco",
          region: "CA",
          postalCode: "94105",
          country: "US",
        },
      ],
      externalId: "00ujl29u0le5T6Aj10h7",
      groups: [],
      password: "1mz050nq",
      active: true,
      [ENTERPRISE]: {
        employeeNumber: "E-1",
        costCenter: "CC-1",
        organization: "Modest Mouse",
        division: "Music",
        department: "Vocals",
      },
    };
    const created = ok(await scim(running, a.scimToken, "POST", USERS, body), 201);
    const id = created.id as string;
    const { groups: _groups, password: _password, ...stored } = body;
    assert.deepEqual(
      withoutMeta(created),
      { ...stored, name: { ...stored.name, formatted: "Isaac Brock" }, id },
      "every default attribute returned (name.formatted defaulted); password and groups accepted, not returned",
    );
    assert.equal((await profile(id)).personalInfo.email, userName);

    // Retrieve, then Update a specific user (PUT): Okta sends the whole user.
    const fetched = ok(await scim(running, a.scimToken, "GET", `${USERS}/${id}`));
    const put = ok(
      await scim(running, a.scimToken, "PUT", `${USERS}/${id}`, {
        ...fetched,
        name: { ...fetched.name, givenName: "Ike" },
        phoneNumbers: [...fetched.phoneNumbers, { type: "work", value: "+1 555 0102" }],
        password: "changed",
      }),
    );
    assert.equal(put.name.givenName, "Ike");
    assert.deepEqual(
      put.phoneNumbers.map((p: any) => p.type),
      ["mobile", "work"],
    );

    // Update a specific user (PATCH): a value object per mapped attribute.
    const patched = ok(
      await patch(id, [
        {
          op: "replace",
          value: {
            userName: "isaac.b@example.com",
            name: {
              givenName: "Isaac",
              familyName: "Brock-Smith",
              middleName: "K.",
              honorificPrefix: "Dr.",
              honorificSuffix: "III",
            },
            displayName: "Isaac B.",
            nickName: "Izzy",
            profileUrl: "https://example.com/ib",
            title: "Principal",
            userType: "Contractor",
            preferredLanguage: "de-DE",
            locale: "de-DE",
            timezone: "Europe/Berlin",
            emails: [{ primary: true, value: "isaac.b@example.com", type: "work" }],
            phoneNumbers: [{ primary: true, type: "mobile", value: "+49 30 0000" }],
            addresses: [
              {
                primary: true,
                type: "work",
                streetAddress: "Unter den Linden 1",
                locality: "Berlin",
                region: "BE",
                postalCode: "10117",
                country: "DE",
              },
            ],
            externalId: "00ujl29u0le5T6Aj10h8",
            password: "ignored",
            [ENTERPRISE]: {
              employeeNumber: "E-2",
              costCenter: "CC-2",
              organization: "Org 2",
              division: "Div 2",
              department: "Dept 2",
            },
          },
        },
      ]),
    );
    assert.deepEqual(withoutMeta(patched), {
      schemas: [USER_SCHEMA, ENTERPRISE],
      id,
      externalId: "00ujl29u0le5T6Aj10h8",
      userName: "isaac.b@example.com",
      name: {
        givenName: "Isaac",
        familyName: "Brock-Smith",
        formatted: "Isaac Brock", // a sub-attribute the value leaves out is left unchanged (RFC 7644 3.5.2.3)
        middleName: "K.",
        honorificPrefix: "Dr.",
        honorificSuffix: "III",
      },
      displayName: "Isaac B.",
      nickName: "Izzy",
      profileUrl: "https://example.com/ib",
      title: "Principal",
      userType: "Contractor",
      preferredLanguage: "de-DE",
      locale: "de-DE",
      timezone: "Europe/Berlin",
      emails: [{ primary: true, value: "isaac.b@example.com", type: "work" }],
      phoneNumbers: [{ primary: true, type: "mobile", value: "+49 30 0000" }],
      addresses: [
        {
          primary: true,
          type: "work",
          streetAddress: "Unter den Linden 1",
          locality: "Berlin",
          region: "BE",
          postalCode: "10117",
          country: "DE",
        },
      ],
      active: true,
      [ENTERPRISE]: {
        employeeNumber: "E-2",
        costCenter: "CC-2",
        organization: "Org 2",
        division: "Div 2",
        department: "Dept 2",
      },
    });
    assert.deepEqual(ok(await scim(running, a.scimToken, "GET", `${USERS}/${id}`)), patched);
    assert.equal((await profile(id)).personalInfo.preferredLanguage, "de-DE");

    await matches('userName eq "isaac.b@example.com"', [id]);
    await matches('externalId eq "00ujl29u0le5T6Aj10h8"', [id]);

    // Deactivate: Okta's PATCH without a path.
    const inactive = ok(await patch(id, [{ op: "replace", value: { active: false } }]));
    assert.equal(inactive.active, false);
    assert.equal((await matches('userName eq "isaac.b@example.com"', [id])).Resources[0].active, false);

    const deleted = await remove(id);
    assert.equal(deleted.status, 204, await deleted.text());
    scimError(await scim(running, a.scimToken, "GET", `${USERS}/${id}`), 404);
  });

  test("/Schemas says which attributes are stored and which are accepted and ignored (returned never)", async () => {
    const schema = ok(await scim(running, a.scimToken, "GET", `/v2/scim/v2/Schemas/${USER_SCHEMA}`));
    const byName = new Map<string, any>(schema.attributes.map((attribute: any) => [attribute.name, attribute]));
    for (const name of ["emails", "phoneNumbers", "addresses", "preferredLanguage", "nickName", "locale", "timezone"])
      assert.equal(byName.get(name)?.returned, "default", `${name} is stored and returned`);
    for (const name of ["password", "roles", "entitlements", "ims", "photos", "x509Certificates"]) {
      assert.equal(byName.get(name)?.returned, "never", `${name} is accepted and ignored`);
      assert.equal(byName.get(name)?.mutability, "writeOnly");
    }
    assert.match(schema.description, /^User Account/);
    // A PATCH of an ignored attribute succeeds like the POST that carried it, and changes nothing.
    const user = ok(
      await scim(running, a.scimToken, "POST", USERS, {
        schemas: [USER_SCHEMA],
        userName: "roles@example.com",
        roles: [{ value: "admin", primary: "True" }],
      }),
      201,
    );
    const answer = ok(await patch(user.id, [{ op: "Add", path: 'roles[primary eq "True"].value', value: "reader" }]));
    assert.equal("roles" in answer, false);
  });
});

function withoutMeta(resource: Record<string, any>): Record<string, any> {
  const { meta, ...rest } = resource;
  assert.equal(meta.resourceType, "User");
  return rest;
}
