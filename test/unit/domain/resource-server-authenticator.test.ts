import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import type { ResourceServer } from "../../../src/domain/resource-servers/model.js";
import { ResourceServerAuthenticator } from "../../../src/domain/resource-servers/resource-server-authenticator.js";
import {
  ResourceServerRegistry,
  type RegisteredResourceServer,
} from "../../../src/domain/resource-servers/resource-server-registry.js";
import { clientCredentialsOf } from "../../../src/domain/shared/client-credentials.js";
import { ClientRecordCache } from "../../../src/domain/shared/client-record-cache.js";
import type { CredentialGenerations } from "../../../src/domain/tokens/credential-generations.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import { assertion, ASSERTION_TYPE, keyPair, type KeyPair } from "../../helpers/client-assertion-kit.js";
import {
  AUDIENCE,
  createPgliteFixture,
  postCredentials,
  startInstance,
  type PgliteDomainFixture,
} from "../../fakes/domain-fixture.js";

/** The operator's registry over the fixture (instance A). */
const registryOn = (f: PgliteDomainFixture) =>
  new ResourceServerRegistry({
    uow: f.uow,
    servers: f.repos.resourceServers,
    audit: f.repos.audit,
    credentials: f.generations,
    pepper: f.keys.secretPepper,
    ownAudience: AUDIENCE,
    keySets: f.keySets,
  });

const refused = { code: "RESOURCE_SERVER_AUTHENTICATION_FAILED", message: "Client authentication failed" } as const;

/**
 * Two instances over one database and one shared cache, each with its own credential
 * generations and its own records in memory: a rotation or removal through A is refused on B as
 * soon as A has answered, although B still holds the record it read before.
 */
describe("ResourceServerAuthenticator: records held in process, believed at the current generation only", () => {
  let f: PgliteDomainFixture;
  let onA: ResourceServerRegistry;
  let onB: ResourceServerAuthenticator;
  let server: RegisteredResourceServer;
  const reads = () => f.store.calls.filter((c) => c === "resourceServers.findActive").length;
  const authenticator = (generations: CredentialGenerations) =>
    new ResourceServerAuthenticator({
      uow: f.uow,
      servers: f.repos.resourceServers,
      pepper: f.keys.secretPepper,
      records: new ClientRecordCache<ResourceServer>(generations, 10),
    });

  beforeEach(async () => {
    f = await createPgliteFixture();
    const b = await startInstance(f);
    onA = registryOn(f);
    onB = authenticator(b.generations);
    server = await onA.register("Trips", ["https://trips.example/api"], "req-create");
  });

  test("a held record costs one read of the shared cache and no database read", async () => {
    await onB.authenticate(postCredentials(server.clientId, server.clientSecret));
    const [databaseReads, cacheReads] = [reads(), f.cache.reads.length];
    for (let i = 0; i < 3; i++) {
      const authenticated = await onB.authenticate(postCredentials(server.clientId, server.clientSecret));
      assert.deepEqual(authenticated.audiences, ["https://trips.example/api"]);
    }
    assert.equal(reads(), databaseReads, "no database read");
    assert.equal(f.cache.reads.length, cacheReads + 3, "one cache round trip each");
  });

  test("rotated on A: B refuses the old secret at once and takes the new one", async () => {
    await onB.authenticate(postCredentials(server.clientId, server.clientSecret));
    const { clientSecret } = await onA.rotateSecret(server.clientId, "req-rotate");
    await rejectsWith(onB.authenticate(postCredentials(server.clientId, server.clientSecret)), refused);
    assert.equal((await onB.authenticate(postCredentials(server.clientId, clientSecret))).clientId, server.clientId);
  });

  test("removed on A: B refuses it at once, with the answer of an unknown id", async () => {
    await onB.authenticate(postCredentials(server.clientId, server.clientSecret));
    await onA.remove(server.clientId, "req-remove");
    await rejectsWith(onB.authenticate(postCredentials(server.clientId, server.clientSecret)), refused);
    await rejectsWith(onB.authenticate(postCredentials("rs-neverregistered", server.clientSecret)), refused);
  });

  test("rotation and removal are numbered credential changes stamped on the server's row", async () => {
    const seqOf = async () =>
      Number(
        ((await f.store.db("resource_servers").where({ client_id: server.clientId }).first()) as { change_seq: number })
          .change_seq,
      );
    assert.equal(await seqOf(), 0);
    await onA.rotateSecret(server.clientId, "req-rotate");
    const rotatedAt = await seqOf();
    assert.ok(rotatedAt > 0);
    await onA.remove(server.clientId, "req-remove");
    assert.ok((await seqOf()) > rotatedAt);
    const states = await f.repos.resourceServers.credentialStates(f.uow.direct, [server.clientId]);
    assert.deepEqual(states.get(server.clientId), { generation: undefined, changeSeq: await seqOf() });
    assert.equal((await f.generations.current([server.clientId])).get(server.clientId), undefined);
  });

  test("no credentials at all and half of them are refused before anything is read, as at the token endpoint", async () => {
    const before = reads();
    await rejectsWith(onB.authenticate(postCredentials("", "")), {
      code: "CLIENT_AUTHENTICATION_REQUIRED",
      message: "Client authentication is required (HTTP Basic, or client_id and client_secret)",
    });
    await rejectsWith(onB.authenticate(postCredentials(server.clientId, "")), {
      code: "INVALID_REQUEST",
      message: "Client authentication is required (client_id and client_secret)",
      params: [{ name: "client_id", value: "invalid" }],
    });
    assert.equal(reads(), before);
  });
});

