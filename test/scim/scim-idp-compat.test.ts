// SCIM as Microsoft Entra ID and Okta provision users, written from RFC 7643/7644 and
// the Entra ID and Okta provisioning documentation: what an IdP writes is stored and read back, or
// refused with a scimType — never answered 200 and dropped. The round-trip test walks /Schemas, so
// the schema document and the behaviour cannot drift apart. On the backend TEST_BACKEND names.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { accessToken } from "../helpers/api.js";
import { backend } from "../helpers/backend.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";
import {
  newScimCompany,
  newTmc,
  newUser,
  PATCH_OP,
  scim,
  scimError,
  USER_SCHEMA,
  type ScimAnswer,
  type ScimTenant,
} from "./scim-kit.js";

const ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe(`SCIM as Entra ID and Okta provision it: stored or refused, /Schemas says which (${backend})`, () => {
  let running: RunningService;
  let a: ScimTenant;
  let adminToken: string;
  let serial = 0;
  const users = "/v2/scim/v2/Users";
  const patch = (id: string, ...operations: unknown[]) =>
    scim(running, a.scimToken, "PATCH", `${users}/${id}`, { schemas: [PATCH_OP], Operations: operations });
  const get = (id: string, query = "") => scim(running, a.scimToken, "GET", `${users}/${id}${query}`);
  const create = async (
    extra: Record<string, unknown> = {},
    userName = `u${++serial}.${Date.now()}@compat.example`,
  ) => {
    const created = await scim(running, a.scimToken, "POST", users, newUser(userName, extra));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return created.body as Record<string, any>;
  };
  const ok = (answer: ScimAnswer) => {
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    return answer.body as Record<string, any>;
  };
  const profile = async (id: string, method = "GET", body?: unknown) => {
    const response = await fetch(`${running.baseUrl}/v2/users/${id}`, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined, text };
  };

  before(async () => {
    running = await startService();
    const tmcId = await newTmc(running.baseUrl, "IdP compat TMC");
    a = await newScimCompany(running.baseUrl, tmcId, "IdP compat company");
    const admin = await operatorCall<{ clientId: string; clientSecret: string }>(running.baseUrl, "CreateApiUser", {
      tmcId,
    });
    adminToken = await accessToken(running.baseUrl, admin.clientId, admin.clientSecret);
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  test('Entra\'s default mappings: displayName (path and path-less), name.formatted, emails[type eq "work"].value and title are stored and read back', async () => {
    const user = await create();
    assert.deepEqual(
      [user.displayName, user.name.formatted],
      ["Ada Lovelace", "Ada Lovelace"],
      "created without them: givenName familyName",
    );
    const newEmail = `moved.${serial}@compat.example`;
    ok(
      await patch(
        user.id,
        { op: "Replace", path: "displayName", value: "Ada L." },
        { op: "Replace", path: "name.formatted", value: "Augusta Ada King, Countess of Lovelace" },
        { op: "Replace", path: 'emails[type eq "work"].value', value: newEmail },
      ),
    );
    const shown = ok(await get(user.id));
    assert.deepEqual(
      [shown.displayName, shown.name.formatted, shown.emails, shown.userName],
      [
        "Ada L.",
        "Augusta Ada King, Countess of Lovelace",
        [{ value: newEmail, type: "work", primary: true }],
        user.userName,
      ],
      "GET afterwards shows what the PATCH wrote; the work email changed, the userName (the identity) did not",
    );
    ok(
      await patch(user.id, {
        op: "Replace",
        value: { displayName: "Ada K.", [`${USER_SCHEMA}:name.formatted`]: "A. K." },
      }),
    );
    const again = ok(await get(user.id));
    assert.deepEqual(
      [again.displayName, again.name.formatted],
      ["Ada K.", "A. K."],
      "path-less value object, plain and URN-qualified names",
    );
    const found = ok(
      await scim(running, a.scimToken, "GET", `${users}?filter=${encodeURIComponent('displayName eq "ada k."')}`),
    );
    assert.deepEqual(
      found.Resources.map((u: any) => u.id),
      [user.id],
      "/Schemas lists displayName, so it can be filtered on",
    );
    ok(await patch(user.id, { op: "Replace", path: "title", value: "Analyst" }));
    assert.equal(ok(await get(user.id)).title, "Analyst");
    assert.equal((await profile(user.id)).body.businessInfo.designation, "Analyst", "title is the profile's job title");
    ok(await patch(user.id, { op: "Remove", path: "displayName" }));
    assert.equal("displayName" in ok(await get(user.id)), false, "removed means removed, not re-derived");
  });

  test("emails: any number and type stored as sent, the userName stays the identity; the profile takes the primary one, then work, then first", async () => {
    const cases: Array<[string, unknown[], string]> = [
      // [userName, emails, the email the profile shows]
      ["one@compat.example", [{ type: "work", value: "two@compat.example", primary: true }], "two@compat.example"],
      [
        "three@compat.example",
        [
          { type: "home", value: "h@compat.example" },
          { type: "work", value: "w3@compat.example", primary: false },
        ],
        "w3@compat.example",
      ],
      [
        "four@compat.example",
        [
          { type: "home", value: "h4@compat.example", primary: false },
          { type: "work", value: "w4@compat.example" },
          { type: "other", value: "p4@compat.example", primary: true },
        ],
        "p4@compat.example",
      ],
      [
        "five@compat.example",
        [
          { type: "other", value: "o5@compat.example" },
          { type: "home", value: "h5@compat.example" },
        ],
        "o5@compat.example",
      ],
      // Not an address: kept as sent, never the profile's email.
      ["six@compat.example", [{ type: "work", value: "emailName357", primary: true }], "six@compat.example"],
    ];
    const ids: string[] = [];
    for (const [userName, emails, profileEmail] of cases) {
      const created = await create({ emails }, userName);
      ids.push(created.id);
      assert.equal(created.userName, userName);
      assert.deepEqual(created.emails, emails, `${userName}: emails as sent`);
      assert.deepEqual(ok(await get(created.id)).emails, emails);
      const shown = (await profile(created.id)).body;
      assert.equal(shown.businessInfo.email, userName, "the userName is the profile's business email (the identity)");
      assert.equal(shown.personalInfo.email, profileEmail, `${userName}: the profile's email`);
    }
    // Filters on emails.value match any email of the user, or its userName.
    const found = ok(
      await scim(running, a.scimToken, "GET", `${users}?filter=${encodeURIComponent('emails.value co "h4@"')}`),
    );
    assert.deepEqual(
      found.Resources.map((u: any) => u.id),
      [ids[2]],
    );
    // A second primary takes it from the first (RFC 7644 3.5.2); remove leaves no emails, and the profile the userName.
    const [first] = ids;
    const added = ok(
      await patch(first!, {
        op: "Add",
        path: "emails",
        value: [{ type: "home", value: "n@compat.example", primary: true }],
      }),
    );
    assert.deepEqual(added.emails, [
      { type: "work", value: "two@compat.example", primary: false },
      { type: "home", value: "n@compat.example", primary: true },
    ]);
    assert.equal((await profile(first!)).body.personalInfo.email, "n@compat.example");
    const removed = ok(await patch(first!, { op: "Remove", path: "emails" }));
    assert.equal("emails" in removed, false);
    assert.equal((await profile(first!)).body.personalInfo.email, "one@compat.example");
  });

  test("the enterprise extension: advertised, created, PATCHed in Entra's and Okta's forms, manager by id, shown by the profile API", async () => {
    const types = ok(await scim(running, a.scimToken, "GET", "/v2/scim/v2/ResourceTypes/User"));
    assert.deepEqual(types.schemaExtensions, [{ schema: ENTERPRISE, required: false }]);
    assert.equal(ok(await scim(running, a.scimToken, "GET", `/v2/scim/v2/Schemas/${ENTERPRISE}`)).id, ENTERPRISE);

    const boss = await create({ displayName: "The Boss" });
    const deputy = await create({ name: { givenName: "Dep", familyName: "Uty" } });
    const created = await create({
      schemas: [USER_SCHEMA, ENTERPRISE],
      [ENTERPRISE]: {
        employeeNumber: "701984",
        department: "Sales",
        costCenter: "CC-4",
        organization: "Contoso",
        division: "EMEA",
        manager: { value: boss.id },
      },
    });
    assert.deepEqual(created.schemas, [USER_SCHEMA, ENTERPRISE]);
    assert.deepEqual(created[ENTERPRISE], {
      employeeNumber: "701984",
      department: "Sales",
      costCenter: "CC-4",
      organization: "Contoso",
      division: "EMEA",
      manager: { value: boss.id, $ref: boss.meta.location, displayName: "The Boss" },
    });

    // Entra: one operation per attribute, the path the full URN-qualified name, the manager as a bare id.
    ok(
      await patch(
        created.id,
        { op: "Add", path: `${ENTERPRISE}:employeeNumber`, value: "701985" },
        { op: "Replace", path: `${ENTERPRISE}:department`, value: "Marketing" },
        { op: "Replace", path: `${ENTERPRISE}:manager`, value: deputy.id },
      ),
    );
    // Okta and others: path-less value objects, the extension as an object or its attributes URN-qualified; manager.value as a path.
    ok(
      await patch(created.id, {
        op: "replace",
        value: { [ENTERPRISE]: { costCenter: "CC-5" }, [`${ENTERPRISE}:division`]: "APAC" },
      }),
    );
    ok(await patch(created.id, { op: "replace", path: ENTERPRISE, value: { Organization: "Fabrikam" } }));
    const patched = ok(await get(created.id));
    assert.deepEqual(patched[ENTERPRISE], {
      employeeNumber: "701985",
      department: "Marketing",
      costCenter: "CC-5",
      organization: "Fabrikam",
      division: "APAC",
      manager: { value: deputy.id, $ref: deputy.meta.location, displayName: "Dep Uty" },
    });

    // A manager that is not a user of the company, or not an id at all, is refused; nothing is written.
    const stranger = (
      await scim(
        running,
        (await newScimCompany(running.baseUrl, a.tmcId, "Other company")).scimToken,
        "POST",
        users,
        newUser("stranger@compat.example"),
      )
    ).body.id;
    for (const value of [stranger, "123", { value: crypto.randomUUID() }, created.id]) {
      scimError(await patch(created.id, { op: "Replace", path: `${ENTERPRISE}:manager`, value }), 400, "invalidValue");
    }
    scimError(
      await patch(created.id, { op: "Replace", path: `${ENTERPRISE}:manager.displayName`, value: "x" }),
      400,
      "mutability",
    );
    assert.deepEqual(ok(await get(created.id)), patched);

    // The profile API shows the same values in its business fields.
    const shown = await profile(created.id);
    assert.equal(shown.status, 200, shown.text);
    const business = shown.body.businessInfo;
    assert.equal(business.employeeId, "701985");
    assert.equal(business.departmentRef.name, "Marketing");
    assert.match(business.departmentRef.id, UUID, "a name-based UUID: the profile's references carry ids");
    assert.equal(business.costCenterRef.name, "CC-5");
    assert.deepEqual(business.managerRef, { id: deputy.id, name: "Dep Uty" });
    assert.deepEqual(business.companySpecifiedAttributes.map((x: any) => [x.fixedColumnName, x.value]).sort(), [
      ["division", "APAC"],
      ["organization", "Fabrikam"],
    ]);

    // The profile API's document goes back through its own PUT (the references validate), and its
    // change of a business field is what SCIM reads next: one value, two views.
    const document = {
      personalInfo: shown.body.personalInfo,
      businessInfo: { ...business, employeeId: "E-9" },
      persona: "EMPLOYEE",
    };
    const put = await profile(created.id, "PUT", document);
    assert.equal(put.status, 200, put.text);
    assert.equal(ok(await get(created.id))[ENTERPRISE].employeeNumber, "E-9");

    // Removing: one attribute, then the whole extension.
    ok(await patch(created.id, { op: "Remove", path: `${ENTERPRISE}:manager` }));
    assert.equal("manager" in ok(await get(created.id))[ENTERPRISE], false);
    ok(await patch(created.id, { op: "remove", path: ENTERPRISE }));
    const cleared = ok(await get(created.id));
    assert.deepEqual([cleared.schemas, ENTERPRISE in cleared], [[USER_SCHEMA], false]);
    const clearedProfile = (await profile(created.id)).body.businessInfo;
    assert.deepEqual(
      [
        clearedProfile.employeeId || undefined,
        clearedProfile.departmentRef,
        clearedProfile.managerRef,
        clearedProfile.companySpecifiedAttributes ?? [],
      ],
      [undefined, undefined, undefined, []],
    );
  });

  test("a SCIM write that leaves the extension as it is does not rewrite businessInfo (what the profile API set and SCIM cannot show stays)", async () => {
    const user = await create();
    const shown = await profile(user.id);
    assert.equal(shown.status, 200, shown.text);
    const departmentRef = { id: crypto.randomUUID() };
    const put = await profile(user.id, "PUT", {
      personalInfo: shown.body.personalInfo,
      businessInfo: { ...shown.body.businessInfo, departmentRef, designation: "CTO" },
      persona: "EMPLOYEE",
    });
    assert.equal(put.status, 200, put.text);
    assert.equal(ENTERPRISE in ok(await get(user.id)), false, "a reference without a name is no department");
    ok(await patch(user.id, { op: "Replace", path: "displayName", value: "Unrelated" }));
    ok(await scim(running, a.scimToken, "PUT", `${users}/${user.id}`, newUser(user.userName, { [ENTERPRISE]: {} })));
    assert.deepEqual(
      [
        (await profile(user.id)).body.businessInfo.departmentRef,
        (await profile(user.id)).body.businessInfo.designation,
      ],
      [departmentRef, "CTO"],
    );
    ok(await patch(user.id, { op: "Add", path: `${ENTERPRISE}:department`, value: "Ops" }));
    const after = (await profile(user.id)).body.businessInfo;
    assert.equal(after.departmentRef.name, "Ops");
    assert.match(after.departmentRef.id, UUID);
    assert.equal(after.designation, "CTO");
  });

  test("a PUT without the extension keeps it (not asserted, RFC 7644 3.5.1); with it, it replaces it", async () => {
    const user = await create({ [ENTERPRISE]: { employeeNumber: "1", department: "Ops" } });
    const kept = ok(
      await scim(
        running,
        a.scimToken,
        "PUT",
        `${users}/${user.id}`,
        newUser(user.userName, { displayName: "Renamed" }),
      ),
    );
    assert.deepEqual([kept.displayName, kept[ENTERPRISE]], ["Renamed", { employeeNumber: "1", department: "Ops" }]);
    const replaced = ok(
      await scim(
        running,
        a.scimToken,
        "PUT",
        `${users}/${user.id}`,
        newUser(user.userName, { [ENTERPRISE]: { division: "D" } }),
      ),
    );
    assert.deepEqual(
      [replaced.displayName, replaced[ENTERPRISE]],
      ["Ada Lovelace", { division: "D" }],
      "a whole resource: displayName defaults again, the extension is what was sent",
    );
  });

  test("round trip over /Schemas: every readWrite attribute PATCHed is returned by GET, every readOnly one is refused (mutability)", async () => {
    const schemas = ok(await scim(running, a.scimToken, "GET", "/v2/scim/v2/Schemas"));
    const manager = await create();
    const user = await create();
    const checked: string[] = [];
    for (const schema of schemas.Resources) {
      const prefix = schema.id === USER_SCHEMA ? "" : `${schema.id}:`;
      for (const attribute of schema.attributes) {
        const leaves = attribute.subAttributes
          ? attribute.subAttributes.map((sub: any) => [attribute, sub])
          : [[attribute, undefined]];
        for (const [parent, sub] of leaves) {
          const path = `${prefix}${parent.name}${parent.multiValued ? '[type eq "work"]' : ""}${sub ? `.${sub.name}` : ""}`;
          const readOnly = parent.mutability === "readOnly" || sub?.mutability === "readOnly";
          if (readOnly) {
            scimError(await patch(user.id, { op: "replace", path, value: "x" }), 400, "mutability");
            checked.push(`${path}: readOnly`);
            continue;
          }
          const value = sampleValue(parent.name, sub?.name, (sub ?? parent).type, manager.id);
          if (parent.returned === "never") {
            // Accepted and ignored: the PATCH succeeds and GET shows nothing of it.
            assert.equal(parent.name in ok(await patch(user.id, { op: "Replace", path, value })), false, path);
            checked.push(`${path}: ignored`);
            continue;
          }
          ok(await patch(user.id, { op: "Replace", path, value }));
          const resource = ok(await get(user.id));
          const holder = schema.id === USER_SCHEMA ? resource : resource[schema.id];
          const at = parent.multiValued ? holder[parent.name][0] : holder[parent.name];
          assert.deepEqual(sub ? at[sub.name] : at, value, `${path}: GET returns what PATCH wrote`);
          checked.push(path);
        }
      }
    }
    assert.equal(checked.length, 48, checked.join(", "));
    // And nothing is shown that /Schemas does not list.
    const listed = new Set<string>(
      schemas.Resources.flatMap((s: any) =>
        s.attributes.flatMap((x: any) => [x.name, ...(x.subAttributes ?? []).map((y: any) => `${x.name}.${y.name}`)]),
      ),
    );
    const resource = ok(await get(user.id));
    for (const [key, value] of Object.entries(resource)) {
      if (key === "schemas" || key === "meta") continue;
      const objects = key === ENTERPRISE ? Object.entries(value as object) : [[key, value]];
      for (const [name, inner] of objects as Array<[string, unknown]>) {
        assert.ok(listed.has(name), `${name} is listed in /Schemas`);
        const item = Array.isArray(inner) ? inner[0] : inner;
        if (item && typeof item === "object")
          for (const sub of Object.keys(item))
            assert.ok(listed.has(`${name}.${sub}`), `${name}.${sub} is listed in /Schemas`);
      }
    }
  });

  test("paths /Schemas does not list are noTarget, malformed ones invalidPath, service-owned ones mutability; nothing is written", async () => {
    const user = await create();
    const before = ok(await get(user.id));
    const refusals: Array<[unknown, string]> = [
      [{ op: "Replace", path: "nickname2", value: "Ace" }, "noTarget"],
      [{ op: "Add", path: 'faxNumbers[type eq "work"].value', value: "+1 555" }, "noTarget"],
      [{ op: "Replace", path: "name.nickName", value: "M" }, "noTarget"],
      [{ op: "Replace", path: `${ENTERPRISE}:bogus`, value: "x" }, "noTarget"],
      [{ op: "Replace", path: "urn:ietf:params:scim:schemas:extension:other:2.0:User:x", value: "x" }, "noTarget"],
      [{ op: "Replace", value: { favouriteLanguage: "en-GB" } }, "noTarget"],
      [{ op: "Replace", path: "name..x", value: "x" }, "invalidPath"],
      [{ op: "Replace", path: 'displayName[value eq "x"]', value: "x" }, "invalidPath"],
      [{ op: "Replace", path: "id", value: "x" }, "mutability"],
      [{ op: "Replace", path: "meta.created", value: "x" }, "mutability"],
    ];
    for (const [operation, scimType] of refusals) {
      // With a valid operation first: the request is refused as a whole.
      scimError(
        await patch(user.id, { op: "Replace", path: "displayName", value: "changed" }, operation),
        400,
        scimType,
      );
    }
    assert.deepEqual(ok(await get(user.id)), before);
    // Echoed service-owned attributes in a path-less value are ignored (RFC 7644 3.3).
    ok(
      await patch(user.id, {
        op: "Replace",
        value: { id: user.id, meta: before.meta, schemas: before.schemas, displayName: "echo" },
      }),
    );
    assert.equal(ok(await get(user.id)).displayName, "echo");
  });

  test("externalId is unique in the company and /Schemas says so (uniqueness server → 409 uniqueness)", async () => {
    const schema = ok(await scim(running, a.scimToken, "GET", `/v2/scim/v2/Schemas/${USER_SCHEMA}`));
    assert.equal(schema.attributes.find((x: any) => x.name === "externalId").uniqueness, "server");
    await create({ externalId: "entra-object-1" });
    scimError(
      await scim(
        running,
        a.scimToken,
        "POST",
        users,
        newUser("second.claim@compat.example", { externalId: "entra-object-1" }),
      ),
      409,
      "uniqueness",
    );
  });

  test("attributes / excludedAttributes: sub-attributes and URN-qualified names select exactly; value filters are 400 invalidValue", async () => {
    const user = await create({ externalId: "proj-1", [ENTERPRISE]: { department: "R&D", employeeNumber: "7" } });
    const keys = (o: object) => Object.keys(o).sort();
    const given = ok(await get(user.id, "?attributes=name.givenName"));
    assert.deepEqual([keys(given), given.name], [["id", "name", "schemas"], { givenName: "Ada" }]);
    const emails = ok(await get(user.id, "?attributes=EMAILS.value,userName"));
    assert.deepEqual(
      [keys(emails), emails.emails],
      [["emails", "id", "schemas", "userName"], [{ value: user.userName }]],
    );
    const department = ok(await get(user.id, `?attributes=${encodeURIComponent(`${ENTERPRISE}:department`)}`));
    assert.deepEqual(
      [keys(department), department[ENTERPRISE], department.schemas],
      [[ENTERPRISE, "id", "schemas"].sort(), { department: "R&D" }, [USER_SCHEMA, ENTERPRISE]],
    );
    const whole = ok(await get(user.id, `?attributes=${encodeURIComponent(ENTERPRISE)}`));
    assert.deepEqual(whole[ENTERPRISE], { department: "R&D", employeeNumber: "7" });
    const without = ok(await get(user.id, `?excludedAttributes=name.formatted,${encodeURIComponent(ENTERPRISE)},meta`));
    assert.deepEqual(
      [without.name, ENTERPRISE in without, "meta" in without, without.schemas],
      [{ givenName: "Ada", familyName: "Lovelace" }, false, false, [USER_SCHEMA]],
    );
    const listed = ok(
      await scim(
        running,
        a.scimToken,
        "GET",
        `${users}?filter=${encodeURIComponent('externalId eq "proj-1"')}&attributes=name.familyName`,
      ),
    );
    assert.deepEqual(listed.Resources, [{ schemas: [USER_SCHEMA], id: user.id, name: { familyName: "Lovelace" } }]);
    for (const query of [
      `?attributes=${encodeURIComponent('emails[type eq "work"]')}`,
      `?excludedAttributes=${encodeURIComponent('emails[type eq "work"].value')}`,
    ]) {
      scimError(await get(user.id, query), 400, "invalidValue");
      scimError(await scim(running, a.scimToken, "GET", `${users}${query}`), 400, "invalidValue");
    }
  });
});

/** A value of the attribute's type that the service accepts (the work email is the userName; the manager is a user of the company). */
function sampleValue(attribute: string, sub: string | undefined, type: string, managerId: string): unknown {
  const name = sub ? `${attribute}.${sub}` : attribute;
  if (name === "userName" || name === "emails.value") return `renamed.${Date.now()}@compat.example`;
  // The path selects the value by [type eq "work"]: its type stays work.
  if (sub === "type") return "work";
  if (name === "manager.value") return managerId;
  if (type === "boolean") return name === "active" ? false : true;
  return `${name}-${Date.now()}`;
}
