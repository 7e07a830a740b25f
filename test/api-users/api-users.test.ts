import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { accessToken, callApi, fetchToken } from "../helpers/api.js";
import { isPostgres, newStorage } from "../helpers/backend.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";

interface Tenant {
  tmcId: string;
  orgId: string;
  admin: { clientId: string; clientSecret: string };
  token: string;
}

async function newTenant(baseUrl: string, name: string): Promise<Tenant> {
  const { tmcId } = await operatorCall<{ tmcId: string }>(baseUrl, "CreateTmc", { name, maxApiUsers: 50 });
  const { orgId } = await operatorCall<{ orgId: string }>(baseUrl, "CreateCompany", { tmcId, name: `${name} company` });
  const admin = await operatorCall<{ clientId: string; clientSecret: string }>(baseUrl, "CreateApiUser", { tmcId });
  return { tmcId, orgId, admin, token: await accessToken(baseUrl, admin.clientId, admin.clientSecret) };
}

describe("API users: rules, tenant isolation, secrets", () => {
  let running: RunningService;
  let a: Tenant;
  let b: Tenant;
  before(async () => {
    running = await startService({ env: { LOG_LEVEL: "trace" } });
    [a, b] = await Promise.all([newTenant(running.baseUrl, "TMC A"), newTenant(running.baseUrl, "TMC B")]);
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });
  const list = async (t: Tenant) =>
    (await (await callApi(running.baseUrl, "/v2/api-users?limit=100", t.token)).json()) as {
      apiUsers: Array<{ clientId: string }>;
      totalCount: number;
    };

  test("create: defaults, orgId rules, SCIM needs COMPANY_ADMIN, and the secret is shown once", async () => {
    const plain = await callApi(running.baseUrl, "/v2/api-users", a.token, {});
    assert.equal(plain.status, 200);
    const created = (await plain.json()) as Record<string, string>;
    assert.deepEqual(Object.keys(created).sort(), ["clientId", "clientSecret"]);
    const scim = (await (
      await callApi(running.baseUrl, "/v2/api-users", a.token, {
        orgId: a.orgId,
        role: "COMPANY_ADMIN",
        credentialType: "SCIM_TOKEN",
      })
    ).json()) as Record<string, string>;
    assert.deepEqual(Object.keys(scim).sort(), ["clientId", "scimToken"]);
    const badScim = await callApi(running.baseUrl, "/v2/api-users", a.token, { credentialType: "SCIM_TOKEN" });
    assert.equal(badScim.status, 400);
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users", a.token, { role: "COMPANY_ADMIN" })).status,
      400,
      "COMPANY_ADMIN needs orgId",
    );
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users", a.token, { orgId: b.orgId })).status,
      404,
      "another TMC's company",
    );
    const page = await list(a);
    assert.ok(page.apiUsers.some((u) => u.clientId === created.clientId));
    assert.equal(JSON.stringify(page).includes(created.clientSecret!), false, "never listed");
  });

  test("tenant isolation: TMC A's admin on TMC B's users is refused, changes nothing, learns nothing", async () => {
    const bUser = (await (await callApi(running.baseUrl, "/v2/api-users", b.token, {})).json()) as {
      clientId: string;
      clientSecret: string;
    };
    const bToken = await accessToken(running.baseUrl, bUser.clientId, bUser.clientSecret);
    const before = await list(b);

    const create = await callApi(running.baseUrl, "/v2/api-users", a.token, { tmcId: b.tmcId });
    assert.equal(create.status, 403);
    const unknown = "zzzzzzzzzzzzzzzzzzzzzzzzzz";
    for (const path of ["/v2/api-users/rotate", "/v2/api-users/revoke"]) {
      const cross = await callApi(running.baseUrl, path, a.token, { clientId: bUser.clientId });
      const missing = await callApi(running.baseUrl, path, a.token, { clientId: unknown });
      assert.equal(cross.status, 404, path);
      const [crossBody, missingBody] = [(await cross.json()) as any, (await missing.json()) as any];
      // Same answer as for a clientId that does not exist: existence is not revealed.
      assert.deepEqual(
        { ...crossBody.errorMessages[0], errorParameters: [] },
        { ...missingBody.errorMessages[0], errorParameters: [] },
      );
    }
    const aPage = await list(a);
    assert.equal(
      aPage.apiUsers.some((u) => u.clientId === bUser.clientId),
      false,
      "A's list never shows B's users",
    );
    assert.deepEqual(await list(b), before, "B's users unchanged");
    assert.equal((await callApi(running.baseUrl, "/v2/api-users", bToken)).status, 200, "B's token still works");
    assert.equal(
      (await fetchToken(running.baseUrl, bUser.clientId, bUser.clientSecret)).status,
      200,
      "B's secret still works",
    );
  });

  test("COMPANY_ADMIN tokens and SCIM tokens are refused on every management operation", async () => {
    const companyAdmin = (await (
      await callApi(running.baseUrl, "/v2/api-users", a.token, { orgId: a.orgId, role: "COMPANY_ADMIN" })
    ).json()) as { clientId: string; clientSecret: string };
    const companyToken = await accessToken(running.baseUrl, companyAdmin.clientId, companyAdmin.clientSecret);
    const scim = (await (
      await callApi(running.baseUrl, "/v2/api-users", a.token, {
        orgId: a.orgId,
        role: "COMPANY_ADMIN",
        credentialType: "SCIM_TOKEN",
      })
    ).json()) as { scimToken: string };
    const operations: Array<[string, object | undefined]> = [
      ["/v2/api-users", {}],
      ["/v2/api-users?limit=1", undefined],
      ["/v2/api-users/rotate", { clientId: a.admin.clientId }],
      ["/v2/api-users/revoke", { clientId: a.admin.clientId }],
    ];
    for (const [path, body] of operations) {
      assert.equal((await callApi(running.baseUrl, path, companyToken, body)).status, 403, `COMPANY_ADMIN ${path}`);
      assert.equal((await callApi(running.baseUrl, path, scim.scimToken, body)).status, 401, `SCIM token ${path}`);
    }
    assert.equal(
      (await fetchToken(running.baseUrl, a.admin.clientId, a.admin.clientSecret)).status,
      200,
      "the admin was not touched",
    );
  });

  test("list: pagination, stable order, totalCount over all pages, bounds", async () => {
    const t = await newTenant(running.baseUrl, "TMC pages");
    const ids = [t.admin.clientId];
    for (let i = 0; i < 4; i++)
      ids.push(
        ((await (await callApi(running.baseUrl, "/v2/api-users", t.token, {})).json()) as { clientId: string })
          .clientId,
      );
    const page = async (q: string) =>
      (await (await callApi(running.baseUrl, `/v2/api-users?${q}`, t.token)).json()) as any;
    assert.deepEqual(
      (await page("limit=100")).apiUsers.map((u: any) => u.clientId),
      ids,
      "creation order",
    );
    assert.deepEqual(await page("limit=2&offset=1"), {
      apiUsers: ids.slice(1, 3).map((clientId) => ({ clientId })),
      totalCount: 5,
    });
    assert.deepEqual(await page("limit=0"), { apiUsers: [], totalCount: 5 });
    assert.deepEqual(await page("offset=10"), { apiUsers: [], totalCount: 5 });
    for (const q of ["limit=101", "limit=-1", "offset=-1", "limit=ten"]) {
      assert.equal((await callApi(running.baseUrl, `/v2/api-users?${q}`, t.token)).status, 400, q);
    }
  });

  test("rotate and revoke: permanent, idempotence answered with 404, freed slots, no secret in the logs", async () => {
    const t = await newTenant(running.baseUrl, "TMC lifecycle");
    const user = (await (await callApi(running.baseUrl, "/v2/api-users", t.token, {})).json()) as {
      clientId: string;
      clientSecret: string;
    };
    const rotated = (await (
      await callApi(running.baseUrl, "/v2/api-users/rotate", t.token, { clientId: user.clientId })
    ).json()) as { clientId: string; clientSecret: string };
    assert.equal(rotated.clientId, user.clientId);
    assert.notEqual(rotated.clientSecret, user.clientSecret);
    assert.equal((await fetchToken(running.baseUrl, user.clientId, user.clientSecret)).status, 403);
    assert.equal((await fetchToken(running.baseUrl, user.clientId, rotated.clientSecret)).status, 200);

    const revoked = await callApi(running.baseUrl, "/v2/api-users/revoke", t.token, { clientId: user.clientId });
    assert.equal(revoked.status, 204);
    assert.equal(await revoked.text(), "");
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users/revoke", t.token, { clientId: user.clientId })).status,
      404,
    );
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users/rotate", t.token, { clientId: user.clientId })).status,
      404,
    );
    assert.equal((await fetchToken(running.baseUrl, user.clientId, rotated.clientSecret)).status, 403);
    assert.equal(
      (await list(t)).apiUsers.some((u) => u.clientId === user.clientId),
      false,
    );

    const logs = running.logs();
    for (const secret of [user.clientSecret, rotated.clientSecret, a.admin.clientSecret])
      assert.equal(logs.includes(secret), false);
  });

  test("the limit: 409 API_USER_LIMIT_EXCEEDED with limit and count; revoking frees a slot", async () => {
    const { tmcId } = await operatorCall<{ tmcId: string }>(running.baseUrl, "CreateTmc", {
      name: "TMC small",
      maxApiUsers: 2,
    });
    const admin = await operatorCall<{ clientId: string; clientSecret: string }>(running.baseUrl, "CreateApiUser", {
      tmcId,
    });
    const token = await accessToken(running.baseUrl, admin.clientId, admin.clientSecret);
    const second = (await (await callApi(running.baseUrl, "/v2/api-users", token, {})).json()) as { clientId: string };
    const full = await callApi(running.baseUrl, "/v2/api-users", token, {});
    assert.equal(full.status, 409);
    const body = (await full.json()) as any;
    assert.equal(body.errorMessages[0].errorCode, "API_USER_LIMIT_EXCEEDED");
    assert.deepEqual(body.errorMessages[0].errorParameters, [
      { name: "limit", value: "2" },
      { name: "currentCount", value: "2" },
    ]);
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users/revoke", token, { clientId: second.clientId })).status,
      204,
    );
    assert.equal(
      (await callApi(running.baseUrl, "/v2/api-users", token, {})).status,
      200,
      "the revoked user's slot is free",
    );
  });
});

