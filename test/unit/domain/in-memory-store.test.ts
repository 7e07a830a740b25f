import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import { tenantScope } from "../../../src/domain/shared/tenant-scope.js";
import type { Tx } from "../../../src/domain/shared/unit-of-work.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import { FakeClock } from "../../fakes/clock.js";
import { createInMemoryStore } from "../../fakes/in-memory-store.js";

/**
 * The fake store must keep the promises of the Postgres one, or every domain test above it
 * proves nothing: all-or-nothing transactions, row locks, tenant scoping, unique and foreign keys.
 */
describe("in-memory store", () => {
  const apiUser = (clientId: string, orgId?: string) => ({
    clientId,
    orgId,
    role: "TMC_ADMIN" as const,
    credentialType: "CLIENT_CREDENTIALS" as const,
    secretHash: crypto.randomBytes(32),
    createdBy: "operator",
  });

  test("a transaction that throws leaves no change behind; direct writes made meanwhile stay", async () => {
    const { uow, repositories: r, db } = createInMemoryStore();
    const tmc = await r.tenants.createTmc(uow.direct, "A", 5);
    const scope = tenantScope(tmc.id);
    let outside = "";
    await assert.rejects(
      uow.transaction(async (tx) => {
        await r.apiUsers.insert(tx, scope, apiUser("in-tx"));
        await r.tenants.setApiUserLimit(tx, scope, 9);
        outside = (await r.tenants.createCompany(uow.direct, scope, "Direct Corp")).id;
        await r.audit.append(tx, [{ action: "X", outcome: "SUCCESS", actor: "a", tmcId: tmc.id, targetClientId: null, debugIdentifier: null }]);
        throw new Error("boom");
      }),
      { message: "boom" },
    );
    assert.equal(await r.apiUsers.countActive(uow.direct, scope), 0);
    assert.equal((await r.tenants.findTmc(uow.direct, scope))?.maxApiUsers, 5);
    assert.deepEqual(await r.audit.list(uow.direct, scope, 10), []);
    assert.equal((await r.tenants.findCompany(uow.direct, scope, outside))?.name, "Direct Corp");
    assert.deepEqual(db.rolledBack().map((t) => t.writes), [["api_users", "tmcs", "audit_events"]]);
  });

  test("READ COMMITTED: a transaction reads its own writes; nobody else sees them before the commit", async () => {
    const { uow, repositories: r } = createInMemoryStore();
    const tmc = await r.tenants.createTmc(uow.direct, "A", 5);
    const scope = tenantScope(tmc.id);
    await r.apiUsers.insert(uow.direct, scope, apiUser("c1"));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let written!: () => void;
    const hasWritten = new Promise<void>((resolve) => (written = resolve));
    const writer = uow.transaction(async (tx) => {
      await r.apiUsers.setCredential(tx, scope, "c1", { secretHash: Buffer.alloc(32), generation: 2 });
      await r.apiUsers.insert(tx, scope, apiUser("c2"));
      assert.deepEqual([...(await r.apiUsers.activeGenerations(tx, ["c1", "c2"]))], [["c1", 2], ["c2", 1]], "its own writes");
      written();
      await held;
    });
    await hasWritten;
    assert.deepEqual([...(await r.apiUsers.activeGenerations(uow.direct, ["c1", "c2"]))], [["c1", 1]], "direct sees the committed state");
    await uow.transaction(async (tx) => {
      assert.equal(await r.apiUsers.countActive(tx, scope), 1, "another transaction too");
    });
    release();
    await writer;
    assert.deepEqual([...(await r.apiUsers.activeGenerations(uow.direct, ["c1", "c2"]))], [["c1", 2], ["c2", 1]]);
  });

  test("an UPDATE waits for the row's lock and re-checks its condition on the latest version", async () => {
    const { uow, repositories: r, db } = createInMemoryStore();
    const tmc = await r.tenants.createTmc(uow.direct, "A", 5);
    const scope = tenantScope(tmc.id);
    await r.apiUsers.insert(uow.direct, scope, apiUser("c1"));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const revoker = uow.transaction(async (tx) => {
      await r.apiUsers.lockActive(tx, scope, "c1");
      await r.apiUsers.markRevoked(tx, scope, "c1");
      locked();
      await held;
    });
    await isLocked;
    const rotation = r.apiUsers.setCredential(uow.direct, scope, "c1", { secretHash: Buffer.alloc(32), generation: 9 });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(db.apiUsers.rows.get("c1")?.credentialGeneration, 1, "still waiting");
    release();
    await Promise.all([revoker, rotation]);
    assert.deepEqual([db.apiUsers.rows.get("c1")?.credentialGeneration, db.apiUsers.rows.get("c1")?.revokedAt instanceof Date], [1, true], "revoked rows are no longer active: nothing updated");
  });

  test("an injected commit failure rolls the whole transaction back", async () => {
    const { uow, repositories: r, db } = createInMemoryStore();
    const tmc = await r.tenants.createTmc(uow.direct, "A", 5);
    db.failNextCommit(new Error("connection lost at commit"));
    await assert.rejects(uow.transaction((tx) => r.apiUsers.insert(tx, tenantScope(tmc.id), apiUser("c1"))), { message: "connection lost at commit" });
    assert.equal(await r.apiUsers.findActive(uow.direct, "c1"), undefined);
  });

  test("a Tx cannot be used after its transaction ended", async () => {
    const { uow, repositories: r } = createInMemoryStore();
    let leaked: Tx | undefined;
    await uow.transaction(async (tx) => {
      leaked = tx;
    });
    await assert.rejects(r.tenants.createTmc(leaked!, "late", 5), /Transaction query already complete/);
    await assert.rejects(r.tenants.createTmc({} as Tx, "foreign", 5), /not a Tx of this database/);
  });

  test("row locks queue concurrent transactions on the same TMC until the holder ends", async () => {
    const { uow, repositories: r } = createInMemoryStore();
    const tmc = await r.tenants.createTmc(uow.direct, "A", 5);
    const scope = tenantScope(tmc.id);
    const order: string[] = [];
    let releaseFirst!: () => void;
    const firstHolds = new Promise<void>((resolve) => (releaseFirst = resolve));
    let firstLocked!: () => void;
    const locked = new Promise<void>((resolve) => (firstLocked = resolve));
    const first = uow.transaction(async (tx) => {
      await r.tenants.lockTmc(tx, scope);
      order.push("first locked");
      firstLocked();
      await firstHolds;
      order.push("first ends");
    });
    await locked;
    const second = uow.transaction(async (tx) => {
      await r.tenants.lockTmc(tx, scope);
      order.push("second locked");
    });
    // Let every pending callback run: without the lock the second would be done by now.
    await new Promise((resolve) => setImmediate(resolve));
    order.push("released");
    releaseFirst();
    await Promise.all([first, second]);
    assert.deepEqual(order, ["first locked", "released", "first ends", "second locked"]);
  });

  test("every scoped method sees only its own tenant's rows", async () => {
    const clock = new FakeClock();
    const { uow, repositories: r } = createInMemoryStore({ clock: clock.now });
    const tx = uow.direct;
    const a = tenantScope((await r.tenants.createTmc(tx, "A", 5)).id);
    const b = tenantScope((await r.tenants.createTmc(tx, "B", 5)).id);
    const companyB = (await r.tenants.createCompany(tx, b, "B Corp")).id;
    await r.tenants.createUser(tx, b, companyB, { email: "b@b.example", givenName: "B", familyName: "B", isActive: true });
    await r.apiUsers.insert(tx, b, apiUser("client-b"));
    await r.refreshTokens.insert(tx, b, {
      id: "rt-b",
      tokenHash: Buffer.from("hash-b"),
      familyId: "fam-b",
      clientId: "client-b",
      subject: "client-b",
      subjectKind: "CLIENT",
      scope: "openid",
      audience: "aud",
      boundCredentials: [["client-b", 1]],
      expiresAt: new Date("2027-01-01T00:00:00Z"),
    });
    await r.trustedIssuers.upsert(tx, b, { issuer: "https://idp.b", jwksUri: "https://idp.b/jwks", jwks: undefined, audience: undefined });
    await r.audit.append(tx, [{ action: "B", outcome: "SUCCESS", actor: "client-b", tmcId: b.tmcId, targetClientId: null, debugIdentifier: null }]);

    assert.equal(await r.tenants.findCompany(tx, a, companyB), undefined);
    await rejectsWith(r.tenants.createUser(tx, a, companyB, { email: "x@a.example", givenName: "X", familyName: "X", isActive: true }), {
      code: "NOT_FOUND",
      message: "Company not found",
      params: [{ name: "orgId", value: companyB }],
    });
    assert.equal(await r.tenants.findActiveUserByEmail(tx, a, "b@b.example"), undefined);
    assert.equal(await r.apiUsers.countActive(tx, a), 0);
    assert.deepEqual(await r.apiUsers.listActive(tx, a, { limit: 10, offset: 0 }), []);
    assert.equal(await r.apiUsers.lockActive(tx, a, "client-b"), undefined);
    await r.apiUsers.setCredential(tx, a, "client-b", { secretHash: Buffer.alloc(32), generation: 7 });
    await r.apiUsers.markRevoked(tx, a, "client-b");
    assert.equal((await r.apiUsers.findActive(tx, "client-b"))?.credentialGeneration, 1, "B's user is neither rotated nor revoked through A");
    assert.equal(await r.refreshTokens.lockByHash(tx, a, Buffer.from("hash-b")), undefined);
    await r.refreshTokens.markUsed(tx, a, "rt-b", clock.now());
    await r.refreshTokens.revokeFamily(tx, a, "fam-b", clock.now());
    await r.refreshTokens.revokeAllOfClient(tx, a, "client-b", clock.now());
    const stillB = await r.refreshTokens.lockByHash(tx, b, Buffer.from("hash-b"));
    assert.deepEqual([stillB?.usedAt, stillB?.revokedAt], [undefined, undefined]);
    assert.equal(await r.trustedIssuers.find(tx, a, "https://idp.b"), undefined);
    assert.deepEqual(await r.audit.list(tx, a, 10), []);
    await rejectsWith(r.airCredits.insertPaymentSource(tx, a, { companyId: companyB, fopLabel: "Card", cardCompany: undefined, cardLast4: undefined, creditUsageType: "PERSONAL", transferable: true }), {
      code: "NOT_FOUND",
      message: "Company not found",
    });
  });

  test("unique and foreign keys answer as the Postgres store's transaction does", async () => {
    const { uow, repositories: r } = createInMemoryStore();
    const tx = uow.direct;
    const a = tenantScope((await r.tenants.createTmc(tx, "A", 5)).id);
    const b = tenantScope((await r.tenants.createTmc(tx, "B", 5)).id);
    const companyA = (await r.tenants.createCompany(tx, a, "A Corp")).id;
    const companyB = (await r.tenants.createCompany(tx, b, "B Corp")).id;
    await r.tenants.createUser(tx, a, companyA, { email: "Ada@Example.com", givenName: "Ada", familyName: "L", isActive: false });
    await rejectsWith(r.tenants.createUser(tx, a, companyA, { email: "ada@example.COM", givenName: "Ada", familyName: "L", isActive: true }), {
      code: "ALREADY_EXISTS",
      message: "A user with this email already exists in the TMC",
    });
    await r.tenants.createUser(tx, b, companyB, { email: "ada@example.com", givenName: "Ada", familyName: "L", isActive: true });
    assert.equal(await r.tenants.findActiveUserByEmail(tx, a, "ADA@example.com"), undefined, "inactive users are not found");
    assert.equal((await r.tenants.findActiveUserByEmail(tx, b, "ADA@example.com"))?.tmcId, b.tmcId);

    await r.apiUsers.insert(tx, a, apiUser("dup"));
    await rejectsWith(r.apiUsers.insert(tx, b, apiUser("dup")), { code: "ALREADY_EXISTS", message: "The resource already exists" });
    await rejectsWith(r.apiUsers.insert(tx, tenantScope(crypto.randomUUID()), apiUser("orphan")), { code: "NOT_FOUND", message: "A referenced resource does not exist" });
    await rejectsWith(r.tenants.createCompany(tx, tenantScope(crypto.randomUUID()), "Orphan"), { code: "NOT_FOUND", message: "A referenced resource does not exist" });
    await assert.rejects(r.tenants.setApiUserLimit(tx, a, -1), /tmcs_max_api_users_non_negative/);
  });

  test("active API users are listed by creation, then client id; revoked ones are tombstones", async () => {
    const { uow, repositories: r, db } = createInMemoryStore();
    const tx = uow.direct;
    const a = tenantScope((await r.tenants.createTmc(tx, "A", 5)).id);
    for (const id of ["zz", "aa", "mm"]) await r.apiUsers.insert(tx, a, apiUser(id));
    await r.apiUsers.markRevoked(tx, a, "aa");
    assert.deepEqual(await r.apiUsers.listActive(tx, a, { limit: 10, offset: 0 }), ["zz", "mm"]);
    assert.deepEqual(await r.apiUsers.listActive(tx, a, { limit: 1, offset: 1 }), ["mm"]);
    assert.equal(await r.apiUsers.countActive(tx, a), 2);
    assert.ok(db.apiUsers.rows.get("aa")?.revokedAt instanceof Date);
    assert.deepEqual([...(await r.apiUsers.activeGenerations(tx, ["zz", "aa", "nope"]))], [["zz", 1]]);
  });
});
