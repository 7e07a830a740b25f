import assert from "node:assert/strict";
import crypto from "node:crypto";
import { beforeEach, describe, test } from "node:test";
import { tenantScope } from "../../../src/domain/shared/tenant-scope.js";
import { TenantService } from "../../../src/domain/tenants/tenant-service.js";
import type { ProfileCaller } from "../../../src/domain/users/model.js";
import { changedPaths, UserProfiles } from "../../../src/domain/users/user-profiles.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import { pgliteTestStore, type PgliteTestStore } from "../../fakes/pglite-store.js";

const notFound = (userId: string) =>
  ({ code: "NOT_FOUND", message: "User not found", params: [{ name: "userId", value: userId }] }) as const;
const REFUSED = "The update changes fields that cannot be changed through this operation";

describe("UserProfiles", () => {
  let store: PgliteTestStore;
  /** The stored user row, as the database has it. */
  const userRow = (id: string) =>
    store
      .db("users")
      .where({ id })
      .first<{ given_name: string; family_name: string; email: string; profile: unknown } | undefined>();
  const auditEventCount = async () => Number((await store.db("audit_events").count({ n: "*" }).first())!.n);
  let profiles: UserProfiles;
  let tmcId: string;
  let orgId: string;
  let otherOrgId: string;
  let userId: string;
  let inactiveId: string;
  let tmcAdmin: ProfileCaller;
  let companyAdmin: ProfileCaller;

  beforeEach(async () => {
    store = await pgliteTestStore();
    const tenants = new TenantService({ uow: store.uow, tenants: store.repositories.tenants });
    profiles = new UserProfiles({ uow: store.uow, users: store.repositories.users, audit: store.repositories.audit });
    tmcId = (await tenants.createTmc("Globetrotter")).id;
    orgId = (await tenants.createCompany(tmcId, "Acme")).id;
    otherOrgId = (await tenants.createCompany(tmcId, "Other")).id;
    userId = (
      await tenants.createUser({
        orgId,
        email: "Ada@Acme.example",
        givenName: "Ada",
        familyName: "Lovelace",
        isActive: true,
      })
    ).id;
    inactiveId = (
      await tenants.createUser({
        orgId,
        email: "grace@acme.example",
        givenName: "Grace",
        familyName: "Hopper",
        isActive: false,
      })
    ).id;
    tmcAdmin = { clientId: "tmc-admin", tmcId, orgId: undefined, role: "TMC_ADMIN" };
    companyAdmin = { clientId: "company-admin", tmcId, orgId, role: "COMPANY_ADMIN" };
  });

  const update = (document: Record<string, unknown>) => ({
    persona: "EMPLOYEE",
    businessInfo: { organizationRef: { id: orgId }, legalEntityRef: { id: orgId } },
    ...document,
  });

  test("get: the columns merged over the stored profile; the company is the legal entity until one is stored; persona always present", async () => {
    assert.deepEqual(await profiles.get(tmcAdmin, userId, false), {
      persona: "UNKNOWN_PERSONA",
      id: userId,
      personalInfo: { email: "Ada@Acme.example", name: { given: "Ada", family1: "Lovelace" } },
      businessInfo: {
        email: "Ada@Acme.example",
        organizationRef: { id: orgId, name: "Acme" },
        legalEntityRef: { id: orgId, name: "Acme" },
      },
      isActive: true,
      contractingTmcRef: { id: tmcId, name: "Globetrotter" },
    });
    assert.equal((await profiles.get(companyAdmin, userId, false)).id, userId);
  });

  test("get: another company's admin, another TMC's admin, an unknown id and an inactive user are NOT_FOUND alike", async () => {
    await rejectsWith(profiles.get({ ...companyAdmin, orgId: otherOrgId }, userId, true), notFound(userId));
    await rejectsWith(profiles.get({ ...tmcAdmin, tmcId: crypto.randomUUID() }, userId, true), notFound(userId));
    await rejectsWith(profiles.get({ ...companyAdmin, orgId: undefined }, userId, true), notFound(userId));
    const unknown = crypto.randomUUID();
    await rejectsWith(profiles.get(tmcAdmin, unknown, true), notFound(unknown));
    await rejectsWith(profiles.get(tmcAdmin, inactiveId, false), notFound(inactiveId));
    assert.equal((await profiles.get(tmcAdmin, inactiveId, true)).isActive, false);
  });

  test("update: names to the columns, the rest to the profile without identity fields, one audit event naming the changed fields", async () => {
    await profiles.update(
      companyAdmin,
      userId,
      update({
        personalInfo: { name: { given: "Augusta", family1: "King", middle: "Ada" } },
        businessInfo: {
          organizationRef: { id: orgId, name: "Acme" },
          legalEntityRef: { id: orgId },
          email: "ada@acme.example",
          designation: "Analyst",
        },
      }),
      "req-1",
    );
    const row = (await userRow(userId))!;
    assert.deepEqual([row.given_name, row.family_name, row.email], ["Augusta", "King", "Ada@Acme.example"]);
    assert.deepEqual(row.profile, {
      persona: "EMPLOYEE",
      personalInfo: { name: { middle: "Ada" } },
      businessInfo: { legalEntityRef: { id: orgId }, designation: "Analyst" },
    });
    const [event] = await store.repositories.audit.list(store.uow.direct, tenantScope(tmcId), 10);
    assert.deepEqual(
      { ...event, occurredAt: undefined },
      {
        occurredAt: undefined,
        action: "USER_UPDATED",
        outcome: "SUCCESS",
        actor: "company-admin",
        tmcId,
        targetClientId: userId,
        debugIdentifier: "req-1",
        details: {
          targetKind: "USER",
          changedFields: "businessInfo.designation,businessInfo.legalEntityRef,persona,personalInfo.name",
        },
      },
    );
  });

  test("update: identity changes are refused, each named, with nothing written", async () => {
    const before = await userRow(userId);
    await rejectsWith(
      profiles.update(
        tmcAdmin,
        userId,
        update({
          externalId: "idp-1",
          businessInfo: {
            organizationRef: { id: otherOrgId, name: "Other" },
            legalEntityRef: { id: orgId },
            email: "eve@acme.example",
          },
          isActive: false,
        }),
        "req-2",
      ),
      {
        code: "API_VALIDATION_FAILED",
        message: REFUSED,
        params: [
          {
            name: "businessInfo.organizationRef.id",
            value: "must be the user's company: a user cannot be moved to another company",
          },
          {
            name: "businessInfo.organizationRef.name",
            value: "must be the company's name: a company is not renamed through a user",
          },
          { name: "businessInfo.email", value: "cannot be changed: it is the user's identity (SCIM userName)" },
          { name: "externalId", value: "cannot be changed: it is owned by the identity provider (SCIM)" },
          { name: "isActive", value: "cannot be changed: activation is managed by the identity provider (SCIM)" },
        ],
      },
    );
    assert.deepEqual(await userRow(userId), before);
    assert.deepEqual(store.uow.transactions.at(-1)?.outcome, "rolled back");
    assert.equal(await auditEventCount(), 0);
  });

  test("update: a foreign caller gets NOT_FOUND and nothing is written", async () => {
    const before = await userRow(userId);
    await rejectsWith(
      profiles.update({ ...companyAdmin, orgId: otherOrgId }, userId, update({}), "req-3"),
      notFound(userId),
    );
    await rejectsWith(
      profiles.update({ ...tmcAdmin, tmcId: crypto.randomUUID() }, userId, update({}), "req-4"),
      notFound(userId),
    );
    assert.equal(await auditEventCount(), 0);
    assert.deepEqual(await userRow(userId), before);
  });

  test("changedPaths: two levels deep, key order is no change", () => {
    assert.deepEqual(
      changedPaths({ a: { b: { c: 1, d: 2 }, e: [1] }, f: 1 }, { a: { b: { d: 2, c: 1 }, e: [2] }, g: 1 }),
      ["a.e", "f", "g"],
    );
  });
});
