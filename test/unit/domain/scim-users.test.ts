import type { JsonObject } from "@bufbuild/protobuf";
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseUserFilter } from "../../../src/domain/scim/filter.js";
import type { ScimCaller } from "../../../src/domain/scim/model.js";
import { applyPatch } from "../../../src/domain/scim/patch.js";
import { ScimUsers } from "../../../src/domain/scim/scim-users.js";
import { tenantScope } from "../../../src/domain/shared/tenant-scope.js";
import { DomainError } from "../../../src/errors/domain-error.js";
import { patchOperationsOf, userDocumentOf } from "../../../src/rpc/mappers/scim-mappers.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import { FakeClock } from "../../fakes/clock.js";
import { pgliteTestStore } from "../../fakes/pglite-store.js";

const USER = "urn:ietf:params:scim:schemas:core:2.0:User";
const PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const BASE = "http://auth.test/v2/scim/v2";

async function fixture() {
  const clock = new FakeClock();
  const store = await pgliteTestStore();
  const tx = store.uow.direct;
  const tmc = await store.repositories.tenants.createTmc(tx, "T", 5);
  const scope = tenantScope(tmc.id);
  const companyA = await store.repositories.tenants.createCompany(tx, scope, "A");
  const companyB = await store.repositories.tenants.createCompany(tx, scope, "B");
  const scim = new ScimUsers(
    { uow: store.uow, users: store.repositories.scimUsers, audit: store.repositories.audit },
    BASE,
  );
  const a: ScimCaller = { clientId: "scim-a", tmcId: tmc.id, companyId: companyA.id };
  const b: ScimCaller = { clientId: "scim-b", tmcId: tmc.id, companyId: companyB.id };
  return { clock, store, scim, a, b, tmcId: tmc.id };
}

// SCIM JSON is decoded into the domain's typed models at the RPC edge, as the ScimService handler does.
const user = (userName: string, extra: Record<string, unknown> = {}) =>
  userDocumentOf({
    schemas: [USER],
    userName,
    name: { givenName: "Ada", familyName: "Lovelace" },
    ...extra,
  } as JsonObject);
const operations = (patch: unknown) => patchOperationsOf(patch as JsonObject);

describe("SCIM filter translation (scim2-parse-filter → UserFilter)", () => {
  test("supported attributes and operators", () => {
    assert.deepEqual(parseUserFilter('userName eq "Ada@Example.com"'), {
      kind: "compare",
      attribute: "userName",
      op: "eq",
      value: "ada@example.com",
    });
    assert.deepEqual(parseUserFilter('urn:ietf:params:scim:schemas:core:2.0:User:USERNAME sw "A"'), {
      kind: "compare",
      attribute: "userName",
      op: "sw",
      value: "a",
    });
    assert.deepEqual(
      parseUserFilter('externalId eq "AbC"'),
      { kind: "compare", attribute: "externalId", op: "eq", value: "AbC" },
      "externalId is case-exact",
    );
    assert.deepEqual(parseUserFilter('emails[type eq "work"].value eq "X@Y.z"'), {
      kind: "and",
      filters: [
        { kind: "constant", value: true },
        { kind: "compare", attribute: "emails", op: "eq", value: "x@y.z" },
      ],
    });
    assert.deepEqual(parseUserFilter('emails[type eq "home"]'), { kind: "constant", value: false });
    assert.deepEqual(parseUserFilter('active eq "False"'), {
      kind: "compare",
      attribute: "active",
      op: "eq",
      value: false,
    });
    assert.deepEqual(parseUserFilter("not (userName pr)"), {
      kind: "not",
      filter: { kind: "present", attribute: "userName" },
    });
    assert.equal(parseUserFilter("  "), undefined);
    const date = parseUserFilter('meta.lastModified gt "2026-01-01T00:00:00Z"');
    assert.ok(date?.kind === "compare" && date.value instanceof Date);
  });

  test("string values are JSON strings: every escape is read, a value may end in a backslash (fuzz seed 368749186)", () => {
    const valueOf = (filter: string) => {
      const tree = parseUserFilter(filter);
      assert.ok(tree?.kind === "not" && tree.filter.kind === "not" && tree.filter.filter.kind === "compare", filter);
      return tree.filter.filter.value;
    };
    // Each value as JSON.stringify writes it (the fuzz test's generator), read back as it was.
    for (const value of ["\\", "a\\", "a\\b", '"', '\\"', "\n\t\r", "/", "DOMAIN\\user", "é😀"]) {
      assert.equal(valueOf(`not (not (externalId eq ${JSON.stringify(value)}))`), value, JSON.stringify(value));
    }
    // The escapes JSON.stringify does not write, and a backslash that starts no escape (kept, as before).
    assert.equal(valueOf('not (not (externalId eq "\\u00e9\\/x\\q"))'), "é/x\\q");
    assert.deepEqual(parseUserFilter('emails[type eq "w\\u006frk"] and userName eq "\\\\"'), {
      kind: "and",
      filters: [
        { kind: "constant", value: true },
        { kind: "compare", attribute: "userName", op: "eq", value: "\\" },
      ],
    });
    // Decoded, a value is held to the text rule: an escaped control character or lone surrogate is
    // refused as the character itself would be (Postgres cannot even compare with NUL).
    for (const value of ["\\u0000", "\\u0001", "\\u007f", "\\ud800", "\\udc00", "x\\ud83d"]) {
      assert.throws(
        () => parseUserFilter(`externalId eq "${value}"`),
        (e: unknown) => e instanceof DomainError && e.code === "INVALID_FILTER" && /control characters/.test(e.message),
        value,
      );
    }
  });

  test("anything else is INVALID_FILTER", async () => {
    for (const filter of [
      'userName eq "x',
      "userName eq",
      'title eq "x"',
      'userName gt "x"',
      "userName eq 1",
      'active eq "maybe"',
      'meta.created gt "yesterday"',
      'phoneNumbers[type eq "work"]',
      'emails[display eq "x"]',
      'emails[type co "w"]',
      "x".repeat(3000),
    ]) {
      assert.throws(
        () => parseUserFilter(filter),
        (e: unknown) => e instanceof DomainError && e.code === "INVALID_FILTER" && e.params[0]?.name === "filter",
        filter.slice(0, 40),
      );
    }
    await rejectsWith(
      async () => parseUserFilter(Array.from({ length: 51 }, (_, i) => `userName eq "u${i}"`).join(" or ")),
      {
        code: "INVALID_FILTER",
        message: "The filter has more than 50 terms",
        params: [{ name: "filter", value: "invalid" }],
      },
    );
  });
});

