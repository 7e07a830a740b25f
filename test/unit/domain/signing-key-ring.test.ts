import assert from "node:assert/strict";
import crypto from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { beforeEach, describe, test } from "node:test";
import { decodeProtectedHeader } from "jose";
import type { Clock } from "../../../src/domain/shared/clock.js";
import { AccessTokens } from "../../../src/domain/tokens/access-tokens.js";
import { SigningKeyRing, signingKeyStates } from "../../../src/domain/tokens/signing-key-ring.js";
import type { SigningKeyRecord } from "../../../src/domain/tokens/model.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import { FakeChangeFeed } from "../../fakes/change-feed.js";
import {
  AUDIENCE,
  createPgliteFixture,
  ISSUER,
  LEGACY_TTL,
  newApiUser,
  newTenant,
  PREPUBLISH_SECONDS,
  tokenRequest,
  type PgliteDomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";

/** Polls a condition of in-process state (no I/O but the fake's) for up to a second. */
async function waitUntil(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !condition(); i++) await sleep(10);
}

const notValid = { code: "USER_NOT_AUTHENTICATED", message: "The access token is not valid" } as const;
/** The retired key's stay after its successor activates: the longest token lifetime + 5 minutes of verifiers' clock skew. */
const RETIRED_STAY_SECONDS = LEGACY_TTL + 300;

interface RingInstance {
  readonly ring: SigningKeyRing;
  readonly feed: FakeChangeFeed;
  readonly tokens: AccessTokens;
}

