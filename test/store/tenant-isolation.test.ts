import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Tmc } from "../../src/domain/tenants/model.js";
import { tenantScope, type TenantScope } from "../../src/domain/shared/tenant-scope.js";
import { DomainError } from "../../src/errors/domain-error.js";
import type { Database } from "../../src/store/postgres/database.js";
import { postgresRepositories } from "../../src/store/postgres/repositories/index.js";
import { KnexUnitOfWork } from "../../src/store/postgres/unit-of-work.js";
import { backend, newStorage } from "../helpers/backend.js";
import { openStorageDatabase } from "../helpers/storage-database.js";
import { dropStorage } from "../helpers/service.js";

/**
 * Hydra's persister_nid_test, for this store: every repository method on tenant data runs under
 * two tenants, and none reads or changes the other's rows. Methods that are not scoped by nature
 * (they establish the tenant, or hold no tenant data) are listed with the reason; a method in
 * neither list fails the completeness test, so a new one cannot slip by untested.
 */
const UNSCOPED: Readonly<Record<string, string>> = {
  "tenants.createTmc": "creates a tenant",
  "tenants.tenantOfCompany": "the operator names a company without its TMC: it is how the scope is found",
  "tenants.listTmcs": "the operator's list of every tenant: it is how tenants are found",
  "apiUsers.findActive": "authentication: resolving a presented client id is how the tenant becomes known",
  "apiUsers.credentialStates": "token verification: the credential states a signed token names",
  "revokedTokens.revocations": "token verification: whether the signed token being verified was revoked, by its jti",
  "revokedTokens.insert":
    "records the caller's own token (verified as issued to it) by its random jti: no other tenant's row can be named",
  "audit.append": "each event carries its own tenant (or none, for unattributable requests)",
  "signingKeys.listPublished": "signing keys are the deployment's, not a tenant's",
  "signingKeys.insert": "signing keys are the deployment's, not a tenant's",
  "signingKeys.retireAll": "signing keys are the deployment's, not a tenant's",
  "signingKeys.lockForRotation": "signing keys are the deployment's, not a tenant's",
  "signingKeys.announceChange": "signing keys are the deployment's, not a tenant's",
  "credentialChanges.record": "the deployment's change numbers: client ids only, no tenant data",
  "credentialChanges.latest": "the deployment's change numbers: client ids only, no tenant data",
  "credentialChanges.since": "the deployment's change numbers: client ids only, no tenant data",
  "credentialChanges.prune": "the deployment's change numbers: client ids only, no tenant data",
  "credentialSnapshots.apiUserGenerations":
    "the change stream's snapshot for resource servers, which verify every tenant's tokens: client ids and generations only",
  "credentialSnapshots.unexpiredRevocations":
    "the change stream's snapshot for resource servers, which verify every tenant's tokens: jtis and expiries only",
  "securityEventPositions.lock":
    "a resource server's SET delivery position (change numbers): resource servers are the platform's, not a tenant's",
  "securityEventPositions.acknowledge":
    "a resource server's acknowledged SETs (change numbers): resource servers are the platform's, not a tenant's",
  "securityEventPositions.advance":
    "a resource server's SET delivery position (change numbers): resource servers are the platform's, not a tenant's",
  "airCredits.refreshStatisticsIfStale": "the planner's statistics of a table: no tenant data",
  "audit.searchPlatform": "the platform's own events (those of no tenant): it reads no tenant's rows",
  "resourceServers.insert": "resource servers are the platform's, not a tenant's",
  "resourceServers.claimAudiences": "resource servers are the platform's, not a tenant's",
  "resourceServers.list": "resource servers are the platform's, not a tenant's",
  "resourceServers.get": "resource servers are the platform's, not a tenant's",
  "resourceServers.findActive": "resource servers are the platform's, not a tenant's",
  "resourceServers.lockActive": "resource servers are the platform's, not a tenant's",
  "resourceServers.setCredential": "resource servers are the platform's, not a tenant's",
  "resourceServers.markRemoved": "resource servers are the platform's, not a tenant's",
  "resourceServers.registeredAudiences": "resource servers are the platform's, not a tenant's",
  "resourceServers.credentialStates": "resource servers are the platform's, not a tenant's",
};

