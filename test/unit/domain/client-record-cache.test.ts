import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import type { ApiUser } from "../../../src/domain/api-users/model.js";
import { ClientRecordCache } from "../../../src/domain/shared/client-record-cache.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import {
  createPgliteFixture,
  newApiUser,
  newTenant,
  postCredentials,
  type PgliteDomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";

const invalidClient = { code: "INVALID_CLIENT", message: "Client authentication failed" } as const;

describe("ClientRecordCache: API-user records in process, used only while their generation is current", () => {
  let f: PgliteDomainFixture;
  let tmcId: string;
  let client: ProvisionedApiUser;
  const authenticate = async (clientId: string, secret: string) =>
    f.clients.verify(await f.clients.lookUp(postCredentials(clientId, secret)));
  const lookUps = () => f.store.calls.filter((c) => c === "apiUsers.findActive").length;

  beforeEach(async () => {
    f = await createPgliteFixture();
    ({ tmcId } = await newTenant(f));
    client = await newApiUser(f, tmcId);
  });

  test("a second token request of the same client does not read its record from the database", async () => {
    await authenticate(client.clientId, client.secret);
    const before = lookUps();
    for (let i = 0; i < 5; i++) await authenticate(client.clientId, client.secret);
    assert.equal(lookUps(), before, "served from the cache");
  });

  test("after a rotation the cached record is not used: the old secret is refused, the new one accepted", async () => {
    await authenticate(client.clientId, client.secret);
    const { clientSecret } = await f.admin.rotate({ clientId: client.clientId, tmcId }, client.clientId, "r");
    await rejectsWith(authenticate(client.clientId, client.secret), invalidClient);
    const fresh = await authenticate(client.clientId, clientSecret!);
    assert.equal(fresh.credentialGeneration, client.user.credentialGeneration + 1);
  });

  test("after a revocation the cached record is not used: the secret is refused", async () => {
    const other = await newApiUser(f, tmcId);
    await authenticate(other.clientId, other.secret);
    await f.admin.revoke({ clientId: client.clientId, tmcId }, other.clientId, "r");
    await rejectsWith(authenticate(other.clientId, other.secret), invalidClient);
  });

  test("an unknown client id is remembered a few seconds: a flood of it costs one database read, and it is still refused", async () => {
    const before = lookUps();
    for (let i = 0; i < 3; i++) await rejectsWith(authenticate("UNKNOWNCLIENTID0000000000A", "x"), invalidClient);
    assert.equal(lookUps(), before + 1);
    await rejectsWith(authenticate("UNKNOWNCLIENTID0000000000B", "x"), invalidClient);
    assert.equal(lookUps(), before + 2, "each id once");
  });

  test("the unknown answer expires after its ttl, is bounded (oldest out), and never hides a client the database knows", async () => {
    let now = 0;
    const generations = {
      current: async (ids: readonly string[]) => new Map(ids.map((id) => [id, 1])),
      believableFrom: () => 0,
    };
    const cache = new ClientRecordCache<ApiUser>(generations, 10, { ttlMs: 5_000, capacity: 2, now: () => now });
    const existing = new Set<string>();
    const count = { loads: 0 };
    const find = (id: string) =>
      cache.find(id, async () => (count.loads++, existing.has(id) ? record(tmcId, id) : undefined));
    assert.equal(await find("x"), undefined);
    assert.equal(await find("x"), undefined);
    assert.equal(count.loads, 1, "remembered");
    now += 5_000;
    // Created meanwhile (only an operator's restore could bring back an id already presented): the ttl bounds it.
    existing.add("x");
    assert.equal((await find("x"))?.clientId, "x", "after the ttl the database answers again");
    assert.equal(count.loads, 2);
    await find("y");
    await find("z");
    await find("w"); // y leaves the unknown ids
    const before: number = count.loads;
    await find("y");
    assert.equal(count.loads, before + 1, "bounded: the oldest unknown id was forgotten");
    await find("w");
    assert.equal(count.loads, before + 1, "w is still remembered");
  });

  test("bounded: the least recently used record leaves first", async () => {
    const generations = {
      current: async (ids: readonly string[]) => new Map(ids.map((id) => [id, 1])),
      believableFrom: () => 0,
    };
    const cache = new ClientRecordCache<ApiUser>(generations, 2);
    let loads = 0;
    const find = (id: string) => cache.find(id, async () => (loads++, record(tmcId, id)));
    await find("a");
    await find("b");
    await find("a");
    await find("c"); // b leaves
    assert.equal(cache.size, 2);
    const before = loads;
    await find("a");
    await find("c");
    assert.equal(loads, before, "a and c are cached");
    await find("b");
    assert.equal(loads, before + 1, "b was evicted");
  });
});

function record(tmcId: string, clientId: string): ApiUser {
  return {
    clientId,
    tmcId,
    orgId: undefined,
    role: "TMC_ADMIN",
    credentialType: "CLIENT_CREDENTIALS",
    secretHash: Buffer.alloc(32),
    credentialGeneration: 1,
    dpopBoundAccessTokens: false,
  };
}