describe("SCIM PATCH (scim-patch, checked and wrapped)", () => {
  const resource = {
    schemas: [USER],
    id: "1",
    userName: "a@b.c",
    name: { givenName: "A", familyName: "B" },
    emails: [{ value: "a@b.c", type: "work", primary: true }],
    active: true,
    meta: { resourceType: "User", location: "http://auth.test/v2/scim/v2/Users/1" },
  };
  test("Entra ID's and Okta's forms", () => {
    assert.equal(
      applyPatch(
        resource,
        operations({ schemas: [PATCH], Operations: [{ op: "Replace", path: "active", value: "False" }] }),
      ).active,
      false,
      "decoded at the RPC edge",
    );
    assert.equal(
      applyPatch(resource, operations({ schemas: [PATCH], Operations: [{ op: "REPLACE", value: { active: false } }] }))
        .active,
      false,
    );
    assert.equal(
      (
        applyPatch(
          resource,
          operations({ schemas: [PATCH], Operations: [{ op: "replace", value: { "name.givenName": "Z" } }] }),
        ).name as { givenName: string }
      ).givenName,
      "Z",
    );
    assert.equal(
      (
        applyPatch(
          resource,
          operations({ schemas: [PATCH], Operations: [{ op: "replace", path: "NAME.GIVENNAME", value: "Q" }] }),
        ).name as { givenName: string }
      ).givenName,
      "Q",
    );
    const enterprise = applyPatch(
      resource,
      operations({
        schemas: [PATCH],
        Operations: [
          { op: "add", path: "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department", value: "X" },
        ],
      }),
    );
    assert.deepEqual(
      enterprise["urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],
      { department: "X" },
      "the enterprise extension is held",
    );
    assert.throws(
      () =>
        applyPatch(
          resource,
          operations({ schemas: [PATCH], Operations: [{ op: "add", path: "nickName2", value: "T" }] }),
        ),
      (e: unknown) => (e as { code?: string }).code === "NO_TARGET",
      "an attribute the schema lacks is refused, not dropped",
    );
  });

  test("refusals", async () => {
    const cases: Array<[unknown, string]> = [
      [{ Operations: [] }, "API_VALIDATION_FAILED"],
      [{ schemas: [PATCH], Operations: [] }, "API_VALIDATION_FAILED"],
      [{ schemas: [PATCH], Operations: [{ op: "move", path: "active" }] }, "API_VALIDATION_FAILED"],
      [{ schemas: [PATCH], Operations: [{ op: "remove" }] }, "NO_TARGET"],
      [{ schemas: [PATCH], Operations: [{ op: "remove", path: 'emails[type eq "home"].value' }] }, "NO_TARGET"],
      [{ schemas: [PATCH], Operations: [{ op: "replace", path: "a..b", value: 1 }] }, "INVALID_PATH"],
      [{ schemas: [PATCH], Operations: [{ op: "replace", path: "constructor.prototype", value: 1 }] }, "INVALID_PATH"],
      [{ schemas: [PATCH], Operations: [{ op: "replace", value: { "a.__proto__.x": 1 } }] }, "INVALID_VALUE"],
      [{ schemas: [PATCH], Operations: [{ op: "replace", path: "meta.created", value: "x" }] }, "MUTABILITY"],
      [{ schemas: [PATCH], Operations: [{ op: "add", path: "active" }] }, "INVALID_VALUE"],
    ];
    for (const [patch, code] of cases) {
      await assert.rejects(
        async () => applyPatch(resource, operations(patch)),
        (e: unknown) => (e as { code?: string }).code === code,
        JSON.stringify(patch),
      );
    }
    assert.equal(({} as Record<string, unknown>).x, undefined);
  });
});

describe("ScimUsers over the real repositories", () => {
  test("company isolation: B's user is NOT_FOUND to A, absent from A's lists, unchanged", async () => {
    const { scim, a, b } = await fixture();
    const created = await scim.create(b, user("bea@b.example"), "req-1");
    const id = created.resource.id as string;
    assert.equal(created.location, `${BASE}/Users/${id}`);
    for (const action of [
      () => scim.get(a, id),
      () => scim.replace(a, id, user("x@a.example"), "r"),
      () =>
        scim.patch(
          a,
          id,
          operations({ schemas: [PATCH], Operations: [{ op: "replace", path: "active", value: false }] }),
          "r",
        ),
      () => scim.delete(a, id, "r"),
    ]) {
      await rejectsWith(action, { code: "NOT_FOUND", message: "User not found", params: [{ name: "id", value: id }] });
    }
    const list = await scim.list(a, {
      filter: 'userName eq "bea@b.example"',
      startIndex: undefined,
      count: undefined,
      attributes: "",
      excludedAttributes: "",
    });
    assert.deepEqual([list.totalResults, list.Resources], [0, []]);
    assert.equal((await scim.get(b, id)).active, true);
  });

  test("uniqueness per company, DELETE hides the user and frees its userName, audit rows without personal data", async () => {
    const { scim, a, b, store, tmcId } = await fixture();
    // Distinctive values: "e1" alone also occurs in random UUIDs and request ids.
    const created = await scim.create(a, user("Ada@A.example", { externalId: "ext-ada-0001" }), "req-c");
    await rejectsWith(scim.create(a, user("ada@a.example"), "r"), {
      code: "ALREADY_EXISTS",
      message: "A user with this userName exists in the company",
    });
    await rejectsWith(scim.create(a, user("other@a.example", { externalId: "ext-ada-0001" }), "r"), {
      code: "ALREADY_EXISTS",
      message: "A user with this externalId exists in the company",
    });
    assert.ok(
      (await scim.create(b, user("ada@a.example", { externalId: "ext-ada-0001" }), "r")).resource.id,
      "another company may hold both",
    );
    const id = created.resource.id as string;
    const patched = await scim.patch(
      a,
      id,
      operations({ schemas: [PATCH], Operations: [{ op: "Replace", path: "active", value: "False" }] }),
      "req-p",
    );
    assert.equal(patched.active, false);
    await scim.delete(a, id, "req-d");
    await rejectsWith(scim.get(a, id), {
      code: "NOT_FOUND",
      message: "User not found",
      params: [{ name: "id", value: id }],
    });
    assert.ok((await scim.create(a, user("ada@a.example"), "r")).resource.id);
    const events = (await store.repositories.audit.list(store.uow.direct, tenantScope(tmcId), 50)).filter(
      (e) => e.actor === a.clientId,
    );
    assert.deepEqual(events.map((e) => e.action).reverse(), [
      "SCIM_USER_CREATE",
      "SCIM_USER_PATCH",
      "SCIM_USER_DELETE",
      "SCIM_USER_CREATE",
    ]);
    const text = JSON.stringify(events);
    assert.ok(text.includes(id));
    for (const personal of ["ada@", "Ada@", "ext-ada-0001", "Lovelace"])
      assert.equal(text.includes(personal), false, personal);
  });
});
