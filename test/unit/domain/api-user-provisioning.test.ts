import assert from "node:assert/strict";
import crypto from "node:crypto";
import { beforeEach, describe, test } from "node:test";
import { verifyClientSecret } from "../../../src/domain/shared/client-secret.js";
import { openScimToken } from "../../../src/domain/shared/scim-token.js";
import { tenantScope } from "../../../src/domain/shared/tenant-scope.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import { apiUserRow, auditOf, createDomainFixture, newTenant, type DomainFixture } from "../../fakes/domain-fixture.js";

describe("ApiUserProvisioning", () => {
  let f: DomainFixture;
  let tmcId: string;
  let orgId: string;
  beforeEach(async () => {
    f = await createDomainFixture();
    ({ tmcId, orgId } = await newTenant(f, 3));
  });

  const create = (overrides: Partial<Parameters<DomainFixture["provisioning"]["create"]>[0]> = {}) =>
    f.provisioning.create({
      tmcId,
      orgId: undefined,
      role: "TMC_ADMIN",
      credentialType: "CLIENT_CREDENTIALS",
      actor: "admin-1",
      requestId: "req-1",
      ...overrides,
    });

  test("a client-credentials user: a 26-character id, a secret shown once and stored only as its HMAC", async () => {
    const created = await create();
    assert.match(created.clientId, /^[a-z2-7]{26}$/);
    assert.equal(created.scimToken, undefined);
    assert.equal(Buffer.from(created.clientSecret!, "base64url").length, 32);
    const row = apiUserRow(f, created.clientId)!;
    assert.deepEqual(
      {
        tmcId: row.tmcId,
        orgId: row.orgId,
        role: row.role,
        credentialType: row.credentialType,
        generation: row.credentialGeneration,
        createdBy: row.createdBy,
        revokedAt: row.revokedAt,
      },
      {
        tmcId,
        orgId: undefined,
        role: "TMC_ADMIN",
        credentialType: "CLIENT_CREDENTIALS",
        generation: 1,
        createdBy: "admin-1",
        revokedAt: undefined,
      },
    );
    assert.equal(verifyClientSecret(f.keys.secretPepper, created.clientSecret!, row.secretHash), true);
    assert.equal(row.secretHash.includes(Buffer.from(created.clientSecret!)), false);
  });

  test("a SCIM-token user gets a sealed SCIM token naming it, and no client secret", async () => {
    const created = await create({ role: "COMPANY_ADMIN", credentialType: "SCIM_TOKEN", orgId });
    assert.equal(created.clientSecret, undefined);
    const envelope = openScimToken(new Map([[f.keys.scimTokenKeyId, f.keys.scimTokenKey]]), created.scimToken!);
    assert.equal(envelope?.clientId, created.clientId);
    assert.equal(
      verifyClientSecret(f.keys.secretPepper, envelope!.secret, apiUserRow(f, created.clientId)!.secretHash),
      true,
    );
    assert.equal(apiUserRow(f, created.clientId)!.orgId, orgId);
  });

  test("SCIM_TOKEN requires COMPANY_ADMIN; COMPANY_ADMIN requires an orgId — checked before anything is written", async () => {
    const transactionsBefore = f.store.db.transactions.length;
    await rejectsWith(create({ credentialType: "SCIM_TOKEN" }), {
      code: "API_VALIDATION_FAILED",
      message: "credentialType SCIM_TOKEN requires role COMPANY_ADMIN",
      params: [
        { name: "credentialType", value: "SCIM_TOKEN" },
        { name: "role", value: "TMC_ADMIN" },
      ],
    });
    await rejectsWith(create({ role: "COMPANY_ADMIN", credentialType: "SCIM_TOKEN" }), {
      code: "API_VALIDATION_FAILED",
      message: "orgId is required for role COMPANY_ADMIN",
      params: [{ name: "orgId", value: "" }],
    });
    await rejectsWith(create({ role: "COMPANY_ADMIN" }), {
      code: "API_VALIDATION_FAILED",
      message: "orgId is required for role COMPANY_ADMIN",
      params: [{ name: "orgId", value: "" }],
    });
    assert.equal(f.store.db.transactions.length, transactionsBefore, "no transaction was even opened");
  });

  test("an orgId must be a company of the TMC: another TMC's company and an unknown one are both 404", async () => {
    const other = await newTenant(f);
    const unknown = crypto.randomUUID();
    for (const candidate of [other.orgId, unknown]) {
      await rejectsWith(create({ role: "COMPANY_ADMIN", orgId: candidate }), {
        code: "NOT_FOUND",
        message: "Organization not found",
        params: [{ name: "orgId", value: candidate }],
      });
    }
    assert.equal(await f.repos.apiUsers.countActive(f.uow.direct, tenantScope(tmcId)), 0);
  });

  test("an unknown TMC is 404", async () => {
    const unknown = crypto.randomUUID();
    await rejectsWith(create({ tmcId: unknown }), {
      code: "NOT_FOUND",
      message: "TMC not found",
      params: [{ name: "tmcId", value: unknown }],
    });
  });

  test("beyond the TMC's limit: API_USER_LIMIT_EXCEEDED with the limit and the current count; revoked users free a place", async () => {
    const first = await create();
    await create();
    await create();
    await rejectsWith(create(), {
      code: "API_USER_LIMIT_EXCEEDED",
      message: "The maximum number of API users for this TMC already exists",
      params: [
        { name: "limit", value: "3" },
        { name: "currentCount", value: "3" },
      ],
    });
    await f.admin.revoke({ clientId: "admin-1", tmcId }, first.clientId, "req-2");
    await create();
    await f.tenants.setApiUserLimit(tmcId, 2);
    await rejectsWith(create(), {
      code: "API_USER_LIMIT_EXCEEDED",
      message: "The maximum number of API users for this TMC already exists",
      params: [
        { name: "limit", value: "2" },
        { name: "currentCount", value: "3" },
      ],
    });
    assert.equal(await f.repos.apiUsers.countActive(f.uow.direct, tenantScope(tmcId)), 3);
  });

  test("concurrent creates queue on the TMC row lock and cannot overshoot the limit", async () => {
    const outcomes = await Promise.allSettled(Array.from({ length: 7 }, (_, i) => create({ requestId: `req-${i}` })));
    assert.equal(outcomes.filter((o) => o.status === "fulfilled").length, 3);
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
    assert.equal(refused.length, 4);
    assert.ok(refused.every((o) => o.reason.code === "API_USER_LIMIT_EXCEEDED"));
    assert.equal(await f.repos.apiUsers.countActive(f.uow.direct, tenantScope(tmcId)), 3);
  });

  test("the row and its audit event commit in one transaction; the event names who, what and the request, never the secret", async () => {
    const created = await create({ requestId: "req-42" });
    const last = f.store.db.committed().at(-1)!;
    assert.deepEqual(last.writes, ["api_users", "audit_events"]);
    const events = await auditOf(f, tmcId);
    assert.deepEqual(
      events.map(({ occurredAt, ...e }) => e),
      [
        {
          action: "API_USER_CREATE",
          outcome: "SUCCESS",
          actor: "admin-1",
          tmcId,
          targetClientId: created.clientId,
          debugIdentifier: "req-42",
          details: { role: "TMC_ADMIN", credentialType: "CLIENT_CREDENTIALS" },
        },
      ],
    );
    assert.equal(events[0]!.occurredAt.toISOString(), "2026-11-22T10:00:00.000Z");
    assert.equal(JSON.stringify(events).includes(created.clientSecret!), false);
  });

  test("a failed transaction leaves nothing half-written: no user when the audit write fails", async () => {
    f.store.failNext("audit.append", new Error("audit_events: disk full"));
    await assert.rejects(create(), { message: "audit_events: disk full" });
    assert.equal(await f.repos.apiUsers.countActive(f.uow.direct, tenantScope(tmcId)), 0);
    assert.equal(f.store.db.apiUsers.rows.size, 0);
    assert.deepEqual(await auditOf(f, tmcId), []);
    assert.deepEqual(f.store.db.rolledBack().at(-1)?.writes, ["api_users"]);
  });
});