function refreshToken(clientId: string, tokenHash: Buffer, id = crypto.randomUUID(), familyId = crypto.randomUUID()) {
  return {
    id,
    tokenHash,
    familyId,
    clientId,
    subject: clientId,
    subjectKind: "CLIENT" as const,
    scope: "openid",
    audience: "http://auth.test/v2",
    boundCredentials: [[clientId, 1] as const],
    act: { sub: "actor" },
    expiresAt: new Date(Date.now() + 3_600_000),
  };
}

const covered = new Set<string>();
const isolation = (name: string, fn: () => Promise<void>) => {
  covered.add(name);
  test(name, fn);
};

describe(`tenant isolation of every repository method (${backend})`, () => {
  const storage = newStorage();
  let database: Database;
  const repos = postgresRepositories();
  let uow: KnexUnitOfWork;
  let a: Tmc;
  let b: Tmc;
  let scopeA: TenantScope;
  let scopeB: TenantScope;
  let companyA: string;
  let companyB: string;
  let clientA: string;
  let clientB: string;
  const emailB = "b.user@b.example";

  const newApiUser = (clientId: string) => ({
    clientId,
    orgId: undefined,
    role: "TMC_ADMIN" as const,
    credentialType: "CLIENT_CREDENTIALS" as const,
    secretHash: crypto.randomBytes(32),
    createdBy: "operator",
  });

  before(async () => {
    database = openStorageDatabase(storage);
    await database.migrate();
    uow = new KnexUnitOfWork(database.db);
    const tx = uow.direct;
    a = await repos.tenants.createTmc(tx, "Tenant A", 5);
    b = await repos.tenants.createTmc(tx, "Tenant B", 5);
    scopeA = tenantScope(a.id);
    scopeB = tenantScope(b.id);
    companyA = (await repos.tenants.createCompany(tx, scopeA, "A Corp")).id;
    companyB = (await repos.tenants.createCompany(tx, scopeB, "B Corp")).id;
    await repos.tenants.createUser(tx, scopeB, companyB, {
      email: emailB,
      givenName: "B",
      familyName: "User",
      isActive: true,
    });
    clientA = `a-${crypto.randomUUID()}`;
    clientB = `b-${crypto.randomUUID()}`;
    await repos.apiUsers.insert(tx, scopeA, newApiUser(clientA));
    await repos.apiUsers.insert(tx, scopeB, newApiUser(clientB));
  });

  after(async () => {
    await database?.close();
    await dropStorage(storage);
  });

  isolation("tenants.findTmc", async () => {
    assert.equal((await repos.tenants.findTmc(uow.direct, scopeA))?.id, a.id);
    assert.equal((await repos.tenants.findTmc(uow.direct, scopeB))?.id, b.id);
  });

  isolation("tenants.lockTmc", async () => {
    await uow.transaction(async (tx) => assert.equal((await repos.tenants.lockTmc(tx, scopeA))?.id, a.id));
  });

  isolation("tenants.setApiUserLimit", async () => {
    await repos.tenants.setApiUserLimit(uow.direct, scopeA, 9);
    assert.equal((await repos.tenants.findTmc(uow.direct, scopeB))?.maxApiUsers, 5, "B's limit is untouched");
    await repos.tenants.setApiUserLimit(uow.direct, scopeA, 5);
  });

  isolation("tenants.createCompany", async () => {
    const company = await repos.tenants.createCompany(uow.direct, scopeA, "A Subsidiary");
    assert.equal(company.tmcId, a.id);
    assert.equal(await repos.tenants.findCompany(uow.direct, scopeB, company.id), undefined);
  });

  isolation("tenants.findCompany", async () => {
    assert.equal(await repos.tenants.findCompany(uow.direct, scopeA, companyB), undefined);
    assert.equal((await repos.tenants.findCompany(uow.direct, scopeB, companyB))?.id, companyB);
  });

  isolation("tenants.createUser", async () => {
    await assert.rejects(
      repos.tenants.createUser(uow.direct, scopeA, companyB, {
        email: "intruder@a.example",
        givenName: "I",
        familyName: "N",
        isActive: true,
      }),
      (error: unknown) => error instanceof DomainError && error.code === "NOT_FOUND",
    );
    assert.equal(
      await repos.tenants.findActiveUserByEmail(uow.direct, scopeB, "intruder@a.example"),
      undefined,
      "nothing was written into B",
    );
    assert.equal(await repos.tenants.findActiveUserByEmail(uow.direct, scopeA, "intruder@a.example"), undefined);
  });

  isolation("tenants.findActiveUserByEmail", async () => {
    assert.equal(await repos.tenants.findActiveUserByEmail(uow.direct, scopeA, emailB), undefined);
    assert.equal((await repos.tenants.findActiveUserByEmail(uow.direct, scopeB, emailB.toUpperCase()))?.tmcId, b.id);
  });

  isolation("tenants.findActiveUser", async () => {
    const userB = await repos.tenants.findActiveUserByEmail(uow.direct, scopeB, emailB);
    assert.ok(userB);
    assert.equal(await repos.tenants.findActiveUser(uow.direct, scopeA, userB.id), undefined);
    assert.equal((await repos.tenants.findActiveUser(uow.direct, scopeB, userB.id))?.id, userB.id);
  });

  isolation("apiUsers.insert", async () => {
    const id = `a2-${crypto.randomUUID()}`;
    await repos.apiUsers.insert(uow.direct, scopeA, newApiUser(id));
    assert.equal((await repos.apiUsers.findActive(uow.direct, id))?.tmcId, a.id);
    assert.ok(!(await repos.apiUsers.listActive(uow.direct, scopeB, { limit: 100, offset: 0 })).clientIds.includes(id));
  });

  isolation("apiUsers.countActive", async () => {
    const before = await repos.apiUsers.countActive(uow.direct, scopeB);
    await repos.apiUsers.insert(uow.direct, scopeA, newApiUser(`a3-${crypto.randomUUID()}`));
    assert.equal(await repos.apiUsers.countActive(uow.direct, scopeB), before);
  });

  isolation("apiUsers.listActive", async () => {
    const listed = await repos.apiUsers.listActive(uow.direct, scopeA, { limit: 100, offset: 0 });
    assert.ok(listed.clientIds.includes(clientA));
    assert.ok(!listed.clientIds.includes(clientB));
    assert.equal(listed.total, await repos.apiUsers.countActive(uow.direct, scopeA), "the total counts A's users only");
  });

  isolation("apiUsers.listActiveDetails", async () => {
    const page = await repos.apiUsers.listActiveDetails(uow.direct, scopeA, { limit: 100, offset: 0 });
    const listed = page.users.map((u) => u.clientId);
    assert.ok(listed.includes(clientA));
    assert.ok(!listed.includes(clientB));
    assert.equal(page.total, await repos.apiUsers.countActive(uow.direct, scopeA), "the total counts A's users only");
    assert.ok(
      (await repos.apiUsers.listActiveDetails(uow.direct, scopeB, { limit: 100, offset: 0 })).users.some(
        (u) => u.clientId === clientB,
      ),
    );
  });

  isolation("apiUsers.lockActive", async () => {
    await uow.transaction(async (tx) => {
      assert.equal(await repos.apiUsers.lockActive(tx, scopeA, clientB), undefined);
      assert.equal((await repos.apiUsers.lockActive(tx, scopeA, clientA))?.clientId, clientA);
    });
  });

  isolation("apiUsers.setCredential", async () => {
    const before = await repos.apiUsers.findActive(uow.direct, clientB);
    await repos.apiUsers.setCredential(uow.direct, scopeA, clientB, {
      secretHash: crypto.randomBytes(32),
      generation: 99,
    });
    const afterwards = await repos.apiUsers.findActive(uow.direct, clientB);
    assert.equal(afterwards?.credentialGeneration, before?.credentialGeneration);
    assert.deepEqual(afterwards?.secretHash, before?.secretHash);
  });

  isolation("apiUsers.markRevoked", async () => {
    await repos.apiUsers.markRevoked(uow.direct, scopeA, clientB);
    assert.ok(await repos.apiUsers.findActive(uow.direct, clientB), "B's API user is still active");
  });

  isolation("audit.list", async () => {
    await repos.audit.append(uow.direct, [
      {
        action: "API_USER_CREATE",
        outcome: "SUCCESS",
        actor: "operator",
        tmcId: a.id,
        targetClientId: clientA,
        debugIdentifier: "ra",
      },
      {
        action: "API_USER_CREATE",
        outcome: "SUCCESS",
        actor: "operator",
        tmcId: b.id,
        targetClientId: clientB,
        debugIdentifier: "rb",
      },
    ]);
    const listed = await repos.audit.list(uow.direct, scopeA, 100);
    assert.ok(listed.some((e) => e.debugIdentifier === "ra"));
    assert.ok(listed.every((e) => e.tmcId === a.id));
  });

  isolation("audit.search", async () => {
    await repos.audit.append(uow.direct, [
      {
        action: "SEARCHED",
        outcome: "SUCCESS",
        actor: clientB,
        tmcId: b.id,
        targetClientId: clientB,
        debugIdentifier: "sb",
      },
      {
        action: "SEARCHED",
        outcome: "SUCCESS",
        actor: clientA,
        tmcId: a.id,
        targetClientId: clientA,
        debugIdentifier: "sa",
      },
    ]);
    const all = { actions: [], clientId: undefined, since: undefined, until: undefined, beforeId: undefined };
    const ofA = await repos.audit.search(uow.direct, scopeA, { ...all, actions: ["SEARCHED"] }, 100);
    assert.deepEqual(
      ofA.map((e) => e.debugIdentifier),
      ["sa"],
    );
    assert.deepEqual(
      await repos.audit.search(uow.direct, scopeA, { ...all, clientId: clientB }, 100),
      [],
      "B's client through A",
    );
    assert.deepEqual(
      (await repos.audit.search(uow.direct, scopeB, { ...all, clientId: clientB, actions: ["SEARCHED"] }, 100)).map(
        (e) => e.debugIdentifier,
      ),
      ["sb"],
    );
  });

  test("audit.append raises a last-token time only for the API user of the event's own tenant", async () => {
    const lastIssued = async (scope: TenantScope, clientId: string) =>
      (await repos.apiUsers.listActiveDetails(uow.direct, scope, { limit: 100, offset: 0 })).users.find(
        (u) => u.clientId === clientId,
      )?.lastTokenIssuedAt;
    const issued = (tmcId: string, at: string) => ({
      action: "TOKEN_ISSUED",
      outcome: "SUCCESS" as const,
      actor: clientB,
      tmcId,
      targetClientId: clientB,
      debugIdentifier: "tb",
      occurredAt: new Date(at),
    });
    await repos.audit.append(uow.direct, [issued(b.id, "2026-11-22T10:00:00Z"), issued(a.id, "2026-11-22T11:00:00Z")]);
    assert.deepEqual(await lastIssued(scopeB, clientB), new Date("2026-11-22T10:00:00Z"), "A's event is not B's token");
    assert.equal(await lastIssued(scopeA, clientA), undefined);
  });

  describe("refresh tokens", () => {
    const hashB = crypto.randomBytes(32);
    const idB = crypto.randomUUID();
    const familyB = crypto.randomUUID();
    before(async () => {
      await repos.refreshTokens.insert(uow.direct, scopeB, refreshToken(clientB, hashB, idB, familyB));
    });
    const stateOfB = () => uow.transaction((tx) => repos.refreshTokens.lockByHash(tx, scopeB, hashB));

    isolation("refreshTokens.insert", async () => {
      const hash = crypto.randomBytes(32);
      await repos.refreshTokens.insert(uow.direct, scopeA, refreshToken(clientA, hash));
      await uow.transaction(async (tx) => {
        assert.equal(await repos.refreshTokens.lockByHash(tx, scopeB, hash), undefined);
        assert.equal((await repos.refreshTokens.lockByHash(tx, scopeA, hash))?.clientId, clientA);
      });
    });

    isolation("refreshTokens.lockByHash", async () => {
      await uow.transaction(async (tx) =>
        assert.equal(await repos.refreshTokens.lockByHash(tx, scopeA, hashB), undefined),
      );
      assert.equal((await stateOfB())?.id, idB);
    });

    isolation("refreshTokens.markUsed", async () => {
      await repos.refreshTokens.markUsed(uow.direct, scopeA, idB, new Date());
      assert.equal((await stateOfB())?.usedAt, undefined);
    });

    isolation("refreshTokens.revokeFamily", async () => {
      await repos.refreshTokens.revokeFamily(uow.direct, scopeA, familyB, new Date());
      assert.equal((await stateOfB())?.revokedAt, undefined);
    });

    isolation("refreshTokens.revokeAllOfClient", async () => {
      await repos.refreshTokens.revokeAllOfClient(uow.direct, scopeA, clientB, new Date());
      assert.equal((await stateOfB())?.revokedAt, undefined);
    });
  });

  isolation("trustedIssuers.upsert", async () => {
    const issuer = "https://idp.shared.example";
    await repos.trustedIssuers.upsert(uow.direct, scopeB, {
      issuer,
      jwksUri: "https://idp.shared.example/b",
      jwks: undefined,
      audience: "b",
      companyId: undefined,
    });
    await repos.trustedIssuers.upsert(uow.direct, scopeA, {
      issuer,
      jwksUri: "https://idp.shared.example/a",
      jwks: undefined,
      audience: "a",
      companyId: undefined,
    });
    assert.equal(
      (await repos.trustedIssuers.find(uow.direct, scopeB, issuer))?.jwksUri,
      "https://idp.shared.example/b",
      "A's upsert did not overwrite B's",
    );
  });

  isolation("trustedIssuers.find", async () => {
    await repos.trustedIssuers.upsert(uow.direct, scopeB, {
      issuer: "https://only-b.example",
      jwksUri: "https://only-b.example/jwks",
      jwks: undefined,
      audience: undefined,
      companyId: undefined,
    });
    assert.equal(await repos.trustedIssuers.find(uow.direct, scopeA, "https://only-b.example"), undefined);
  });

  isolation("trustedIssuers.list", async () => {
    await repos.trustedIssuers.upsert(uow.direct, scopeB, {
      issuer: "https://listed-b.example",
      jwksUri: "https://listed-b.example/jwks",
      jwks: undefined,
      audience: "b",
      companyId: undefined,
    });
    assert.ok(
      !(await repos.trustedIssuers.list(uow.direct, scopeA)).some((i) => i.issuer === "https://listed-b.example"),
    );
    assert.ok(
      (await repos.trustedIssuers.list(uow.direct, scopeB)).some((i) => i.issuer === "https://listed-b.example"),
    );
  });

  isolation("trustedIssuers.remove", async () => {
    await repos.trustedIssuers.upsert(uow.direct, scopeB, {
      issuer: "https://removed-b.example",
      jwksUri: "https://removed-b.example/jwks",
      jwks: undefined,
      audience: "b",
      companyId: undefined,
    });
    assert.equal(await repos.trustedIssuers.remove(uow.direct, scopeA, "https://removed-b.example"), false);
    assert.ok(
      await repos.trustedIssuers.find(uow.direct, scopeB, "https://removed-b.example"),
      "B's issuer is still trusted",
    );
    assert.equal(await repos.trustedIssuers.remove(uow.direct, scopeB, "https://removed-b.example"), true);
    assert.equal(await repos.trustedIssuers.find(uow.direct, scopeB, "https://removed-b.example"), undefined);
  });

  isolation("airCredits.insertPaymentSource", async () => {
    const source = {
      companyId: companyB,
      fopLabel: "B card",
      cardCompany: undefined,
      cardLast4: undefined,
      creditUsageType: "PERSONAL" as const,
      transferable: true,
    };
    await assert.rejects(
      repos.airCredits.insertPaymentSource(uow.direct, scopeA, source),
      (e: unknown) => e instanceof DomainError && e.code === "NOT_FOUND",
    );
    assert.ok(await repos.airCredits.insertPaymentSource(uow.direct, scopeA, { ...source, companyId: companyA }));
  });

  isolation("airCredits.insertCredits", async () => {
    const sourceB = await repos.airCredits.insertPaymentSource(uow.direct, scopeB, {
      companyId: companyB,
      fopLabel: "B card",
      cardCompany: undefined,
      cardLast4: undefined,
      creditUsageType: "PERSONAL",
      transferable: true,
    });
    const credit = {
      companyId: companyB,
      paymentSourceId: sourceB,
      travelerUserId: undefined,
      supplier: "SABRE",
      pcc: undefined,
      airlineCode: "AA",
      ticketNumber: "0010000000001",
      sourcePnr: undefined,
      totalFareAmount: "10.00",
      currencyCode: "USD",
      issueDate: "2026-01-01",
      expiryDate: "2027-01-01",
    };
    await assert.rejects(
      repos.airCredits.insertCredits(uow.direct, scopeA, [credit]),
      (e: unknown) => e instanceof DomainError && e.code === "NOT_FOUND",
    );
    assert.equal(await repos.airCredits.insertCredits(uow.direct, scopeB, [credit]), 1);
  });

  isolation("users.find", async () => {
    const userB = await repos.tenants.findActiveUserByEmail(uow.direct, scopeB, emailB);
    assert.ok(userB);
    assert.equal(await repos.users.find(uow.direct, scopeA, userB.id), undefined);
    assert.equal((await repos.users.find(uow.direct, scopeB, userB.id))?.companyId, companyB);
  });

  isolation("users.lock", async () => {
    const userB = await repos.tenants.findActiveUserByEmail(uow.direct, scopeB, emailB);
    assert.ok(userB);
    await uow.transaction(async (tx) => assert.equal(await repos.users.lock(tx, scopeA, userB.id), undefined));
    await uow.transaction(async (tx) => assert.equal((await repos.users.lock(tx, scopeB, userB.id))?.id, userB.id));
  });

  isolation("users.update", async () => {
    const userB = await repos.tenants.findActiveUserByEmail(uow.direct, scopeB, emailB);
    assert.ok(userB);
    await repos.users.update(uow.direct, scopeA, userB.id, {
      givenName: "Intruder",
      familyName: "A",
      profile: { tier: "SEAT1A" },
    });
    const untouched = await repos.users.find(uow.direct, scopeB, userB.id);
    assert.deepEqual(
      [untouched?.givenName, untouched?.familyName, untouched?.profile],
      ["B", "User", {}],
      "A's update did not reach B's user",
    );
  });

  const v3Credit = (ticketNumber: string, paymentSourceId = "") => ({
    paymentSourceId,
    ticketNumber,
    sourcePnr: undefined,
    spotnanaPnr: undefined,
    airlineCode: "AA",
    airlineName: undefined,
    totalFare: { amount: "10.00", currencyCode: "USD" },
    issueDate: "2026-01-01",
    expiryDate: "2099-01-01",
    usedDate: undefined,
    departureDate: undefined,
    segmentsAvailable: undefined,
    passengerName: undefined,
    departureCountry: undefined,
    arrivalCountry: undefined,
    ticketType: "ETICKET",
    pcc: "B1",
    status: "OPEN" as const,
    source: "SABRE",
    tripId: undefined,
    redeemVia: undefined,
    sourceOfTruth: undefined,
    owningPcc: undefined,
    creditUsageType: "PERSONAL" as const,
    email: undefined,
    fopInfo: undefined,
    fopLabel: "B label",
    previousTicket: undefined,
    fopCardAccessType: undefined,
    legalEntityName: "B entity",
  });
  const v3On = { today: "2026-01-01", airlineCodes: ["AA"] };
  const v3Filter = {
    suppliers: [],
    airlineCodes: [],
    expiryFrom: undefined,
    expiryTo: undefined,
    fopLabels: [],
    pccs: [],
    fopCardAccessTypes: [],
    legalEntityNames: [],
  };
  const sourceOfB = crypto.randomUUID();

  isolation("airCredits.upsertCredits", async () => {
    await assert.rejects(
      repos.airCredits.upsertCredits(uow.direct, scopeA, companyB, [v3Credit("9990000000001")]),
      (e: unknown) => e instanceof DomainError && e.code === "NOT_FOUND",
    );
    assert.deepEqual(
      await repos.airCredits.upsertCredits(uow.direct, scopeB, companyB, [v3Credit("9990000000001", sourceOfB)]),
      { created: 1, updated: 0 },
    );
  });

  isolation("airCredits.companyExists", async () => {
    assert.equal(await repos.airCredits.companyExists(uow.direct, scopeA, companyB), false);
    assert.equal(await repos.airCredits.companyExists(uow.direct, scopeB, companyB), true);
  });

  isolation("airCredits.listTransferable", async () => {
    await repos.airCredits.upsertCredits(uow.direct, scopeB, companyB, [v3Credit("9990000000002")]);
    const page = { offset: 0, limit: 10 };
    assert.equal(
      (await repos.airCredits.listTransferable(uow.direct, scopeA, companyB, v3On, v3Filter, page)).totalRecords,
      0,
    );
    assert.ok(
      (await repos.airCredits.listTransferable(uow.direct, scopeB, companyB, v3On, v3Filter, page)).totalRecords > 0,
    );
  });

  isolation("airCredits.transferableValues", async () => {
    await repos.airCredits.upsertCredits(uow.direct, scopeB, companyB, [v3Credit("9990000000003")]);
    assert.deepEqual(await repos.airCredits.transferableValues(uow.direct, scopeA, companyB, v3On), {
      fopLabels: [],
      pccs: [],
      legalEntityNames: [],
    });
    assert.deepEqual((await repos.airCredits.transferableValues(uow.direct, scopeB, companyB, v3On)).pccs, ["B1"]);
  });

  isolation("airCredits.lockByPaymentSource", async () => {
    await repos.airCredits.upsertCredits(uow.direct, scopeB, companyB, [v3Credit("9990000000004", sourceOfB)]);
    assert.deepEqual(await uow.transaction((tx) => repos.airCredits.lockByPaymentSource(tx, scopeA, sourceOfB)), []);
    assert.ok((await uow.transaction((tx) => repos.airCredits.lockByPaymentSource(tx, scopeB, sourceOfB))).length > 0);
  });

  isolation("airCredits.setUsageType", async () => {
    await repos.airCredits.upsertCredits(uow.direct, scopeB, companyB, [v3Credit("9990000000005", sourceOfB)]);
    await repos.airCredits.setUsageType(uow.direct, scopeA, sourceOfB, "COMPANY");
    const locked = await uow.transaction((tx) => repos.airCredits.lockByPaymentSource(tx, scopeB, sourceOfB));
    assert.ok(
      locked.every((c) => c.creditUsageType === "PERSONAL"),
      "A's change did not reach B's credits",
    );
  });

  // SCIM: confined to the tenant and one of its companies; B's company named with A's scope finds nothing.
  const scimAttrs = (userName: string) => ({
    userName,
    givenName: "S",
    familyName: "C",
    formattedName: undefined,
    displayName: undefined,
    active: true,
    externalId: undefined,
    businessInfo: { employeeId: "E-1" },
    preferredLanguage: { value: "en-GB" },
    kept: { phoneNumbers: [{ value: "+1 555 0100", type: "work" }] },
  });
  const scimUserOfB = async () => {
    const { users } = await repos.scimUsers.list(
      uow.direct,
      scopeB,
      companyB,
      { kind: "compare", attribute: "userName", op: "eq", value: emailB },
      { startIndex: 1, count: 10 },
    );
    assert.equal(users.length, 1, "B's user, seen with B's scope");
    return users[0]!;
  };

  isolation("scimUsers.list", async () => {
    const all = { startIndex: 1, count: 200 };
    assert.deepEqual(await repos.scimUsers.list(uow.direct, scopeA, companyB, undefined, all), { users: [], total: 0 });
    assert.deepEqual(
      await repos.scimUsers.list(
        uow.direct,
        scopeA,
        companyB,
        { kind: "compare", attribute: "userName", op: "eq", value: emailB },
        all,
      ),
      { users: [], total: 0 },
    );
    assert.equal(
      (
        await repos.scimUsers.list(
          uow.direct,
          scopeA,
          companyA,
          { kind: "compare", attribute: "userName", op: "sw", value: "b." },
          all,
        )
      ).total,
      0,
    );
  });

  isolation("scimUsers.find", async () => {
    const user = await scimUserOfB();
    assert.equal(await repos.scimUsers.find(uow.direct, scopeA, companyB, user.id), undefined);
    assert.equal(await repos.scimUsers.find(uow.direct, scopeA, companyA, user.id), undefined);
    assert.equal((await repos.scimUsers.find(uow.direct, scopeB, companyB, user.id))?.id, user.id);
  });

  isolation("scimUsers.lock", async () => {
    const user = await scimUserOfB();
    await uow.transaction(async (tx) =>
      assert.equal(await repos.scimUsers.lock(tx, scopeA, companyB, user.id), undefined),
    );
  });

  isolation("scimUsers.insert", async () => {
    await assert.rejects(
      repos.scimUsers.insert(uow.direct, scopeA, companyB, scimAttrs("scim.intruder@a.example")),
      (e: unknown) => e instanceof DomainError && e.code === "NOT_FOUND",
    );
    assert.equal(
      (await repos.scimUsers.list(uow.direct, scopeB, companyB, undefined, { startIndex: 1, count: 200 })).users.some(
        (u) => u.userName === "scim.intruder@a.example",
      ),
      false,
    );
    // The same userName in another company (here another tenant's) is no conflict.
    assert.equal((await repos.scimUsers.insert(uow.direct, scopeA, companyA, scimAttrs(emailB))).tmcId, a.id);
  });

  isolation("scimUsers.update", async () => {
    const user = await scimUserOfB();
    assert.equal(
      await repos.scimUsers.update(uow.direct, scopeA, companyB, user.id, scimAttrs("taken.over@a.example")),
      undefined,
    );
    assert.equal(
      (await repos.scimUsers.find(uow.direct, scopeB, companyB, user.id))?.userName,
      emailB,
      "B's user unchanged",
    );
  });

  isolation("scimUsers.markDeleted", async () => {
    const user = await scimUserOfB();
    assert.equal(await repos.scimUsers.markDeleted(uow.direct, scopeA, companyB, user.id), false);
    assert.equal(
      (await repos.scimUsers.find(uow.direct, scopeB, companyB, user.id))?.active,
      true,
      "B's user still there and active",
    );
  });

  test("every repository method is either tested under two tenants above or listed as unscoped with its reason", () => {
    const missing: string[] = [];
    for (const [name, repository] of Object.entries(repos)) {
      for (const method of Object.getOwnPropertyNames(Object.getPrototypeOf(repository))) {
        if (method === "constructor") continue;
        const key = `${name}.${method}`;
        if (!covered.has(key) && !(key in UNSCOPED)) missing.push(key);
      }
    }
    assert.deepEqual(missing, [], "repository methods with neither an isolation test nor a reason to be unscoped");
  });
});
