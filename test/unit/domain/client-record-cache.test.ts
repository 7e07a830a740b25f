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

  test("unknown client ids are not cached and cost one database read each", async () => {
    const before = lookUps();
    for (let i = 0; i < 3; i++) await rejectsWith(authenticate("UNKNOWNCLIENTID0000000000A", "x"), invalidClient);
    assert.equal(lookUps(), before + 3);
  });

  test("bounded: the least recently used record leaves first", async () => {
    const generations = {
      current: async (ids: readonly string[]) => new Map(ids.map((id) => [id, 1])),
      believableFrom: () => 0,
    };
    const cache = new ClientRecordCache<ApiUser>(generations, 2);
    const record = (clientId: string): ApiUser => ({
      clientId,
      tmcId,
      orgId: undefined,
      role: "TMC_ADMIN",
      credentialType: "CLIENT_CREDENTIALS",
      secretHash: Buffer.alloc(32),
      credentialGeneration: 1,
    });
    let loads = 0;
    const find = (id: string) => cache.find(id, async () => (loads++, record(id)));
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
