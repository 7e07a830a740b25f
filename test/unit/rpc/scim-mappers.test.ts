// The RPC edge of SCIM: Struct bodies decoded into the domain's typed models.
import type { JsonObject } from "@bufbuild/protobuf";
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { patchOperationsOf, userDocumentOf } from "../../../src/rpc/mappers/scim-mappers.js";

const USER = "urn:ietf:params:scim:schemas:core:2.0:User";
const ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";
const PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const MANAGER = "0E1F2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B";

const code = (expected: string) => (e: unknown) => (e as { code?: string }).code === expected;

describe("SCIM User resource → ScimUserDocument", () => {
  test("names case-insensitive, unknown, ignored and read-only attributes dropped, Entra's forms decoded, null kept as cleared", () => {
    const document = userDocumentOf({
      schemas: [USER.toUpperCase()],
      UserName: " ada@example.com ",
      NAME: { GivenName: "Ada", familyname: "Lovelace", middleName: "dropped" },
      [`${USER}:displayName`]: "Ada",
      emails: [{ Value: "ada@example.com", TYPE: "Work", primary: "True" }],
      active: "False",
      title: null,
      phoneNumbers: [{ value: "+1 555" }],
      roles: [{ value: "ignored" }],
      favouriteColour: "unknown",
      id: "ignored",
      meta: { created: "ignored" },
      [ENTERPRISE.toLowerCase()]: { Manager: MANAGER, DEPARTMENT: "R&D" },
    } as JsonObject);
    assert.deepEqual(document, {
      schemas: [USER.toUpperCase()],
      userName: "ada@example.com",
      // Types are kept as sent.
      emails: [{ type: "Work", primary: true, value: "ada@example.com" }],
      name: { givenName: "Ada", familyName: "Lovelace", middleName: "dropped" },
      displayName: "Ada",
      active: false,
      [ENTERPRISE]: { manager: { value: MANAGER.toLowerCase() }, department: "R&D" },
      title: null,
      phoneNumbers: [{ value: "+1 555" }],
    });
  });

  test("each value is checked for its attribute's type, length and format", () => {
    const user = (extra: Record<string, unknown>) => ({ schemas: [USER], userName: "a@b.c", ...extra }) as JsonObject;
    assert.throws(() => userDocumentOf(undefined), code("API_VALIDATION_FAILED"));
    assert.throws(() => userDocumentOf({ userName: "a@b.c" }), code("API_VALIDATION_FAILED"));
    for (const bad of [
      { userName: 5 },
      { userName: "not an email" },
      { name: "Ada" },
      { name: { givenName: "x".repeat(257) } },
      { externalId: 7 },
      { active: "yes" },
      { emails: "a@b.c" },
      { emails: [{ value: 5 }] },
      { emails: [{ value: "a@b.c", primary: "maybe" }] },
      { phoneNumbers: [{ value: "x".repeat(257) }] },
      { addresses: Array.from({ length: 51 }, () => ({ country: "DE" })) },
      { [ENTERPRISE]: "R&D" },
      { [ENTERPRISE]: { manager: { value: "not-a-uuid" } } },
    ]) {
      assert.throws(() => userDocumentOf(user(bad)), code("INVALID_VALUE"), JSON.stringify(bad));
    }
  });
});

describe("SCIM PatchOp → PatchOperations", () => {
  const operations = (...ops: unknown[]) => patchOperationsOf({ schemas: [PATCH], Operations: ops } as JsonObject);

  test("paths resolved against the schema table, path-less values taken apart, values typed by their target", () => {
    assert.deepEqual(
      operations(
        { op: "Replace", path: "NAME.GIVENNAME", value: "Q" },
        { op: "add", value: { displayname: "D", id: "echoed", [ENTERPRISE]: { manager: MANAGER } } },
        { op: "replace", path: 'emails[type eq "work"].primary', value: "true" },
        { op: "remove", path: ENTERPRISE },
      ).map((o) => [
        o.op,
        `${o.target.attribute}${o.target.filter ?? ""}${o.target.sub ? `.${o.target.sub}` : ""}`,
        "value" in o ? o.value : "-",
      ]),
      [
        ["replace", "name.givenName", "Q"],
        ["add", "displayName", "D"],
        ["add", "manager", { value: MANAGER.toLowerCase() }],
        ["replace", 'emails[type eq "work"].primary', true],
        ...["employeeNumber", "costCenter", "organization", "division", "department", "manager"].map((a) => [
          "remove",
          a,
          "-",
        ]),
      ],
    );
  });

  test("refusals: envelope, target (noTarget, mutability, invalidPath), value type, always-held attributes", () => {
    const cases: Array<[unknown, string]> = [
      [{ Operations: [{ op: "add", path: "title", value: "T" }] }, "API_VALIDATION_FAILED"],
      [{ schemas: [PATCH], Operations: [] }, "API_VALIDATION_FAILED"],
      [{ schemas: [PATCH], Operations: [{ op: "move", path: "title" }] }, "API_VALIDATION_FAILED"],
      [{ schemas: [PATCH], Operations: [{ op: "add", path: "nickName2", value: "N" }] }, "NO_TARGET"],
      [{ schemas: [PATCH], Operations: [{ op: "replace", path: "id", value: "x" }] }, "MUTABILITY"],
      [
        { schemas: [PATCH], Operations: [{ op: "replace", path: `${ENTERPRISE}:manager.$ref`, value: "x" }] },
        "MUTABILITY",
      ],
      [{ schemas: [PATCH], Operations: [{ op: "replace", path: "title[value eq 1]", value: "x" }] }, "INVALID_PATH"],
      [{ schemas: [PATCH], Operations: [{ op: "replace", path: "displayName", value: 5 }] }, "INVALID_VALUE"],
      [{ schemas: [PATCH], Operations: [{ op: "replace", path: "name", value: "Ada" }] }, "INVALID_VALUE"],
      [{ schemas: [PATCH], Operations: [{ op: "remove", path: "active" }] }, "MUTABILITY"],
      [{ schemas: [PATCH], Operations: [{ op: "replace", path: "active", value: null }] }, "MUTABILITY"],
      [{ schemas: [PATCH], Operations: [{ op: "replace", path: "phoneNumbers.value", value: 5 }] }, "INVALID_VALUE"],
      // Every path is checked before any value.
      [
        {
          schemas: [PATCH],
          Operations: [
            { op: "replace", path: "displayName", value: 5 },
            { op: "replace", path: "nickName2", value: "N" },
          ],
        },
        "NO_TARGET",
      ],
    ];
    for (const [patch, expected] of cases)
      assert.throws(() => patchOperationsOf(patch as JsonObject), code(expected), JSON.stringify(patch));
  });
});