describe("SigningKeyRing", () => {
  let f: PgliteDomainFixture;
  /** The stored signing keys, oldest first. */
  const keyRows = async () =>
    (
      (await f.store.db("signing_keys").orderBy("created_at")) as Array<{
        kid: string;
        private_jwk_ciphertext: string;
        activates_at: Date;
        retired_at: Date | null;
        not_after: Date | null;
      }>
    ).map((r) => ({
      kid: r.kid,
      privateJwkCiphertext: r.private_jwk_ciphertext,
      activatesAt: r.activates_at,
      retiredAt: r.retired_at ?? undefined,
      notAfter: r.not_after ?? undefined,
    }));
  let client: ProvisionedApiUser;
  beforeEach(async () => {
    f = await createPgliteFixture();
    client = await newApiUser(f, (await newTenant(f)).tmcId);
  });

  /** Another instance of the deployment: same database, same master key, its own change feed and (optionally skewed) clock. */
  const otherInstance = async (
    options: { encryptionKey?: Buffer; unknownKeyReloadIntervalMs?: number; clock?: Clock } = {},
  ): Promise<RingInstance> => {
    const feed = new FakeChangeFeed(f.notifications);
    feed.start(
      () => {},
      async () => {},
    );
    await feed.connecting;
    const clock = options.clock ?? f.clock.now;
    const ring = new SigningKeyRing(
      {
        uow: f.uow,
        keys: f.repos.signingKeys,
        feed,
        encryptionKey: options.encryptionKey ?? f.keys.signingKeyEncryptionKey,
        now: clock,
      },
      // -1: `Date.now() - lastReload > -1` always holds, so every unknown kid reloads (no real-time dependence).
      {
        signingKeyPrepublishSeconds: PREPUBLISH_SECONDS,
        accessTokenTtlSeconds: LEGACY_TTL,
        legacyTokenTtlSeconds: LEGACY_TTL,
        unknownKeyReloadIntervalMs: options.unknownKeyReloadIntervalMs ?? -1,
      },
    );
    await ring.start();
    return { ring, feed, tokens: new AccessTokens(ring, f.generations, ISSUER, clock) };
  };
  /** A token from the fixture's instance (its token endpoint). */
  const issue = async () => (await f.tokenService.grant(client.user, tokenRequest())).accessToken;
  /** A token signed by another instance's ring. */
  const issueOn = async (instance: RingInstance) =>
    (
      await instance.tokens.issue({
        clientId: client.clientId,
        tmcId: client.user.tmcId,
        orgId: undefined,
        role: "TMC_ADMIN",
        scopes: ["api-users"],
        subject: client.clientId,
        subjectKind: "CLIENT",
        audience: [AUDIENCE],
        credentials: [[client.clientId, client.user.credentialGeneration]],
        ttlSeconds: 3600,
      })
    ).accessToken;
  const kidOf = (token: string) => decodeProtectedHeader(token).kid;
  const publishedKids = (ring: SigningKeyRing) => ring.jwks.keys.map((k) => k.kid);
  const at = (base: Date, seconds: number) => new Date(base.getTime() + seconds * 1000);

  test("the first start creates one Ed25519 key, active at once; the JWKS publishes only its public half", async () => {
    assert.equal((await keyRows()).length, 1);
    const [row] = await keyRows();
    const { jwks } = f.signingKeys;
    assert.equal(jwks.keys.length, 1);
    assert.deepEqual(Object.keys(jwks.keys[0]!).sort(), ["alg", "crv", "kid", "kty", "use", "x"]);
    assert.deepEqual(
      [jwks.keys[0]!.kid, jwks.keys[0]!.alg, jwks.keys[0]!.crv, jwks.keys[0]!.use],
      [row!.kid, "EdDSA", "Ed25519", "sig"],
    );
    assert.equal(f.signingKeys.signingKey.kid, row!.kid);
    assert.equal(row!.activatesAt.toISOString(), f.clock.now().toISOString());
  });

  test("the private half is stored encrypted under the master key; another master key cannot load it", async () => {
    const [row] = await keyRows();
    assert.equal(row!.privateJwkCiphertext.includes('"d"'), false);
    assert.equal(Buffer.from(row!.privateJwkCiphertext, "base64url").toString("utf8").includes('"d"'), false);
    await assert.rejects(otherInstance({ encryptionKey: crypto.randomBytes(32) }), {
      message: `signing key ${row!.kid} cannot be decrypted: is MASTER_KEY the deployment's key?`,
    });
  });

  test("another instance starting on the same database loads the same key and verifies the first one's tokens", async () => {
    const other = await otherInstance();
    assert.equal((await keyRows()).length, 1);
    assert.equal(other.ring.signingKey.kid, f.signingKeys.signingKey.kid);
    assert.equal((await other.tokens.verify(await issue())).clientId, client.clientId);
  });

  test("states follow the clock: next (published, verifying) → active at its stored activation → retired until the last token expires → removed", async () => {
    const oldKid = f.signingKeys.signingKey.kid;
    const oldToken = await issue();
    const rotatedAt = f.clock.now();
    const rotated = await f.signingKeys.rotate();
    const activatesAt = at(rotatedAt, PREPUBLISH_SECONDS);
    assert.deepEqual(rotated, {
      kid: rotated.kid,
      activatesAt,
      publishedKids: [rotated.kid, oldKid],
      withdrawnKids: [],
    });
    const stored = (await keyRows()).find((k) => k.kid === oldKid)!;
    assert.deepEqual(
      [stored.retiredAt?.toISOString(), stored.notAfter?.toISOString()],
      [activatesAt.toISOString(), at(activatesAt, RETIRED_STAY_SECONDS).toISOString()],
      "the old key stops signing when the new one activates and stays until the longest token lifetime + 5 min after",
    );
    const states = async () => (await f.signingKeys.list()).map(({ record, state }) => [record.kid, state]);

    // NEXT: published and verifying, not signing.
    assert.deepEqual(await states(), [
      [rotated.kid, "next"],
      [oldKid, "active"],
    ]);
    assert.deepEqual(publishedKids(f.signingKeys), [rotated.kid, oldKid]);
    f.clock.set(at(activatesAt, -0.001));
    assert.equal(kidOf(await issue()), oldKid, "the current key signs until the very activation instant");

    // ACTIVE at the stored instant, with no reload: the ring reads its clock.
    f.clock.set(activatesAt);
    const newToken = await issue();
    assert.equal(kidOf(newToken), rotated.kid);
    assert.deepEqual(await states(), [
      [rotated.kid, "active"],
      [oldKid, "retired"],
    ]);
    assert.equal((await f.accessTokens.verify(newToken)).clientId, client.clientId);
    f.clock.advanceSeconds(30 * 60);
    assert.equal(
      (await f.accessTokens.verify(oldToken)).clientId,
      client.clientId,
      "a retired key verifies (the token itself is within its hour)",
    );

    // RETIRED until notAfter, then gone from the JWKS and from verification, again without a reload.
    f.clock.set(at(activatesAt, RETIRED_STAY_SECONDS - 0.001));
    assert.deepEqual(publishedKids(f.signingKeys), [rotated.kid, oldKid]);
    f.clock.set(at(activatesAt, RETIRED_STAY_SECONDS));
    assert.deepEqual(publishedKids(f.signingKeys), [rotated.kid]);
    assert.deepEqual(await states(), [[rotated.kid, "active"]]);
  });

  test("the keys that verify are exactly the published JWKS, as KeyObjects, through rotation and retirement", async () => {
    /** The ring's verification keys against its JWKS: same kids, same public keys. */
    const assertKeysAreJwks = async () => {
      const keys = await f.signingKeys.verificationKeysFor(undefined, "");
      assert.deepEqual([...keys.keys()].sort(), publishedKids(f.signingKeys).sort());
      for (const jwk of f.signingKeys.jwks.keys) {
        const published = crypto.createPublicKey({ key: jwk as crypto.JsonWebKey, format: "jwk" });
        assert.ok(keys.get(jwk.kid!)?.equals(published), `the key of ${jwk.kid} is the published one`);
      }
      return keys;
    };
    const first = await assertKeysAreJwks();
    assert.equal(first.size, 1);
    const rotated = await f.signingKeys.rotate();
    assert.equal((await assertKeysAreJwks()).size, 2);
    f.clock.set(at(rotated.activatesAt, RETIRED_STAY_SECONDS));
    assert.deepEqual([...(await assertKeysAreJwks()).keys()], [rotated.kid]);
  });

  test("signingKeyStates: the newest activated key signs; newer ones are next, older ones retired, expired ones gone", () => {
    const key = (kid: string, activatesAt: string, notAfter?: string): SigningKeyRecord => ({
      kid,
      alg: "EdDSA",
      publicJwk: {},
      privateJwkCiphertext: "",
      createdAt: new Date("2026-01-01T00:00:00Z"),
      activatesAt: new Date(activatesAt),
      retiredAt: undefined,
      notAfter: notAfter === undefined ? undefined : new Date(notAfter),
    });
    const keys = [
      key("a", "2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z"),
      key("c", "2026-01-02T12:00:00Z"),
      key("b", "2026-01-02T00:00:00Z", "2026-01-04T00:00:00Z"),
    ];
    const statesAt = (iso: string) =>
      signingKeyStates(keys, new Date(iso)).map(({ record, state }) => `${record.kid}:${state}`);
    assert.deepEqual(statesAt("2026-01-01T12:00:00Z"), ["c:next", "b:next", "a:active"]);
    assert.deepEqual(statesAt("2026-01-02T00:00:00Z"), ["c:next", "b:active", "a:retired"]);
    assert.deepEqual(statesAt("2026-01-02T12:00:00Z"), ["c:active", "b:retired", "a:retired"]);
    assert.deepEqual(statesAt("2026-01-03T00:00:00Z"), ["c:active", "b:retired"]);
    assert.deepEqual(statesAt("2026-01-04T00:00:00Z"), ["c:active"]);
    // A clock behind the one that scheduled every key: the earliest signs rather than none.
    assert.deepEqual(statesAt("2025-12-31T00:00:00Z"), ["c:next", "b:next", "a:active"]);
  });

  test("a second rotation while a key waits to activate → SIGNING_KEY_ROTATION_PENDING naming it; once it signs, rotation works again", async () => {
    const first = await f.signingKeys.rotate();
    await rejectsWith(f.signingKeys.rotate(), {
      code: "SIGNING_KEY_ROTATION_PENDING",
      message: `Signing key ${first.kid} is already published and starts signing at ${first.activatesAt.toISOString()}; rotate again after that, or rotate now (emergency)`,
      params: [
        { name: "kid", value: first.kid },
        { name: "activatesAt", value: first.activatesAt.toISOString() },
      ],
    });
    assert.equal((await keyRows()).length, 2, "nothing written");
    f.clock.set(first.activatesAt);
    const second = await f.signingKeys.rotate();
    assert.deepEqual(second.publishedKids.slice(0, 2), [second.kid, first.kid]);
  });

  test("two instances: B's rotation reaches A through the change feed at once; both switch at the stored instant; with A's clock 3 s ahead, B accepts A's early tokens (0 refusals)", async () => {
    const skewMs = 3_000;
    const a = await otherInstance({
      clock: () => new Date(f.clock.now().getTime() + skewMs),
      unknownKeyReloadIntervalMs: 60_000,
    });
    const b = await otherInstance({ unknownKeyReloadIntervalMs: 60_000 });
    const oldKid = b.ring.signingKey.kid;
    const rotated = await b.ring.rotate();
    await sleep(0); // the feed's listener runs the reload
    assert.deepEqual(
      publishedKids(a.ring),
      [rotated.kid, oldKid],
      "A publishes the next key as soon as B committed it",
    );
    assert.equal(a.feed.signingKeyChangesDelivered, 1);

    // 3 s before the activation by B's clock, A's clock has reached it: A signs with the new key, B verifies.
    f.clock.set(at(rotated.activatesAt, -skewMs / 1000));
    const early = await issueOn(a);
    assert.equal(kidOf(early), rotated.kid);
    assert.equal(kidOf(await issueOn(b)), oldKid, "B still signs with the current key");
    assert.equal((await b.tokens.verify(early)).clientId, client.clientId);
    assert.equal((await a.tokens.verify(await issueOn(b))).clientId, client.clientId);
    f.clock.set(rotated.activatesAt);
    assert.equal(kidOf(await issueOn(b)), rotated.kid);
  });

  test("an announcement that arrives while a reload is reading loads again afterwards (that reload may have read before the commit)", async () => {
    const a = await otherInstance({ unknownKeyReloadIntervalMs: 60_000 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    f.store.afterNext("signingKeys.listPublished", () => gate);
    const periodic = a.ring.reload(); // reads the keys, then waits at the gate
    await sleep(0);
    const rotated = await f.signingKeys.rotate();
    assert.equal(a.feed.signingKeyChangesDelivered, 1);
    release();
    await periodic;
    await waitUntil(() => publishedKids(a.ring).includes(rotated.kid));
    assert.deepEqual(publishedKids(a.ring), [rotated.kid, f.signingKeys.signingKey.kid]);
  });

  test("an instance that missed the announcement still publishes the next key after its periodic reload, long before it activates", async () => {
    const a = await otherInstance({ unknownKeyReloadIntervalMs: 60_000 });
    a.feed.disconnect();
    const rotated = await f.signingKeys.rotate();
    assert.equal(a.ring.jwks.keys.length, 1, "the announcement was lost");
    await a.ring.reload();
    assert.ok(publishedKids(a.ring).includes(rotated.kid));
    f.clock.set(rotated.activatesAt);
    assert.equal((await a.tokens.verify(await issue())).clientId, client.clientId);
  });

  test("emergency rotation (now): the new key signs at once, every other key is withdrawn at once and its tokens refused", async () => {
    const other = await otherInstance();
    const oldKid = f.signingKeys.signingKey.kid;
    const oldToken = await issue();
    const pending = await f.signingKeys.rotate();
    const rotated = await f.signingKeys.rotate({ immediately: true });
    assert.deepEqual(rotated, {
      kid: rotated.kid,
      activatesAt: f.clock.now(),
      publishedKids: [rotated.kid],
      withdrawnKids: [pending.kid, oldKid],
    });
    assert.equal(kidOf(await issue()), rotated.kid);
    await sleep(0);
    assert.deepEqual(publishedKids(other.ring), [rotated.kid], "the other instance heard it");
    await rejectsWith(f.accessTokens.verify(oldToken), notValid);
    await rejectsWith(other.tokens.verify(oldToken), notValid);
    assert.equal((await other.tokens.verify(await issue())).clientId, client.clientId);
  });

  test("an unknown kid reloads at once when the token was issued after the last reload, even within the reload interval (401 for up to 5 s)", async () => {
    const a = await otherInstance({ unknownKeyReloadIntervalMs: 60_000 });
    a.feed.disconnect(); // the announcement is in flight, or lost
    await a.ring.reload(); // A's periodic reload ran shortly before
    await sleep(300);
    // Issued after A's last reload: A reloads although it reloaded less than a minute ago.
    await f.signingKeys.rotate({ immediately: true });
    f.clock.advanceSeconds(1);
    const token = await issue();
    assert.equal((await a.tokens.verify(token)).clientId, client.clientId);
    assert.deepEqual(publishedKids(a.ring), [kidOf(token)]);
  });

  test("an unknown kid in a token issued before the last reload does not reload within the interval; after reloading it is refused", async () => {
    const a = await otherInstance({ unknownKeyReloadIntervalMs: 60_000 });
    const token = await issue();
    const [header, payload, signature] = token.split(".");
    const json = JSON.parse(Buffer.from(header!, "base64url").toString("utf8")) as Record<string, unknown>;
    const unknownKid = `${Buffer.from(JSON.stringify({ ...json, kid: "no-such-kid" })).toString("base64url")}.${payload}.${signature}`;
    f.clock.advanceSeconds(60);
    await a.ring.reload();
    await sleep(300);
    const reads = () => f.store.calls.filter((c) => c === "signingKeys.listPublished").length;
    const before = reads();
    await rejectsWith(a.tokens.verify(unknownKid), notValid);
    assert.equal(reads(), before, "no reload: the token predates the last one");

    const b = await otherInstance(); // reloads on every unknown kid
    const beforeB = reads();
    await rejectsWith(b.tokens.verify(unknownKid), notValid);
    assert.equal(reads(), beforeB + 1);
  });

  test("nothing is served before start", () => {
    const ring = new SigningKeyRing(
      {
        uow: f.uow,
        keys: f.repos.signingKeys,
        feed: f.feed,
        encryptionKey: f.keys.signingKeyEncryptionKey,
        now: f.clock.now,
      },
      {
        signingKeyPrepublishSeconds: 60,
        accessTokenTtlSeconds: 60,
        legacyTokenTtlSeconds: 60,
        unknownKeyReloadIntervalMs: 0,
      },
    );
    assert.throws(() => ring.jwks, { message: "signing keys are not loaded" });
    assert.throws(() => ring.signingKey, { message: "signing keys are not loaded" });
  });
});
