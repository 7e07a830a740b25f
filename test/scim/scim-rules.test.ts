import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { accessToken, callApi } from "../helpers/api.js";
import { backend } from "../helpers/backend.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";
import {
  ERROR_SCHEMA,
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

const q = (filter: string) => `/v2/scim/v2/Users?filter=${encodeURIComponent(filter)}`;

describe(`SCIM rules: discovery, company isolation, malformed input, uniqueness, paging, credentials, audit (${backend})`, () => {
  let running: RunningService;
  let a: ScimTenant;
  let b: ScimTenant;
  let bUserId: string;
  before(async () => {
    running = await startService();
    const tmcId = await newTmc(running.baseUrl, "SCIM rules TMC");
    // Two companies of the same TMC: isolation must hold inside one tenant too.
    [a, b] = await Promise.all([
      newScimCompany(running.baseUrl, tmcId, "Company A"),
      newScimCompany(running.baseUrl, tmcId, "Company B"),
    ]);
    const created = await scim(
      running,
      b.scimToken,
      "POST",
      "/v2/scim/v2/Users",
      newUser("bea@b.example", { externalId: "b-1" }),
    );
    assert.equal(created.status, 201);
    bUserId = created.body.id;
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  test("discovery: ServiceProviderConfig, ResourceTypes, Schemas on both base URLs", async () => {
    for (const base of ["/v2/scim/v2", "/v2/scim"]) {
      const config = await scim(running, a.scimToken, "GET", `${base}/ServiceProviderConfig`);
      assert.equal(config.status, 200);
      assert.match(config.contentType, /^application\/scim\+json/);
      assert.deepEqual(config.body.schemas, ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"]);
      assert.deepEqual(
        [
          config.body.patch,
          config.body.bulk.supported,
          config.body.filter,
          config.body.sort,
          config.body.etag,
          config.body.changePassword,
        ],
        [
          { supported: true },
          false,
          { supported: true, maxResults: 200 },
          { supported: false },
          { supported: false },
          { supported: false },
        ],
      );
      assert.equal(config.body.authenticationSchemes[0].type, "oauthbearertoken");

      const types = await scim(running, a.scimToken, "GET", `${base}/ResourceTypes`);
      assert.deepEqual(
        [
          types.body.schemas,
          types.body.totalResults,
          types.body.Resources[0].id,
          types.body.Resources[0].endpoint,
          types.body.Resources[0].schema,
        ],
        [[LIST_RESPONSE], 1, "User", "/Users", USER_SCHEMA],
      );
      assert.equal((await scim(running, a.scimToken, "GET", `${base}/ResourceTypes/User`)).body.name, "User");
      scimError(await scim(running, a.scimToken, "GET", `${base}/ResourceTypes/Group`), 404);

      const schemas = await scim(running, a.scimToken, "GET", `${base}/Schemas`);
      assert.equal(schemas.body.totalResults, 2);
      const user = schemas.body.Resources[0];
      assert.equal(schemas.body.Resources[1].id, "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User");
      assert.equal(user.id, USER_SCHEMA);
      assert.deepEqual(
        user.attributes.map((x: any) => x.name),
        [
          "id",
          "userName",
          "externalId",
          "name",
          "displayName",
          "title",
          "emails",
          "phoneNumbers",
          "addresses",
          "preferredLanguage",
          "nickName",
          "profileUrl",
          "userType",
          "locale",
          "timezone",
          "active",
          "password",
          "ims",
          "photos",
          "entitlements",
          "roles",
          "x509Certificates",
        ],
        "exactly the supported attributes (stored, or accepted and ignored)",
      );
      const one = await scim(running, a.scimToken, "GET", `${base}/Schemas/${encodeURIComponent(USER_SCHEMA)}`);
      assert.deepEqual(one.body, user);
      scimError(
        await scim(running, a.scimToken, "GET", `${base}/Schemas/urn:ietf:params:scim:schemas:core:2.0:Group`),
        404,
      );
    }
  });

  test("company isolation: A's token never sees or changes B's users (get, filter, paging, replace, patch, delete)", async () => {
    const before = await scim(running, b.scimToken, "GET", `/v2/scim/v2/Users/${bUserId}`);
    const unknown = "00000000-0000-4000-8000-000000000000";
    const getB = scimError(await scim(running, a.scimToken, "GET", `/v2/scim/v2/Users/${bUserId}`), 404);
    const getUnknown = scimError(await scim(running, a.scimToken, "GET", `/v2/scim/v2/Users/${unknown}`), 404);
    assert.equal(getB.detail, getUnknown.detail, "another company's user looks exactly like an unknown one");
    for (const filter of [
      'userName eq "bea@b.example"',
      'externalId eq "b-1"',
      'userName sw "bea"',
      'userName co "b.example"',
      `id eq "${bUserId}"`,
      "userName pr",
    ]) {
      const list = await scim(running, a.scimToken, "GET", q(filter));
      assert.equal(list.status, 200, filter);
      assert.equal(
        list.body.Resources.some((u: any) => u.id === bUserId),
        false,
        filter,
      );
      if (filter !== "userName pr") assert.equal(list.body.totalResults, 0, filter);
    }
    for (let start = 1; start <= 401; start += 200) {
      const page = await scim(running, a.scimToken, "GET", `/v2/scim/v2/Users?startIndex=${start}&count=200`);
      assert.equal(
        page.body.Resources.some((u: any) => u.id === bUserId),
        false,
      );
    }
    scimError(await scim(running, a.scimToken, "PUT", `/v2/scim/v2/Users/${bUserId}`, newUser("taken@a.example")), 404);
    scimError(
      await scim(running, a.scimToken, "PATCH", `/v2/scim/v2/Users/${bUserId}`, {
        schemas: [PATCH_OP],
        Operations: [{ op: "replace", path: "active", value: false }],
      }),
      404,
    );
    scimError(await scim(running, a.scimToken, "DELETE", `/v2/scim/v2/Users/${bUserId}`), 404);
    const afterwards = await scim(running, b.scimToken, "GET", `/v2/scim/v2/Users/${bUserId}`);
    assert.deepEqual(afterwards.body, before.body, "B's user unchanged");
    // The same userName may exist in both companies (uniqueness is per company).
    const same = await scim(
      running,
      a.scimToken,
      "POST",
      "/v2/scim/v2/Users",
      newUser("bea@b.example", { externalId: "b-1" }),
    );
    assert.equal(same.status, 201, JSON.stringify(same.body));
    assert.notEqual(same.body.id, bUserId);
  });

  test("malformed bodies, filters and PATCH paths are SCIM 400s with a scimType, never 500", async () => {
    const created = await scim(
      running,
      a.scimToken,
      "POST",
      "/v2/scim/v2/Users",
      newUser("malformed.target@a.example"),
    );
    const id = created.body.id as string;
    const patch = (operations: unknown) =>
      scim(running, a.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, { schemas: [PATCH_OP], Operations: operations });
    const cases: Array<[string, () => Promise<any>, string]> = [
      ["POST not JSON", () => scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", "{not json"), "invalidSyntax"],
      ["POST a JSON array", () => scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", "[]"), "invalidSyntax"],
      [
        "POST without schemas",
        () => scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", { userName: "x@a.example" }),
        "invalidSyntax",
      ],
      [
        "POST without userName",
        () => scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", { schemas: [USER_SCHEMA] }),
        "invalidValue",
      ],
      [
        "POST userName not an email",
        () => scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", newUser("not an email")),
        "invalidValue",
      ],
      [
        "POST userName a number",
        () => scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", newUser(42 as unknown as string)),
        "invalidValue",
      ],
      [
        "POST active not a boolean",
        () => scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", newUser("x@a.example", { active: "maybe" })),
        "invalidValue",
      ],
      [
        "POST name a string",
        () => scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", newUser("x@a.example", { name: "Ada" })),
        "invalidValue",
      ],
      [
        "POST externalId an object",
        () => scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", newUser("x@a.example", { externalId: { a: 1 } })),
        "invalidValue",
      ],
      [
        "PUT without userName",
        () => scim(running, a.scimToken, "PUT", `/v2/scim/v2/Users/${id}`, { schemas: [USER_SCHEMA] }),
        "invalidValue",
      ],
      ["filter unterminated", () => scim(running, a.scimToken, "GET", q('userName eq "x')), "invalidFilter"],
      ["filter without value", () => scim(running, a.scimToken, "GET", q("userName eq")), "invalidFilter"],
      ["filter unknown attribute", () => scim(running, a.scimToken, "GET", q('title eq "x"')), "invalidFilter"],
      ["filter unsupported operator", () => scim(running, a.scimToken, "GET", q('userName gt "x"')), "invalidFilter"],
      ["filter wrong type", () => scim(running, a.scimToken, "GET", q("userName eq 42")), "invalidFilter"],
      [
        "filter boolean not a boolean",
        () => scim(running, a.scimToken, "GET", q('active eq "perhaps"')),
        "invalidFilter",
      ],
      [
        "filter SQL",
        () => scim(running, a.scimToken, "GET", q('userName eq "x"; drop table users; --')),
        "invalidFilter",
      ],
      [
        "filter too long",
        () =>
          scim(
            running,
            a.scimToken,
            "GET",
            q(Array.from({ length: 60 }, (_, i) => `userName eq "u${i}@a.example"`).join(" or ")),
          ),
        "invalidFilter",
      ],
      ["count not a number", () => scim(running, a.scimToken, "GET", "/v2/scim/v2/Users?count=many"), "invalidSyntax"],
      [
        "PATCH without schemas",
        () =>
          scim(running, a.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, {
            Operations: [{ op: "replace", path: "active", value: false }],
          }),
        "invalidSyntax",
      ],
      [
        "PATCH without Operations",
        () => scim(running, a.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, { schemas: [PATCH_OP] }),
        "invalidSyntax",
      ],
      ["PATCH unknown op", () => patch([{ op: "merge", path: "active", value: false }]), "invalidSyntax"],
      ["PATCH operation not an object", () => patch(["replace"]), "invalidSyntax"],
      ["PATCH malformed path", () => patch([{ op: "replace", path: "name..givenName", value: "x" }]), "invalidPath"],
      [
        "PATCH malformed value filter",
        () => patch([{ op: "replace", path: "emails[type eq ].value", value: "x" }]),
        "invalidPath",
      ],
      ["PATCH path not a string", () => patch([{ op: "replace", path: 7, value: "x" }]), "invalidPath"],
      [
        "PATCH path into the prototype",
        () => patch([{ op: "replace", path: "__proto__.polluted", value: "x" }]),
        "invalidPath",
      ],
      [
        "PATCH value into the prototype",
        () => patch([{ op: "replace", value: { "__proto__.polluted": "x" } }]),
        "invalidValue",
      ],
      ["PATCH remove without a path", () => patch([{ op: "remove" }]), "noTarget"],
      ["PATCH replace without a value", () => patch([{ op: "replace", path: "active" }]), "invalidValue"],
      ["PATCH path-less value not an object", () => patch([{ op: "replace", value: "x" }]), "invalidValue"],
      [
        "PATCH active to a non-boolean",
        () => patch([{ op: "replace", path: "active", value: "Nope" }]),
        "invalidValue",
      ],
      ["PATCH userName removed", () => patch([{ op: "remove", path: "userName" }]), "invalidValue"],
      [
        "PATCH id",
        () => patch([{ op: "replace", path: "id", value: "00000000-0000-4000-8000-000000000000" }]),
        "mutability",
      ],
      [
        "PATCH remove through a filter that matches nothing",
        () => patch([{ op: "remove", path: 'emails[type eq "home"].value' }]),
        "noTarget",
      ],
      [
        "PATCH givenName to an object",
        () => patch([{ op: "replace", path: "name.givenName", value: { x: 1 } }]),
        "invalidValue",
      ],
      ["PATCH userName to an object", () => patch([{ op: "add", path: "userName", value: { x: 1 } }]), "invalidValue"],
    ];
    for (const [name, call, scimType] of cases) {
      const answer = await call();
      try {
        scimError(answer, 400, scimType);
      } catch (error) {
        assert.fail(`${name}: ${(error as Error).message}`);
      }
    }
    assert.equal(({} as Record<string, unknown>).polluted, undefined, "no prototype pollution");
    const unchanged = await scim(running, a.scimToken, "GET", `/v2/scim/v2/Users/${id}`);
    assert.deepEqual(
      [unchanged.body.userName, unchanged.body.active, unchanged.body.meta.lastModified],
      ["malformed.target@a.example", true, created.body.meta.lastModified],
      "no refused request changed the user",
    );
    scimError(await scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", newUser("x@a.example"), "text/plain"), 415);
    const notFoundId = scimError(await scim(running, a.scimToken, "GET", "/v2/scim/v2/Users/not-a-uuid"), 404);
    assert.equal(notFoundId.scimType, undefined);
  });

  test("concurrent creates of one userName: exactly one 201, the rest 409 uniqueness", async () => {
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        scim(
          running,
          a.scimToken,
          "POST",
          "/v2/scim/v2/Users",
          newUser(i % 2 ? "Race@A.example" : "race@a.example", { externalId: `race-${i}` }),
        ),
      ),
    );
    assert.deepEqual(answers.map((x) => x.status).sort(), [201, ...Array(11).fill(409)]);
    for (const conflict of answers.filter((x) => x.status === 409)) scimError(conflict, 409, "uniqueness");
    const list = await scim(running, a.scimToken, "GET", q('userName eq "RACE@a.example"'));
    assert.equal(list.body.totalResults, 1);
    // externalId is unique in the company too; a PUT onto a taken userName is a 409 as well.
    scimError(
      await scim(
        running,
        a.scimToken,
        "POST",
        "/v2/scim/v2/Users",
        newUser("other.race@a.example", { externalId: list.body.Resources[0].externalId }),
      ),
      409,
      "uniqueness",
    );
    const other = await scim(running, a.scimToken, "POST", "/v2/scim/v2/Users", newUser("other.race@a.example"));
    scimError(
      await scim(running, a.scimToken, "PUT", `/v2/scim/v2/Users/${other.body.id}`, newUser("RACE@a.example")),
      409,
      "uniqueness",
    );
  });

  test("paging: startIndex/count, totals, the cap of 200, count=0 and out-of-range pages", async () => {
    const tmcId = await newTmc(running.baseUrl, "Paging TMC");
    const c = await newScimCompany(running.baseUrl, tmcId, "Paging company");
    const ids: string[] = [];
    for (let batch = 0; batch < 5; batch++) {
      const created = await Promise.all(
        Array.from({ length: 45 }, (_, i) =>
          scim(
            running,
            c.scimToken,
            "POST",
            "/v2/scim/v2/Users",
            newUser(`p${String(batch * 45 + i).padStart(3, "0")}@paging.example`),
          ),
        ),
      );
      for (const x of created) {
        assert.equal(x.status, 201, JSON.stringify(x.body));
        ids.push(x.body.id);
      }
    }
    const all = await scim(running, c.scimToken, "GET", "/v2/scim/v2/Users?count=1000");
    assert.deepEqual(
      [all.body.totalResults, all.body.itemsPerPage, all.body.startIndex, all.body.Resources.length],
      [225, 200, 1, 200],
      "count capped at 200",
    );
    const byDefault = await scim(running, c.scimToken, "GET", "/v2/scim/v2/Users");
    assert.deepEqual([byDefault.body.itemsPerPage, byDefault.body.totalResults], [100, 225], "100 by default");
    const seen: string[] = [];
    for (let start = 1; start <= 225; start += 50) {
      const page = await scim(running, c.scimToken, "GET", `/v2/scim/Users?startIndex=${start}&count=50`);
      assert.equal(page.body.startIndex, start);
      assert.equal(page.body.totalResults, 225);
      seen.push(...page.body.Resources.map((u: any) => u.id));
    }
    assert.equal(seen.length, 225);
    assert.deepEqual([...seen].sort(), [...ids].sort(), "every user exactly once over the pages");
    const last = await scim(running, c.scimToken, "GET", "/v2/scim/v2/Users?startIndex=221&count=50");
    assert.equal(last.body.itemsPerPage, 5);
    const beyond = await scim(running, c.scimToken, "GET", "/v2/scim/v2/Users?startIndex=1000&count=10");
    assert.deepEqual([beyond.body.totalResults, beyond.body.itemsPerPage, beyond.body.Resources], [225, 0, []]);
    const zero = await scim(running, c.scimToken, "GET", "/v2/scim/v2/Users?count=0");
    assert.deepEqual([zero.body.totalResults, zero.body.itemsPerPage], [225, 0]);
    const negative = await scim(running, c.scimToken, "GET", "/v2/scim/v2/Users?startIndex=-5&count=-1");
    assert.deepEqual([negative.body.startIndex, negative.body.itemsPerPage], [1, 0]);
    const filtered = await scim(running, c.scimToken, "GET", `${q('userName sw "p1"')}&startIndex=11&count=20`);
    assert.deepEqual([filtered.body.totalResults, filtered.body.itemsPerPage], [100, 20]);
    const combined = await scim(
      running,
      c.scimToken,
      "GET",
      q('userName sw "p00" or (userName ew "9@paging.example" and not (userName co "p1"))'),
    );
    // The same expression evaluated here over the names created.
    const names = Array.from({ length: 225 }, (_, i) => `p${String(i).padStart(3, "0")}@paging.example`);
    const expected = names.filter((n) => n.startsWith("p00") || (n.endsWith("9@paging.example") && !n.includes("p1")));
    assert.equal(combined.body.totalResults, expected.length);
    const projected = await scim(running, c.scimToken, "GET", "/v2/scim/v2/Users?count=1&attributes=userName");
    assert.deepEqual(Object.keys(projected.body.Resources[0]).sort(), ["id", "schemas", "userName"]);
    const excluded = await scim(
      running,
      c.scimToken,
      "GET",
      "/v2/scim/v2/Users?count=1&excludedAttributes=emails,meta",
    );
    assert.equal("emails" in excluded.body.Resources[0] || "meta" in excluded.body.Resources[0], false);
  });

  test("credentials: no token, a client-credentials token and a TMC admin's token are refused on SCIM; a SCIM token is refused elsewhere", async () => {
    scimError(await scim(running, undefined, "GET", "/v2/scim/v2/Users"), 401);
    const admin = await operatorCall<{ clientId: string; clientSecret: string }>(running.baseUrl, "CreateApiUser", {
      tmcId: a.tmcId,
    });
    const adminToken = await accessToken(running.baseUrl, admin.clientId, admin.clientSecret);
    const companyAdmin = await operatorCall<{ clientId: string; clientSecret: string }>(
      running.baseUrl,
      "CreateApiUser",
      { tmcId: a.tmcId, orgId: a.orgId, role: "COMPANY_ADMIN" },
    );
    const companyToken = await accessToken(running.baseUrl, companyAdmin.clientId, companyAdmin.clientSecret);
    for (const token of [adminToken, companyToken, "garbage", Buffer.from("{}").toString("base64")]) {
      for (const [method, path] of [
        ["GET", "/v2/scim/v2/Users"],
        ["GET", "/v2/scim/ServiceProviderConfig"],
        ["DELETE", `/v2/scim/v2/Users/${bUserId}`],
      ] as const) {
        scimError(await scim(running, token, method, path), 401);
      }
    }
    // A SCIM token anywhere else.
    assert.equal((await callApi(running.baseUrl, "/v2/api-users", a.scimToken)).status, 401);
    assert.equal((await callApi(running.baseUrl, `/v2/users/${bUserId}`, a.scimToken)).status, 401);
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users", adminToken)).status,
      200,
      "the admin token itself works where it belongs",
    );
  });

  test("a rotated or revoked SCIM API user's token is refused at once", async () => {
    const tmcId = a.tmcId;
    const c = await newScimCompany(running.baseUrl, tmcId, "Rotating company");
    assert.equal((await scim(running, c.scimToken, "GET", "/v2/scim/v2/Users")).status, 200);
    const admin = await operatorCall<{ clientId: string; clientSecret: string }>(running.baseUrl, "CreateApiUser", {
      tmcId,
    });
    const adminToken = await accessToken(running.baseUrl, admin.clientId, admin.clientSecret);
    const rotated = await callApi(running.baseUrl, "/v2/api-users/rotate", adminToken, { clientId: c.clientId });
    assert.equal(rotated.status, 200);
    const { scimToken } = (await rotated.json()) as { scimToken: string };
    scimError(await scim(running, c.scimToken, "GET", "/v2/scim/v2/Users"), 401);
    assert.equal((await scim(running, scimToken, "GET", "/v2/scim/v2/Users")).status, 200, "the new token works");
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users/revoke", adminToken, { clientId: c.clientId })).status,
      204,
    );
    scimError(await scim(running, scimToken, "GET", "/v2/scim/v2/Users"), 401);
    scimError(await scim(running, scimToken, "POST", "/v2/scim/v2/Users", newUser("after.revoke@a.example")), 401);
  });

  test("every SCIM write is audited: actor, TMC, target user id, attribute names, no personal data", async () => {
    const tmcId = await newTmc(running.baseUrl, "Audit TMC");
    const c = await newScimCompany(running.baseUrl, tmcId, "Audit company");
    const created = await scim(
      running,
      c.scimToken,
      "POST",
      "/v2/scim/v2/Users",
      newUser("audited.person@secret.example", { externalId: "ext-secret" }),
    );
    const id = created.body.id as string;
    await scim(
      running,
      c.scimToken,
      "PUT",
      `/v2/scim/v2/Users/${id}`,
      newUser("audited.person@secret.example", { name: { givenName: "Secretname", familyName: "Lovelace" } }),
    );
    await scim(running, c.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: "Replace", path: "active", value: "False" }],
    });
    await scim(running, c.scimToken, "DELETE", `/v2/scim/v2/Users/${id}`);
    // Refused writes change nothing and are not recorded as changes.
    await scim(running, c.scimToken, "PATCH", `/v2/scim/v2/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: "Replace", path: "active", value: true }],
    });
    const { events } = await operatorCall<{ events: Array<Record<string, any>> }>(running.baseUrl, "ListAuditEvents", {
      tmcId,
      limit: 50,
    });
    const scimEvents = events.filter((e) => String(e.action).startsWith("SCIM_")).reverse();
    assert.deepEqual(
      scimEvents.map((e) => [e.action, e.outcome, e.actor, e.tmcId]),
      [
        ["SCIM_USER_CREATE", "SUCCESS", c.clientId, tmcId],
        ["SCIM_USER_REPLACE", "SUCCESS", c.clientId, tmcId],
        ["SCIM_USER_PATCH", "SUCCESS", c.clientId, tmcId],
        ["SCIM_USER_DELETE", "SUCCESS", c.clientId, tmcId],
      ],
    );
    const text = JSON.stringify(scimEvents);
    for (const e of scimEvents)
      assert.ok(text.includes(id) && JSON.stringify(e).includes(id), `${e.action} names the target user`);
    assert.ok(JSON.stringify(scimEvents[1]).includes("givenName"), "the replace names the attribute it changed");
    for (const personal of ["audited.person", "secret.example", "Secretname", "ext-secret", "Lovelace"])
      assert.equal(text.includes(personal), false, `no personal data: ${personal}`);
    assert.ok(events.every((e) => !JSON.stringify(e).includes(c.scimToken)));
  });

  test("errors keep the platform's ErrorResponse fields next to the SCIM ones", async () => {
    const answer = await scim(running, a.scimToken, "GET", q("bogus"));
    const body = scimError(answer, 400, "invalidFilter");
    assert.deepEqual(body.schemas, [ERROR_SCHEMA]);
    assert.equal(body.errorMessages[0].errorCode, "INVALID_FILTER");
    assert.equal(typeof body.debugIdentifier, "string");
  });
});
