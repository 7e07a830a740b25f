import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import { tenantScope } from "../../../src/domain/shared/tenant-scope.js";
import type { Tx } from "../../../src/domain/shared/unit-of-work.js";
import { MemoryGenerationCache } from "../../../src/store/memory/generation-cache.js";
import type { CredentialState } from "../../../src/domain/tokens/model.js";
import type { NumberedChange, WatermarkRaise } from "../../../src/domain/tokens/ports.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import { FakeChangeFeed } from "../../fakes/change-feed.js";
import { FakeClock } from "../../fakes/clock.js";
import { FakeGenerationCache } from "../../fakes/generation-cache.js";
import { createInMemoryStore, type InMemoryRepositories } from "../../fakes/in-memory-store.js";

/** The generation of each id credentialStates knows, in its order. */
const generations = async (r: InMemoryRepositories, tx: Tx, ids: string[]) =>
  [...(await r.apiUsers.credentialStates(tx, ids))].map(([id, state]) => [id, state.generation]);

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
        await r.audit.append(tx, [
          { action: "X", outcome: "SUCCESS", actor: "a", tmcId: tmc.id, targetClientId: null, debugIdentifier: null },
        ]);
        throw new Error("boom");
      }),
      { message: "boom" },
    );
    assert.equal(await r.apiUsers.countActive(uow.direct, scope), 0);
    assert.equal((await r.tenants.findTmc(uow.direct, scope))?.maxApiUsers, 5);
    assert.deepEqual(await r.audit.list(uow.direct, scope, 10), []);
    assert.equal((await r.tenants.findCompany(uow.direct, scope, outside))?.name, "Direct Corp");
    assert.deepEqual(
      db.rolledBack().map((t) => t.writes),
      [["api_users", "tmcs", "audit_events"]],
    );
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
      assert.deepEqual(
        await generations(r, tx, ["c1", "c2"]),
        [
          ["c1", 2],
          ["c2", 1],
        ],
        "its own writes",
      );
      written();
      await held;
    });
    await hasWritten;
    assert.deepEqual(await generations(r, uow.direct, ["c1", "c2"]), [["c1", 1]], "direct sees the committed state");
    await uow.transaction(async (tx) => {
      assert.equal(await r.apiUsers.countActive(tx, scope), 1, "another transaction too");
    });
    release();
    await writer;
    assert.deepEqual(await generations(r, uow.direct, ["c1", "c2"]), [
      ["c1", 2],
      ["c2", 1],
    ]);
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
    assert.deepEqual(
      [db.apiUsers.rows.get("c1")?.credentialGeneration, db.apiUsers.rows.get("c1")?.revokedAt instanceof Date],
      [1, true],
      "revoked rows are no longer active: nothing updated",
    );
  });

  test("an injected commit failure rolls the whole transaction back", async () => {
    const { uow, repositories: r, db } = createInMemoryStore();
    const tmc = await r.tenants.createTmc(uow.direct, "A", 5);
    db.failNextCommit(new Error("connection lost at commit"));
    await assert.rejects(
      uow.transaction((tx) => r.apiUsers.insert(tx, tenantScope(tmc.id), apiUser("c1"))),
      { message: "connection lost at commit" },
    );
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
    const userB = await r.tenants.createUser(tx, b, companyB, {
      email: "b@b.example",
      givenName: "B",
      familyName: "B",
      isActive: true,
    });
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
      act: { sub: "actor" },
      expiresAt: new Date("2027-01-01T00:00:00Z"),
    });
    await r.trustedIssuers.upsert(tx, b, {
      issuer: "https://idp.b",
      jwksUri: "https://idp.b/jwks",
      jwks: undefined,
      audience: undefined,
      companyId: undefined,
    });
    await r.audit.append(tx, [
      {
        action: "B",
        outcome: "SUCCESS",
        actor: "client-b",
        tmcId: b.tmcId,
        targetClientId: null,
        debugIdentifier: null,
      },
    ]);

    assert.equal(await r.tenants.findCompany(tx, a, companyB), undefined);
    await rejectsWith(
      r.tenants.createUser(tx, a, companyB, { email: "x@a.example", givenName: "X", familyName: "X", isActive: true }),
      {
        code: "NOT_FOUND",
        message: "Company not found",
        params: [{ name: "orgId", value: companyB }],
      },
    );
    assert.equal(await r.tenants.findActiveUserByEmail(tx, a, "b@b.example"), undefined);
    assert.equal(await r.tenants.findActiveUser(tx, a, userB.id), undefined);
    assert.deepEqual(await r.tenants.findActiveUser(tx, b, userB.id), userB, "its own tenant sees it");
    assert.equal(await r.apiUsers.countActive(tx, a), 0);
    assert.deepEqual(await r.apiUsers.listActive(tx, a, { limit: 10, offset: 0 }), []);
    assert.equal(await r.apiUsers.lockActive(tx, a, "client-b"), undefined);
    await r.apiUsers.setCredential(tx, a, "client-b", { secretHash: Buffer.alloc(32), generation: 7 });
    await r.apiUsers.markRevoked(tx, a, "client-b");
    assert.equal(
      (await r.apiUsers.findActive(tx, "client-b"))?.credentialGeneration,
      1,
      "B's user is neither rotated nor revoked through A",
    );
    assert.equal(await r.refreshTokens.lockByHash(tx, a, Buffer.from("hash-b")), undefined);
    await r.refreshTokens.markUsed(tx, a, "rt-b", clock.now());
    await r.refreshTokens.revokeFamily(tx, a, "fam-b", clock.now());
    await r.refreshTokens.revokeAllOfClient(tx, a, "client-b", clock.now());
    const stillB = await r.refreshTokens.lockByHash(tx, b, Buffer.from("hash-b"));
    assert.deepEqual([stillB?.usedAt, stillB?.revokedAt], [undefined, undefined]);
    assert.equal(await r.trustedIssuers.find(tx, a, "https://idp.b"), undefined);
    assert.deepEqual(await r.audit.list(tx, a, 10), []);
    // The operator's reads and the issuer removal.
    await r.audit.append(tx, [
      {
        action: "TOKEN_ISSUED",
        outcome: "SUCCESS",
        actor: "client-b",
        tmcId: b.tmcId,
        targetClientId: "client-b",
        debugIdentifier: null,
      },
    ]);
    assert.deepEqual(await r.apiUsers.listActiveDetails(tx, a, { limit: 10, offset: 0 }), []);
    assert.deepEqual(
      (await r.apiUsers.listActiveDetails(tx, b, { limit: 10, offset: 0 })).map((u) => u.clientId),
      ["client-b"],
    );
    const everything = { actions: [], clientId: undefined, since: undefined, until: undefined, beforeId: undefined };
    assert.deepEqual(await r.audit.search(tx, a, everything, 10), []);
    assert.deepEqual(await r.audit.search(tx, a, { ...everything, clientId: "client-b" }, 10), []);
    assert.deepEqual(
      (await r.audit.search(tx, b, { ...everything, clientId: "client-b" }, 10)).map((e) => e.action),
      ["TOKEN_ISSUED", "B"],
    );
    assert.deepEqual([...(await r.audit.lastTokenIssued(tx, a, ["client-b"]))], []);
    assert.deepEqual([...(await r.audit.lastTokenIssued(tx, b, ["client-b"]))], [["client-b", clock.now()]]);
    assert.deepEqual(await r.trustedIssuers.list(tx, a), []);
    assert.equal(await r.trustedIssuers.remove(tx, a, "https://idp.b"), false);
    assert.equal(
      (await r.trustedIssuers.find(tx, b, "https://idp.b"))?.issuer,
      "https://idp.b",
      "B still trusts its issuer",
    );
    await rejectsWith(
      r.airCredits.insertPaymentSource(tx, a, {
        companyId: companyB,
        fopLabel: "Card",
        cardCompany: undefined,
        cardLast4: undefined,
        creditUsageType: "PERSONAL",
        transferable: true,
      }),
      {
        code: "NOT_FOUND",
        message: "Company not found",
      },
    );
  });

  test("findActiveUser: the active user with this id in the tenant; another tenant's, an inactive or an unknown id is undefined", async () => {
    const { uow, repositories: r } = createInMemoryStore({ clock: new FakeClock().now });
    const tx = uow.direct;
    const a = tenantScope((await r.tenants.createTmc(tx, "A", 5)).id);
    const b = tenantScope((await r.tenants.createTmc(tx, "B", 5)).id);
    const companyA = (await r.tenants.createCompany(tx, a, "A Corp")).id;
    const companyB = (await r.tenants.createCompany(tx, b, "B Corp")).id;
    const ada = await r.tenants.createUser(tx, a, companyA, {
      email: "Ada@A.example",
      givenName: "Ada",
      familyName: "Lovelace",
      isActive: true,
    });
    const idle = await r.tenants.createUser(tx, a, companyA, {
      email: "idle@a.example",
      givenName: "I",
      familyName: "Dle",
      isActive: false,
    });
    const bob = await r.tenants.createUser(tx, b, companyB, {
      email: "bob@b.example",
      givenName: "Bob",
      familyName: "B",
      isActive: true,
    });

    assert.deepEqual(await r.tenants.findActiveUser(tx, a, ada.id), {
      id: ada.id,
      companyId: companyA,
      tmcId: a.tmcId,
      email: "Ada@A.example",
      givenName: "Ada",
      familyName: "Lovelace",
      isActive: true,
    });
    assert.equal(await r.tenants.findActiveUser(tx, a, bob.id), undefined, "B's user through A");
    assert.equal((await r.tenants.findActiveUser(tx, b, bob.id))?.id, bob.id);
    assert.equal(await r.tenants.findActiveUser(tx, b, ada.id), undefined, "A's user through B");
    assert.equal(await r.tenants.findActiveUser(tx, a, idle.id), undefined, "inactive");
    assert.equal(await r.tenants.findActiveUser(tx, a, crypto.randomUUID()), undefined, "unknown id");
    assert.equal(await r.tenants.findActiveUser(tx, a, "ada@a.example"), undefined, "an id, not an email");

    // Inside a transaction: its own uncommitted user, and nobody else's view of it.
    await uow.transaction(async (inner) => {
      const carol = await r.tenants.createUser(inner, a, companyA, {
        email: "carol@a.example",
        givenName: "C",
        familyName: "C",
        isActive: true,
      });
      assert.equal((await r.tenants.findActiveUser(inner, a, carol.id))?.id, carol.id);
      assert.equal(await r.tenants.findActiveUser(tx, a, carol.id), undefined, "not committed yet");
    });
  });

  test("unique and foreign keys answer as the Postgres store's transaction does", async () => {
    const { uow, repositories: r } = createInMemoryStore();
    const tx = uow.direct;
    const a = tenantScope((await r.tenants.createTmc(tx, "A", 5)).id);
    const b = tenantScope((await r.tenants.createTmc(tx, "B", 5)).id);
    const companyA = (await r.tenants.createCompany(tx, a, "A Corp")).id;
    const companyB = (await r.tenants.createCompany(tx, b, "B Corp")).id;
    await r.tenants.createUser(tx, a, companyA, {
      email: "Ada@Example.com",
      givenName: "Ada",
      familyName: "L",
      isActive: false,
    });
    await rejectsWith(
      r.tenants.createUser(tx, a, companyA, {
        email: "ada@example.COM",
        givenName: "Ada",
        familyName: "L",
        isActive: true,
      }),
      {
        code: "ALREADY_EXISTS",
        message: "A user with this email already exists in the company",
      },
    );
    await r.tenants.createUser(tx, b, companyB, {
      email: "ada@example.com",
      givenName: "Ada",
      familyName: "L",
      isActive: true,
    });
    assert.equal(
      await r.tenants.findActiveUserByEmail(tx, a, "ADA@example.com"),
      undefined,
      "inactive users are not found",
    );
    assert.equal((await r.tenants.findActiveUserByEmail(tx, b, "ADA@example.com"))?.tmcId, b.tmcId);
    // Emails are unique per company: another company of the same TMC may hold it, and token exchange then refuses the ambiguous email.
    const companyA2 = (await r.tenants.createCompany(tx, a, "A Two")).id;
    await r.tenants.createUser(tx, a, companyA2, {
      email: "ada@example.com",
      givenName: "Ada",
      familyName: "L",
      isActive: true,
    });
    assert.equal(
      (await r.tenants.findActiveUserByEmail(tx, a, "ADA@example.com"))?.companyId,
      companyA2,
      "one active user: found",
    );
    await r.tenants.createUser(tx, a, (await r.tenants.createCompany(tx, a, "A Three")).id, {
      email: "ADA@example.com",
      givenName: "Ada",
      familyName: "L",
      isActive: true,
    });
    await rejectsWith(r.tenants.findActiveUserByEmail(tx, a, "ada@example.com"), {
      code: "INVALID_GRANT",
      message:
        "The subject_token's email names more than one active user of the TMC, and not one whose externalId is the token's subject",
      params: [{ name: "subject_token", value: "ambiguous email" }],
    });
    assert.equal(
      (await r.tenants.findActiveUserByEmail(tx, a, "ada@example.com", { companyId: companyA2 }))?.companyId,
      companyA2,
      "within one company: found",
    );

    await r.apiUsers.insert(tx, a, apiUser("dup"));
    await rejectsWith(r.apiUsers.insert(tx, b, apiUser("dup")), {
      code: "ALREADY_EXISTS",
      message: "The resource already exists",
    });
    await rejectsWith(r.apiUsers.insert(tx, tenantScope(crypto.randomUUID()), apiUser("orphan")), {
      code: "NOT_FOUND",
      message: "A referenced resource does not exist",
    });
    await rejectsWith(r.tenants.createCompany(tx, tenantScope(crypto.randomUUID()), "Orphan"), {
      code: "NOT_FOUND",
      message: "A referenced resource does not exist",
    });
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
    assert.deepEqual(
      [...(await r.apiUsers.credentialStates(tx, ["zz", "aa", "nope"]))],
      [
        ["zz", { generation: 1, changeSeq: 0 }],
        ["aa", { generation: undefined, changeSeq: 0 }],
      ],
      "credentialStates includes revoked rows (no generation); unknown ids are absent",
    );
  });

  describe("credential change log (PostgresCredentialChangeLog's twin)", () => {
    async function withClients(...ids: string[]) {
      const clock = new FakeClock();
      const store = createInMemoryStore({ clock: clock.now });
      const scope = tenantScope((await store.repositories.tenants.createTmc(store.uow.direct, "A", 10)).id);
      for (const id of ids) await store.repositories.apiUsers.insert(store.uow.direct, scope, apiUser(id));
      return { ...store, r: store.repositories, scope, clock };
    }

    test("record numbers the change in its transaction, stamps change_seq, and the NOTIFY is delivered only at commit", async () => {
      const { uow, r, db } = await withClients("c1");
      const heard: string[] = [];
      db.listen((payload) => heard.push(payload));
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let recorded!: (change: NumberedChange) => void;
      const hasRecorded = new Promise<NumberedChange>((resolve) => (recorded = resolve));
      const writer = uow.transaction(async (tx) => {
        const change = await r.credentialChanges.record(tx, "c1");
        assert.deepEqual(
          [...(await r.apiUsers.credentialStates(tx, ["c1"]))],
          [["c1", { generation: 1, changeSeq: change.seq }]],
          "its own stamp",
        );
        recorded(change);
        await held;
        return change;
      });
      assert.deepEqual(await hasRecorded, { seq: 1, previous: 0 }, "the first change: nothing committed before it");
      assert.deepEqual(heard, [], "nothing is announced before the commit");
      assert.equal(await r.credentialChanges.latest(uow.direct), 0, "an uncommitted change is not the latest");
      assert.deepEqual(await r.credentialChanges.since(uow.direct, 0, 10), []);
      assert.equal(db.apiUsers.rows.get("c1")?.changeSeq, 0);
      release();
      assert.deepEqual(await writer, { seq: 1, previous: 0 });
      assert.deepEqual(heard, ["1"]);
      assert.equal(await r.credentialChanges.latest(uow.direct), 1);
      assert.equal(db.apiUsers.rows.get("c1")?.changeSeq, 1);
      assert.deepEqual(db.committed().at(-1)?.writes, ["credential_changes", "api_users"]);
    });

    test("a rolled-back change leaves no log row, no stamp and no notification, and its number is never reused (a gap)", async () => {
      const { uow, r, db } = await withClients("c1", "c2");
      const heard: string[] = [];
      db.listen((payload) => heard.push(payload));
      await assert.rejects(
        uow.transaction(async (tx) => {
          await r.credentialChanges.record(tx, "c1");
          throw new Error("boom");
        }),
        { message: "boom" },
      );
      db.failNextCommit(new Error("lost at commit"));
      await assert.rejects(
        uow.transaction((tx) => r.credentialChanges.record(tx, "c2")),
        { message: "lost at commit" },
      );
      assert.deepEqual(heard, []);
      assert.deepEqual([db.apiUsers.rows.get("c1")?.changeSeq, db.apiUsers.rows.get("c2")?.changeSeq], [0, 0]);
      assert.equal(await r.credentialChanges.latest(uow.direct), 0);
      assert.deepEqual(
        await uow.transaction((tx) => r.credentialChanges.record(tx, "c1")),
        { seq: 3, previous: 0 },
        "1 and 2 were consumed by the rolled-back transactions; `previous` is the last committed change, not seq - 1",
      );
      assert.deepEqual(await uow.transaction((tx) => r.credentialChanges.record(tx, "c2")), { seq: 4, previous: 3 });
      assert.deepEqual(heard, ["3", "4"]);
      assert.deepEqual(await r.credentialChanges.since(uow.direct, 0, 10), [
        { seq: 3, clientId: "c1" },
        { seq: 4, clientId: "c2" },
      ]);
      assert.deepEqual(db.heldLocks(), [], "the rolled-back transactions released the numbering lock");
    });

    test("since lists committed changes after a number, oldest first, at most `limit`; prune forgets those older than a time", async () => {
      const { uow, r, clock } = await withClients("c1", "c2");
      for (const id of ["c1", "c2", "c1", "c2"]) {
        await uow.transaction((tx) => r.credentialChanges.record(tx, id));
        clock.advanceSeconds(10);
      }
      assert.deepEqual(await r.credentialChanges.since(uow.direct, 1, 2), [
        { seq: 2, clientId: "c2" },
        { seq: 3, clientId: "c1" },
      ]);
      assert.deepEqual(
        (await r.credentialChanges.since(uow.direct, 3, 10)).map((c) => c.seq),
        [4],
      );
      assert.deepEqual(await r.credentialChanges.since(uow.direct, 4, 10), []);
      // The changes are at +0s, +10s, +20s, +30s: strictly older than +20s are the first two.
      assert.equal(await r.credentialChanges.prune(uow.direct, new Date(Date.parse("2026-11-22T10:00:20.000Z"))), 2);
      assert.deepEqual(
        (await r.credentialChanges.since(uow.direct, 0, 10)).map((c) => c.seq),
        [3, 4],
      );
      assert.equal(await r.credentialChanges.latest(uow.direct), 4);
      assert.equal(
        await r.credentialChanges.prune(uow.direct, clock.now()),
        1,
        "the newest change is kept, however old",
      );
      assert.equal(await r.credentialChanges.latest(uow.direct), 4, "latest() never goes back");
    });

    test("two transactions recording at once: the second waits for the first to commit (advisory lock), so numbers commit and are announced in order", async () => {
      const { uow, r, db } = await withClients("c1", "c2");
      const heard: string[] = [];
      db.listen((payload) => heard.push(payload));
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const slow = uow.transaction(async (tx) => {
        const change = await r.credentialChanges.record(tx, "c1");
        await held;
        return change;
      });
      await new Promise((resolve) => setImmediate(resolve));
      let fastDone = false;
      const fast = uow
        .transaction(async (tx) => {
          const change = await r.credentialChanges.record(tx, "c2");
          assert.deepEqual(heard, ["1"], "numbered only once the first change has committed");
          return change;
        })
        .finally(() => (fastDone = true));
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
      assert.equal(fastDone, false, "the second change waits on the numbering lock");
      assert.deepEqual(heard, []);
      assert.equal(await r.credentialChanges.latest(uow.direct), 0);
      assert.equal(db.apiUsers.rows.get("c2")?.changeSeq, 0);
      assert.deepEqual(
        db.invocations.filter((c) => c.method === "credentialChanges.record").length,
        2,
        "both called record: the second is inside it, waiting",
      );
      release();
      assert.deepEqual(await slow, { seq: 1, previous: 0 });
      assert.deepEqual(await fast, { seq: 2, previous: 1 }, "the second knows the first as its previous change");
      assert.deepEqual(heard, ["1", "2"]);
      assert.deepEqual(await r.credentialChanges.since(uow.direct, 0, 10), [
        { seq: 1, clientId: "c1" },
        { seq: 2, clientId: "c2" },
      ]);
    });

    test("a rolled-back holder releases the numbering lock: the waiter numbers next, and its previous skips the gap", async () => {
      const { uow, r } = await withClients("c1", "c2");
      await uow.transaction((tx) => r.credentialChanges.record(tx, "c1")); // 1
      let fail!: () => void;
      const failing = new Promise<void>((_, reject) => (fail = () => reject(new Error("deadlock detected"))));
      const doomed = uow.transaction(async (tx) => {
        await r.credentialChanges.record(tx, "c1"); // 2, never committed
        await failing;
      });
      await new Promise((resolve) => setImmediate(resolve));
      const waiter = uow.transaction((tx) => r.credentialChanges.record(tx, "c2"));
      await new Promise((resolve) => setImmediate(resolve));
      fail();
      await assert.rejects(doomed, { message: "deadlock detected" });
      assert.deepEqual(await waiter, { seq: 3, previous: 1 });
    });

    test("on `direct` (autocommit) record waits for the lock but holds it only for the statement", async () => {
      const { uow, r } = await withClients("c1", "c2");
      assert.deepEqual(await r.credentialChanges.record(uow.direct, "c1"), { seq: 1, previous: 0 });
      assert.deepEqual(
        await uow.transaction((tx) => r.credentialChanges.record(tx, "c2")),
        { seq: 2, previous: 1 },
        "not blocked by the autocommit change",
      );
    });
  });

  describe("fake change feed", () => {
    async function started(options: { autoConnect?: boolean } = {}) {
      const store = createInMemoryStore();
      const feed = new FakeChangeFeed(store.db, options);
      const seen: number[] = [];
      const log: string[] = [];
      let gate: Promise<void> = Promise.resolve();
      feed.start(
        (seq) => seen.push(seq),
        async () => {
          log.push(`catching up (connected: ${feed.connected})`);
          await gate;
        },
      );
      return { store, feed, seen, log, setGate: (g: Promise<void>) => void (gate = g) };
    }

    test("connected only once onConnected has finished; notifications are delivered, held, or lost while disconnected", async () => {
      const { store, feed, seen, log, setGate } = await started({ autoConnect: false });
      assert.equal(feed.connected, false);
      store.db.notify(store.uow.direct, "1");
      assert.deepEqual(feed.dropped, [1], "nothing is heard before LISTEN");
      let open!: () => void;
      setGate(new Promise<void>((resolve) => (open = resolve)));
      const connecting = feed.connect();
      store.db.notify(store.uow.direct, "2");
      assert.deepEqual([feed.connected, seen], [false, [2]], "LISTEN is in place while catching up; not connected yet");
      open();
      await connecting;
      assert.deepEqual([feed.connected, feed.connections, log], [true, 1, ["catching up (connected: false)"]]);

      feed.withhold();
      store.db.notify(store.uow.direct, "3");
      assert.deepEqual([seen, feed.held], [[2], [3]]);
      feed.deliverHeld();
      assert.deepEqual([seen, feed.held], [[2, 3], []]);

      feed.withhold();
      store.db.notify(store.uow.direct, "4");
      feed.disconnect();
      store.db.notify(store.uow.direct, "5");
      assert.deepEqual(
        [feed.connected, feed.dropped, seen],
        [false, [1, 4, 5], [2, 3]],
        "in flight and later ones are lost with the connection",
      );
      await feed.connect();
      assert.deepEqual([feed.connected, feed.connections], [true, 2]);
      await feed.stop();
      store.db.notify(store.uow.direct, "6");
      assert.deepEqual([feed.connected, seen], [false, [2, 3]]);
    });
  });

  describe("fake generation cache", () => {
    const state = (generation: number | undefined, changeSeq: number): CredentialState => ({ generation, changeSeq });

    test("keeps the rules of the src twin: a state never replaces a higher change number; the watermark rises only from at least `ifAtLeast`", async () => {
      const fake = new FakeGenerationCache();
      const twin = new MemoryGenerationCache();
      const ids = ["a", "b", "c", "d"];
      const script: Array<[string, Map<string, CredentialState>, WatermarkRaise | undefined, number]> = [
        [
          "a fill never moves the watermark",
          new Map([
            ["a", state(1, 0)],
            ["b", state(1, 0)],
          ]),
          undefined,
          0,
        ],
        ["change 1 over change 0: rises", new Map([["a", state(2, 1)]]), { to: 1, ifAtLeast: 0 }, 1],
        [
          "change 5 after a missed change 3: states land, the watermark stays",
          new Map([["a", state(undefined, 5)]]),
          { to: 5, ifAtLeast: 3 },
          1,
        ],
        [
          "an older state never replaces a newer one; a fill",
          new Map([
            ["a", state(1, 0)],
            ["b", state(undefined, 3)],
          ]),
          undefined,
          1,
        ],
        ["reconcile from 1 up to 3: rises", new Map([["b", state(undefined, 3)]]), { to: 3, ifAtLeast: 1 }, 3],
        [
          "a raise to below the watermark never lowers it",
          new Map([["c", state(undefined, 2)]]),
          { to: 2, ifAtLeast: 1 },
          3,
        ],
        [
          "change 5's publication again, now that 3 is covered: rises",
          new Map([["a", state(undefined, 5)]]),
          { to: 5, ifAtLeast: 3 },
          5,
        ],
        ["ifAtLeast below the watermark is covered too", new Map(), { to: 7, ifAtLeast: 4 }, 7],
        ["ifAtLeast above the watermark: refused even with no states", new Map(), { to: 9, ifAtLeast: 8 }, 7],
      ];
      for (const [step, states, raise, expected] of script) {
        await fake.write(states, raise);
        await twin.write(states, raise);
        assert.deepEqual(await fake.read(ids), await twin.read(ids), step);
        assert.equal(fake.watermark, expected, step);
      }
      assert.deepEqual(await fake.read(ids), {
        states: [state(undefined, 5), state(undefined, 3), state(undefined, 2), undefined],
        watermark: 7,
      });
      assert.deepEqual(
        fake.writes.map((w) => w.raised),
        [false, true, false, false, true, false, true, true, false],
        "each write records whether its raise happened",
      );
    });

    test("fails, loses writes, rolls back to a snapshot, and records every call", async () => {
      const cache = new FakeGenerationCache();
      await cache.write(new Map([["a", state(1, 0)]]), { to: 1, ifAtLeast: 0 });
      const before = cache.snapshot();
      await cache.write(new Map([["a", state(undefined, 2)]]), { to: 2, ifAtLeast: 1 });
      cache.restore(before);
      assert.deepEqual(await cache.read(["a"]), { states: [state(1, 0)], watermark: 1 });
      cache.loseWrites = true;
      await cache.write(new Map([["a", state(2, 3)]]), { to: 3, ifAtLeast: 2 });
      assert.deepEqual([cache.generationOf("a"), cache.watermark], [1, 1]);
      cache.loseWrites = false;
      cache.writeFailure = new Error("READONLY");
      await assert.rejects(cache.write(new Map([["a", state(2, 3)]]), { to: 3, ifAtLeast: 1 }), {
        message: "READONLY",
      });
      assert.equal(cache.watermark, 1);
      cache.writeFailure = undefined;
      await cache.write(new Map([["b", state(1, 0)]]));
      cache.readFailure = new Error("ECONNREFUSED");
      await assert.rejects(cache.read(["a"]), { message: "ECONNREFUSED" });
      assert.deepEqual(
        cache.writes.map((w) => [w.watermark, w.failed, w.lost, w.raised]),
        [
          [{ to: 1, ifAtLeast: 0 }, false, false, true],
          [{ to: 2, ifAtLeast: 1 }, false, false, true],
          [{ to: 3, ifAtLeast: 2 }, false, true, false],
          [{ to: 3, ifAtLeast: 1 }, true, false, false],
          [undefined, false, false, false],
        ],
      );
      assert.deepEqual(cache.reads, [
        { clientIds: ["a"], failed: false },
        { clientIds: ["a"], failed: true },
      ]);
    });
  });
});
