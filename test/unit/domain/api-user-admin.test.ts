import assert from "node:assert/strict";
import crypto from "node:crypto";
import { beforeEach, describe, test } from "node:test";
import type { ApiUserAdminCaller } from "../../../src/domain/api-users/model.js";
import { tenantScope } from "../../../src/domain/shared/tenant-scope.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import {
  auditOf,
  createPgliteFixture,
  newApiUser,
  newTenant,
  postCredentials,
  storedApiUser,
  tokenRequest,
  type PgliteDomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";

const invalidClient = { code: "INVALID_CLIENT", message: "Client authentication failed" } as const;
const notFoundApiUser = (clientId: string) =>
  ({ code: "NOT_FOUND", message: "API user not found", params: [{ name: "clientId", value: clientId }] }) as const;

describe("ApiUserAdmin", () => {
  let f: PgliteDomainFixture;
  let tmcId: string;
  let orgId: string;
  let admin: ProvisionedApiUser;
  let caller: ApiUserAdminCaller;
  beforeEach(async () => {
    f = await createPgliteFixture();
    ({ tmcId, orgId } = await newTenant(f, 10));
    admin = await newApiUser(f, tmcId);
    caller = { clientId: admin.clientId, tmcId };
  });

  /** Client authentication as the token endpoint runs it: look the client up, then verify the secret. */
  const authenticate = async (presented: ReturnType<typeof postCredentials>) =>
    f.clients.verify(await f.clients.lookUp(presented));

  /** The stored row, tombstones included. */
  const apiUserRow = (clientId: string) => storedApiUser(f.store.db, clientId);
  const apiUserCount = async () => Number((await f.store.db("api_users").count({ n: "*" }).first())!.n);
  const refreshTokenRevokedAt = async (id: string) =>
    ((await f.store.db("refresh_tokens").where({ id }).first()) as { revoked_at: Date | null }).revoked_at ?? undefined;

  /**
   * The repository writes of the last calls of `methods`, in order, and whether they all ran in
   * one transaction (the same Tx, not \`direct\`).
   */
  const writesOf = (methods: readonly string[]) => {
    const calls = f.store.invocations.filter((i) => methods.includes(i.method)).slice(-methods.length);
    const txs = new Set(calls.map((c) => c.args[0]));
    return {
      methods: calls.map((c) => c.method),
      oneTransaction: txs.size === 1 && !txs.has(f.uow.direct),
    };
  };

  const refreshTokenOf = (clientId: string, id: string) =>
    f.repos.refreshTokens.insert(f.uow.direct, tenantScope(tmcId), {
      id,
      tokenHash: crypto.randomBytes(32),
      familyId: `family-${id}`,
      clientId,
      subject: clientId,
      subjectKind: "CLIENT",
      scope: "openid",
      audience: "http://auth.test/v2",
      boundCredentials: [[clientId, 1]],
      act: { sub: "actor" },
      expiresAt: new Date("2027-01-01T00:00:00Z"),
    });

  describe("create", () => {
    test("tmcId defaults to the caller's TMC; the caller is the audit actor", async () => {
      const created = await f.admin.create(
        caller,
        { tmcId: undefined, orgId: undefined, role: "TMC_ADMIN", credentialType: "CLIENT_CREDENTIALS" },
        "req-c",
      );
      assert.equal((await apiUserRow(created.clientId))?.tmcId, tmcId);
      assert.equal((await apiUserRow(created.clientId))?.createdBy, admin.clientId);
      const [event] = await auditOf(f, tmcId);
      assert.deepEqual(
        [event?.action, event?.actor, event?.targetClientId, event?.debugIdentifier],
        ["API_USER_CREATE", admin.clientId, created.clientId, "req-c"],
      );
    });

    test("another TMC's tmcId is 403, and nothing is written", async () => {
      const other = await newTenant(f);
      const before = await apiUserCount();
      await rejectsWith(
        f.admin.create(
          caller,
          { tmcId: other.tmcId, orgId: undefined, role: "TMC_ADMIN", credentialType: "CLIENT_CREDENTIALS" },
          "r",
        ),
        {
          code: "PERMISSION_DENIED",
          message: "A TMC admin may create API users only for its own TMC",
        },
      );
      // Naming the other TMC's company under the caller's own TMC is a 404, not a way in.
      await rejectsWith(
        f.admin.create(
          caller,
          { tmcId: undefined, orgId: other.orgId, role: "COMPANY_ADMIN", credentialType: "CLIENT_CREDENTIALS" },
          "r",
        ),
        {
          code: "NOT_FOUND",
          message: "Organization not found",
          params: [{ name: "orgId", value: other.orgId }],
        },
      );
      assert.equal(await apiUserCount(), before);
    });

    test("the provisioning rules apply through the admin too (SCIM_TOKEN needs COMPANY_ADMIN)", async () => {
      await rejectsWith(
        f.admin.create(caller, { tmcId, orgId, role: "TMC_ADMIN", credentialType: "SCIM_TOKEN" }, "r"),
        {
          code: "API_VALIDATION_FAILED",
          message: "credentialType SCIM_TOKEN requires role COMPANY_ADMIN",
          params: [
            { name: "credentialType", value: "SCIM_TOKEN" },
            { name: "role", value: "TMC_ADMIN" },
          ],
        },
      );
    });
  });

  describe("list", () => {
    test("active users of the caller's TMC by creation, paged, with the total of all active users", async () => {
      const others: string[] = [];
      for (let i = 0; i < 4; i++) others.push((await newApiUser(f, tmcId)).clientId);
      const all = [admin.clientId, ...others];
      const foreign = await newTenant(f);
      await newApiUser(f, foreign.tmcId);

      assert.deepEqual(await f.admin.list(caller, 100, 0), { clientIds: all, totalCount: 5 });
      assert.deepEqual(await f.admin.list(caller, 2, 0), { clientIds: all.slice(0, 2), totalCount: 5 });
      assert.deepEqual(await f.admin.list(caller, 2, 2), { clientIds: all.slice(2, 4), totalCount: 5 });
      assert.deepEqual(await f.admin.list(caller, 2, 4), { clientIds: all.slice(4), totalCount: 5 });
      assert.deepEqual(await f.admin.list(caller, 2, 10), { clientIds: [], totalCount: 5 });
      assert.deepEqual(
        await f.admin.list(caller, 0, 0),
        { clientIds: [], totalCount: 5 },
        "limit 0 counts without listing",
      );

      await f.admin.revoke(caller, others[1]!, "r");
      assert.deepEqual(await f.admin.list(caller, 100, 0), {
        clientIds: all.filter((id) => id !== others[1]),
        totalCount: 4,
      });
    });
  });

  describe("rotate", () => {
    test("a new secret, generation + 1, numbered in the transaction, published after the commit and before answering; the old secret and its tokens die at once", async () => {
      const target = await newApiUser(f, tmcId);
      const oldToken = (await f.tokenService.grant(target.user, tokenRequest())).accessToken;
      assert.equal((await f.accessTokens.verify(oldToken)).clientId, target.clientId, "cache filled with generation 1");
      assert.deepEqual(f.cache.states.get(target.clientId), { generation: 1, changeSeq: 0 });

      let atPublication: { committed: boolean; announced: readonly number[] } | undefined;
      f.cache.beforeWrite = (states) => {
        if (states.has(target.clientId))
          atPublication ??= {
            committed: f.store.uow.transactions.at(-1)?.outcome === "committed",
            announced: [...f.feed.delivered],
          };
      };
      const startedAt = Date.now();
      const rotated = await f.admin.rotate(caller, target.clientId, "req-rot");
      const endedAt = Date.now();
      f.cache.beforeWrite = undefined;

      assert.equal(rotated.clientId, target.clientId);
      assert.equal(rotated.scimToken, undefined);
      assert.notEqual(rotated.clientSecret, target.secret);
      assert.equal((await apiUserRow(target.clientId))?.credentialGeneration, 2);
      // rotated_at is stamped by the database's clock (now()), not the domain's: during the call.
      const rotatedAt = (await apiUserRow(target.clientId))?.rotatedAt?.getTime() ?? 0;
      assert.ok(rotatedAt >= startedAt && rotatedAt <= endedAt, "rotated during the call");
      assert.equal((await apiUserRow(target.clientId))?.changeSeq, 1, "the row carries the change's number");
      assert.deepEqual(
        writesOf(["apiUsers.setCredential", "audit.append", "credentialChanges.record"]),
        {
          methods: ["apiUsers.setCredential", "audit.append", "credentialChanges.record"],
          oneTransaction: true,
        },
        "one transaction",
      );
      assert.equal(f.store.uow.transactions.at(-1)?.outcome, "committed");
      assert.deepEqual(atPublication, { committed: true, announced: [1] }, "published once committed and announced");
      assert.deepEqual(f.store.notified, ["1"], "the database announced the change's number once");
      assert.deepEqual(
        f.cache.writes.map((w) => [[...w.states], w.watermark]),
        [
          [[[target.clientId, { generation: 1, changeSeq: 0 }]], undefined],
          [[[target.clientId, { generation: 2, changeSeq: 1 }]], { to: 1, ifAtLeast: 0 }],
        ],
        "the fill of the first verification (no watermark), then the publication raising the watermark to its number from the change before it",
      );
      assert.equal(f.cache.watermark, 1);

      await rejectsWith(authenticate(postCredentials(target.clientId, target.secret)), invalidClient);
      assert.equal(
        (await authenticate(postCredentials(target.clientId, rotated.clientSecret!))).credentialGeneration,
        2,
      );
      await rejectsWith(f.accessTokens.verify(oldToken), {
        code: "USER_NOT_AUTHENTICATED",
        message: "The access token has been revoked",
      });

      const [event] = await auditOf(f, tmcId);
      assert.deepEqual(
        { ...event, occurredAt: undefined },
        {
          action: "API_USER_ROTATE",
          outcome: "SUCCESS",
          actor: admin.clientId,
          tmcId,
          targetClientId: target.clientId,
          debugIdentifier: "req-rot",
          details: {},
          occurredAt: undefined,
        },
      );
      assert.equal(JSON.stringify(await auditOf(f, tmcId)).includes(rotated.clientSecret!), false);
    });

    test("a SCIM-token user gets a new SCIM token; the old one stops authenticating", async () => {
      const scimUser = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", credentialType: "SCIM_TOKEN", orgId });
      const rotated = await f.admin.rotate(caller, scimUser.clientId, "r");
      assert.equal(rotated.clientSecret, undefined);
      assert.notEqual(rotated.scimToken, scimUser.scimToken);
      assert.equal((await f.scim.authenticate(rotated.scimToken!)).credentialGeneration, 2);
      await rejectsWith(f.scim.authenticate(scimUser.scimToken!), {
        code: "USER_NOT_AUTHENTICATED",
        message: "A valid SCIM token is required",
      });
    });

    test("the commit fails: nothing is announced, nothing is published, nothing else changed", async () => {
      const target = await newApiUser(f, tmcId);
      const token = (await f.tokenService.grant(target.user, tokenRequest())).accessToken;
      await f.accessTokens.verify(token);
      const cacheWrites = f.cache.writes.length;
      f.store.uow.failNextCommit(new Error("connection reset at commit"));
      await assert.rejects(f.admin.rotate(caller, target.clientId, "r"), { message: "connection reset at commit" });
      assert.equal(f.cache.writes.length, cacheWrites, "no write reached the cache");
      assert.deepEqual(f.cache.states.get(target.clientId), { generation: 1, changeSeq: 0 });
      assert.deepEqual([f.store.notified, f.feed.delivered], [[], []], "a rolled-back change is never announced");
      assert.equal(await f.repos.credentialChanges.latest(f.uow.direct), 0);
      assert.deepEqual(
        [(await apiUserRow(target.clientId))?.credentialGeneration, (await apiUserRow(target.clientId))?.changeSeq],
        [1, 0],
      );
      assert.equal((await f.accessTokens.verify(token)).clientId, target.clientId, "its tokens stay valid");
      assert.equal(
        (await authenticate(postCredentials(target.clientId, target.secret))).clientId,
        target.clientId,
        "the old secret still works",
      );
      assert.deepEqual(
        (await auditOf(f, tmcId)).map((e) => e.action),
        ["API_USER_CREATE", "API_USER_CREATE"],
        "only the creations",
      );
    });

    test("a publication that fails after the commit (even reading the committed state) never fails the rotation: the caller gets its new secret", async () => {
      const target = await newApiUser(f, tmcId);
      f.store.failNext("apiUsers.credentialStates", new Error("connection terminated unexpectedly"));
      const rotated = await f.admin.rotate(caller, target.clientId, "r");
      assert.equal((await apiUserRow(target.clientId))?.credentialGeneration, 2, "committed");
      assert.deepEqual(f.fallbacks.increments, [{ operation: "write" }], "counted as a failed publication");
      assert.equal(
        (await authenticate(postCredentials(target.clientId, rotated.clientSecret!))).credentialGeneration,
        2,
        "the new secret works",
      );
      await rejectsWith(authenticate(postCredentials(target.clientId, target.secret)), invalidClient);
    });

    test("a failed audit write rolls the rotation back", async () => {
      const target = await newApiUser(f, tmcId);
      f.store.failNext("audit.append", new Error("audit down"));
      await assert.rejects(f.admin.rotate(caller, target.clientId, "r"), { message: "audit down" });
      assert.equal((await apiUserRow(target.clientId))?.credentialGeneration, 1);
      assert.equal((await apiUserRow(target.clientId))?.secretHash.equals(target.user.secretHash), true);
      assert.equal(f.store.uow.transactions.at(-1)?.outcome, "rolled back");
      assert.equal(f.store.calls.includes("credentialChanges.record"), false, "never numbered");
      assert.equal(await f.repos.credentialChanges.latest(f.uow.direct), 0);
      assert.deepEqual([f.store.notified, f.cache.writes], [[], []], "never announced, never published");
    });
  });

  describe("setDpopPolicy", () => {
    test("a change is a new generation (secret kept), audited with the policy and published in one transaction; the policy in force changes nothing", async () => {
      const target = await newApiUser(f, tmcId);
      const before = await apiUserRow(target.clientId);
      assert.equal(await f.admin.setDpopPolicy(caller, target.clientId, true, "req-dpop"), true);
      const after = await apiUserRow(target.clientId);
      assert.equal(after?.credentialGeneration, 2);
      assert.deepEqual(after?.secretHash, before?.secretHash, "the secret stays");
      assert.equal((await f.repos.apiUsers.findActive(f.uow.direct, target.clientId))?.dpopBoundAccessTokens, true);
      assert.deepEqual(
        writesOf(["apiUsers.setCredential", "audit.append", "credentialChanges.record"]).oneTransaction,
        true,
      );
      assert.deepEqual(f.store.notified, ["1"], "the change is announced");
      const [event] = await auditOf(f, tmcId);
      assert.deepEqual([event?.action, event?.details], ["API_USER_DPOP_POLICY_SET", { dpopBoundAccessTokens: true }]);
      assert.equal(
        (await authenticate(postCredentials(target.clientId, target.secret))).credentialGeneration,
        2,
        "the same secret authenticates, under the new generation",
      );

      const audited = (await auditOf(f, tmcId)).length;
      assert.equal(await f.admin.setDpopPolicy(caller, target.clientId, true, "again"), true);
      assert.equal((await apiUserRow(target.clientId))?.credentialGeneration, 2, "no new generation");
      assert.equal((await auditOf(f, tmcId)).length, audited, "nothing audited");
      assert.deepEqual(f.store.notified, ["1"], "nothing announced");
    });

    test("a SCIM-token user's policy cannot be set; another TMC's user is NOT_FOUND", async () => {
      const scimUser = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", credentialType: "SCIM_TOKEN", orgId });
      await rejectsWith(f.admin.setDpopPolicy(caller, scimUser.clientId, true, "r"), {
        code: "API_VALIDATION_FAILED",
        message: "Only a CLIENT_CREDENTIALS API user uses the token endpoint",
        params: [{ name: "clientId", value: "not a client-credentials API user" }],
      });
      const other = await newTenant(f, 10);
      const stranger = await newApiUser(f, other.tmcId);
      await rejectsWith(
        f.admin.setDpopPolicy(caller, stranger.clientId, true, "r"),
        notFoundApiUser(stranger.clientId),
      );
    });
  });

  describe("revoke", () => {
    test("permanent: a tombstone, its refresh tokens revoked, 'revoked' published, an audit event; then 404 for ever", async () => {
      const target = await newApiUser(f, tmcId);
      const bystander = await newApiUser(f, tmcId);
      await refreshTokenOf(target.clientId, "rt-target");
      await refreshTokenOf(bystander.clientId, "rt-bystander");
      f.clock.advanceSeconds(60);

      const startedAt = Date.now();
      await f.admin.revoke(caller, target.clientId, "req-rev");
      const endedAt = Date.now();

      const row = (await apiUserRow(target.clientId))!;
      // api_users.revoked_at is stamped by the database's clock (now()): during the call. The
      // refresh tokens' revoked_at is the domain's clock.
      const revokedAt = row.revokedAt?.getTime() ?? 0;
      assert.ok(revokedAt >= startedAt && revokedAt <= endedAt, "revoked during the call");
      assert.equal((await refreshTokenRevokedAt("rt-target"))?.toISOString(), "2026-11-22T10:01:00.000Z");
      assert.equal(await refreshTokenRevokedAt("rt-bystander"), undefined);
      assert.deepEqual(f.cache.states.get(target.clientId), { generation: undefined, changeSeq: 1 });
      assert.equal(f.cache.watermark, 1);
      assert.equal((await apiUserRow(target.clientId))?.changeSeq, 1);
      assert.deepEqual(
        writesOf([
          "apiUsers.markRevoked",
          "refreshTokens.revokeAllOfClient",
          "audit.append",
          "credentialChanges.record",
        ]),
        {
          methods: [
            "apiUsers.markRevoked",
            "refreshTokens.revokeAllOfClient",
            "audit.append",
            "credentialChanges.record",
          ],
          oneTransaction: true,
        },
        "one transaction",
      );
      assert.equal(f.store.uow.transactions.at(-1)?.outcome, "committed");
      const [event] = await auditOf(f, tmcId);
      assert.deepEqual(
        [event?.action, event?.actor, event?.targetClientId, event?.debugIdentifier],
        ["API_USER_REVOKE", admin.clientId, target.clientId, "req-rev"],
      );

      await rejectsWith(authenticate(postCredentials(target.clientId, target.secret)), invalidClient);
      await rejectsWith(f.admin.revoke(caller, target.clientId, "r"), notFoundApiUser(target.clientId));
      await rejectsWith(f.admin.rotate(caller, target.clientId, "r"), notFoundApiUser(target.clientId));
      assert.equal((await apiUserRow(target.clientId))?.revokedAt?.getTime(), revokedAt, "still the same tombstone");
    });

    test("an admin may revoke itself, even as the TMC's last admin; its own token dies with it", async () => {
      const token = (await f.tokenService.grant(admin.user, tokenRequest())).accessToken;
      await f.admin.revoke(caller, admin.clientId, "r");
      await rejectsWith(f.accessTokens.verify(token), {
        code: "USER_NOT_AUTHENTICATED",
        message: "The access token has been revoked",
      });
      assert.deepEqual(await f.admin.list(caller, 100, 0), { clientIds: [], totalCount: 0 });
    });

    test("a failed commit leaves the user active, and publishes and announces nothing", async () => {
      const target = await newApiUser(f, tmcId);
      await refreshTokenOf(target.clientId, "rt-1");
      await f.generations.current([target.clientId]);
      const cacheWrites = f.cache.writes.length;
      f.store.uow.failNextCommit(new Error("commit failed"));
      await assert.rejects(f.admin.revoke(caller, target.clientId, "r"), { message: "commit failed" });
      assert.equal((await apiUserRow(target.clientId))?.revokedAt, undefined);
      assert.equal(await refreshTokenRevokedAt("rt-1"), undefined);
      assert.equal(f.cache.writes.length, cacheWrites);
      assert.deepEqual(f.cache.states.get(target.clientId), { generation: 1, changeSeq: 0 });
      assert.deepEqual([f.store.notified, f.feed.delivered], [[], []]);
      assert.deepEqual(
        (await auditOf(f, tmcId)).map((e) => e.action),
        ["API_USER_CREATE", "API_USER_CREATE"],
        "only the creations",
      );
    });
  });

  describe("tenants", () => {
    test("another TMC's API user is NOT_FOUND on rotate and revoke, exactly like an unknown id, and stays untouched", async () => {
      const foreign = await newTenant(f);
      const theirs = await newApiUser(f, foreign.tmcId);
      const unknown = "nosuchclientnosuchclient26";
      const errors = [];
      for (const clientId of [theirs.clientId, unknown]) {
        errors.push(await rejectsWith(f.admin.rotate(caller, clientId, "r"), notFoundApiUser(clientId)));
        errors.push(await rejectsWith(f.admin.revoke(caller, clientId, "r"), notFoundApiUser(clientId)));
      }
      // Same code, same message, same shape: only the echoed clientId differs.
      assert.equal(new Set(errors.map((e) => `${e.code}|${e.message}|${e.params.map((p) => p.name).join()}`)).size, 1);
      const row = (await apiUserRow(theirs.clientId))!;
      assert.deepEqual([row.credentialGeneration, row.revokedAt], [1, undefined]);
      assert.equal((await authenticate(postCredentials(theirs.clientId, theirs.secret))).clientId, theirs.clientId);
      assert.deepEqual(await auditOf(f, foreign.tmcId).then((events) => events.map((e) => e.action)), [
        "API_USER_CREATE",
      ]);
    });

    // Was a src bug (changeCredential's failure path re-published the database's committed value
    // over a concurrent publication). Now a failed change publishes nothing: another TMC's
    // NOT_FOUND rotate, landing at any point of a revocation, cannot bring the old generation back.
    // "Inside the revocation's transaction" needs a second transaction while the revocation's is
    // open, which PGlite's one connection cannot run: test/store/domain-interleavings.test.ts.
    for (const moment of ["between its commit and its publication", "after its publication"] as const) {
      test(`another TMC's failed rotate ${moment} does not undo the revocation`, async () => {
        const foreign = await newTenant(f);
        const theirAdmin = await newApiUser(f, foreign.tmcId);
        const victim = await newApiUser(f, foreign.tmcId);
        const token = (await f.tokenService.grant(victim.user, tokenRequest())).accessToken;
        assert.equal((await f.accessTokens.verify(token)).clientId, victim.clientId, "the cache holds generation 1");
        let interfered = false;
        const interfere = async () => {
          interfered = true;
          const writes = f.cache.writes.length;
          await rejectsWith(f.admin.rotate(caller, victim.clientId, "r"), notFoundApiUser(victim.clientId));
          assert.equal(f.cache.writes.length, writes, "the failed rotate wrote nothing to the cache");
        };
        if (moment === "between its commit and its publication") {
          f.cache.beforeWrite = async () => {
            f.cache.beforeWrite = undefined;
            await interfere();
          };
        }
        await f.admin.revoke({ clientId: theirAdmin.clientId, tmcId: foreign.tmcId }, victim.clientId, "r");
        if (moment === "after its publication") await interfere();
        assert.equal(interfered, true);
        assert.ok((await apiUserRow(victim.clientId))?.revokedAt, "the revocation committed");
        await rejectsWith(f.accessTokens.verify(token), {
          code: "USER_NOT_AUTHENTICATED",
          message: "The access token has been revoked",
        });
        assert.deepEqual(
          f.cache.states.get(victim.clientId),
          { generation: undefined, changeSeq: 1 },
          "the cache still says revoked",
        );
      });
    }
  });
});