describe("20 simultaneous creates over two instances", { skip: !isPostgres && "needs a shared Postgres" }, () => {
  const storage = newStorage();
  let one: RunningService;
  let two: RunningService;
  before(async () => {
    [one, two] = await Promise.all([startService({ storage }), startService({ storage })]);
  });
  after(async () => {
    await Promise.all([one?.stop(), two?.stop()]);
    await dropStorage(storage);
  });

  test("exactly as many succeed as there are free slots; the rest get 409", async () => {
    const { tmcId } = await operatorCall<{ tmcId: string }>(one.baseUrl, "CreateTmc", {
      name: "Race TMC",
      maxApiUsers: 8,
    });
    const admin = await operatorCall<{ clientId: string; clientSecret: string }>(one.baseUrl, "CreateApiUser", {
      tmcId,
    });
    const token = await accessToken(one.baseUrl, admin.clientId, admin.clientSecret);
    const statuses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        callApi(i % 2 ? two.baseUrl : one.baseUrl, "/v2/api-users", token, {}).then((r) => r.status),
      ),
    );
    assert.equal(statuses.filter((s) => s === 200).length, 7, statuses.join(","));
    assert.equal(statuses.filter((s) => s === 409).length, 13, statuses.join(","));
    const page = (await (await callApi(two.baseUrl, "/v2/api-users", token)).json()) as { totalCount: number };
    assert.equal(page.totalCount, 8);
  });
});