/**
 * private_key_jwt: a resource server with keys is checked by the API users' assertion rules, and
 * a new key set through A is the current credential on B at once (tiny fakes: a replay cache in a
 * Set, the real clock).
 */
describe("ResourceServerAuthenticator: client assertions of a server with keys", () => {
  const ISSUER = "https://auth.example";
  let f: PgliteDomainFixture;
  let onA: ResourceServerRegistry;
  let onB: ResourceServerAuthenticator;
  let key: KeyPair;
  const used = new Set<string>();
  const replay = {
    useOnce: async (namespace: string, id: string) =>
      !used.has(`${namespace} ${id}`) && !!used.add(`${namespace} ${id}`),
  };
  const presenting = (jwt: string) =>
    clientCredentialsOf({
      formClientId: "",
      formClientSecret: "",
      authorization: null,
      clientAssertionType: ASSERTION_TYPE,
      clientAssertion: jwt,
    });
  /** The reason the refusal gives the log (never the caller). */
  const reasonOf = async (attempt: Promise<unknown>) => {
    const error = await rejectsWith(attempt, refused);
    return error.logged?.refusalReason;
  };

  beforeEach(async () => {
    f = await createPgliteFixture();
    const b = await startInstance(f);
    onA = registryOn(f);
    onB = new ResourceServerAuthenticator({
      uow: f.uow,
      servers: f.repos.resourceServers,
      pepper: f.keys.secretPepper,
      records: new ClientRecordCache<ResourceServer>(b.generations, 10),
      assertions: { replay, audiences: [ISSUER], clock: () => new Date() },
    });
    key = await keyPair("EdDSA");
  });

  test("registered with keys: its assertion is accepted once; a secret, a replay and another key are refused, each naming why", async () => {
    const server = await onA.register("Trips", ["https://trips.example/api"], "req", {
      jwks: JSON.stringify({ keys: [key.jwk] }),
    });
    assert.equal(server.clientSecret, "");
    const jwt = await assertion(key, server.clientId, ISSUER);
    assert.equal((await onB.authenticate(presenting(jwt))).clientId, server.clientId);
    assert.equal(await reasonOf(onB.authenticate(presenting(jwt))), "assertion jti already used");
    const stranger = await keyPair("EdDSA");
    assert.equal(
      await reasonOf(onB.authenticate(presenting(await assertion(stranger, server.clientId, ISSUER)))),
      "assertion signed by no registered key",
    );
    assert.equal(await reasonOf(onB.authenticate(postCredentials(server.clientId, "any-secret"))), "wrong secret");
  });

  test("keys set on A replace the secret: B refuses the secret at once; a secret rotation drops the keys", async () => {
    const server = await onA.register("Trips", ["https://trips.example/api"], "req");
    await onB.authenticate(postCredentials(server.clientId, server.clientSecret));
    assert.deepEqual(await onA.setKeys(server.clientId, { jwks: JSON.stringify({ keys: [key.jwk] }) }, "req-keys"), {
      keyIds: [key.jwk.kid],
    });
    assert.equal(
      await reasonOf(onB.authenticate(postCredentials(server.clientId, server.clientSecret))),
      "wrong secret",
    );
    await onB.authenticate(presenting(await assertion(key, server.clientId, ISSUER)));
    const { clientSecret } = await onA.rotateSecret(server.clientId, "req-rotate");
    assert.equal(
      await reasonOf(onB.authenticate(presenting(await assertion(key, server.clientId, ISSUER)))),
      "assertion from a client with no registered keys",
    );
    assert.equal((await onB.authenticate(postCredentials(server.clientId, clientSecret))).clientId, server.clientId);
  });
});
