import assert from "node:assert/strict";
import crypto from "node:crypto";
import { beforeEach, describe, test } from "node:test";
import { verifyClientSecret } from "../../../src/domain/shared/client-secret.js";
import { openScimToken } from "../../../src/domain/shared/scim-token.js";
import { tenantScope } from "../../../src/domain/shared/tenant-scope.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import {
  auditOf,
  createPgliteFixture,
  newTenant,
  storedApiUser,
  type PgliteDomainFixture,
} from "../../fakes/domain-fixture.js";

describe("ApiUserProvisioning", () => {
  let f: PgliteDomainFixture;
  let tmcId: string;
  let orgId: string;
  beforeEach(async () => {
    f = await createPgliteFixture();
    ({ tmcId, orgId } = await newTenant(f, 3));
  });

  const create = (overrides: Partial<Parameters<PgliteDomainFixture["provisioning"]["create"]>[0]> = {}) =>
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
    const row = (await storedApiUser(f.store.db, created.clientId))!;
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
      verifyClientSecret(
        f.keys.secretPepper,
        envelope!.secret,
        (await storedApiUser(f.store.db, created.clientId))!.secretHash,
      ),
      true,
    );
    assert.equal((await storedApiUser(f.store.db, created.clientId))!.orgId, orgId);
  });

  test("SCIM_TOKEN requires COMPANY_ADMIN; COMPANY_ADMIN requires an orgId — checked before anything is written", async () => {
    const transactionsBefore = f.store.uow.transactions.length;
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
    assert.equal(f.store.uow.transactions.length, transactionsBefore, "no transaction was even opened");
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
    const before = new Date();
    const created = await create({ requestId: "req-42" });
    const after = new Date();
    assert.deepEqual(
      f.store.uow.transactions.map((t) => t.outcome).slice(-1),
      ["committed"],
      "the create ran one transaction, committed",
    );
    const writes = f.store.invocations.filter((i) => ["apiUsers.insert", "audit.append"].includes(i.method));
    assert.deepEqual(
      writes.map((w) => w.method),
      ["apiUsers.insert", "audit.append"],
    );
    assert.equal(writes[0]!.args[0], writes[1]!.args[0], "both writes in the same transaction");
    assert.notEqual(writes[0]!.args[0], f.uow.direct);
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
    // The domain passes no time: the repository stamps the event with the machine's clock.
    const occurredAt = events[0]!.occurredAt.getTime();
    assert.ok(occurredAt >= before.getTime() && occurredAt <= after.getTime(), "stamped during the call");
    assert.equal(JSON.stringify(events).includes(created.clientSecret!), false);
  });

  test("a failed transaction leaves nothing half-written: no user when the audit write fails", async () => {
    f.store.failNext("audit.append", new Error("audit_events: disk full"));
    await assert.rejects(create(), { message: "audit_events: disk full" });
    assert.equal(await f.repos.apiUsers.countActive(f.uow.direct, tenantScope(tmcId)), 0);
    assert.deepEqual(await f.store.db("api_users").pluck("client_id"), [], "no row, not even a tombstone");
    assert.deepEqual(await auditOf(f, tmcId), []);
    assert.deepEqual(
      f.store.calls.filter((c) => c === "apiUsers.insert" || c === "audit.append"),
      ["apiUsers.insert", "audit.append"],
      "the user was written, then the audit write failed",
    );
    assert.equal(f.store.uow.transactions.at(-1)?.outcome, "rolled back");
  });
});
