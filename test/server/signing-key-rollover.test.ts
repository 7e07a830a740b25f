// A signing-key rotation under load across instances refuses no valid token. The next
// key is published (JWKS, verification on every instance) before any instance signs with it, all
// instances switch at the activation instant stored in Postgres, and the retired key stays
// published until the last token it signed has expired, then leaves. Two instances on Postgres;
// the embedded default is one instance, which must hold the same promises on its own.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test } from "node:test";
import { decodeProtectedHeader, type JSONWebKeySet } from "jose";
import { isPostgres, newStorage, type Storage } from "../helpers/backend.js";
import { dropStorage, operatorCall, type RunningService } from "../helpers/service.js";
import { ROOMY_RATE_LIMITS, startTokenService, TestClock } from "../helpers/token-kit.js";
import { waitFor } from "../helpers/wait.js";

/** Short periods so the test runs in seconds: the next key waits 3 s; an instance reloads every second. */
const PREPUBLISH_SECONDS = 3;
const TOKEN_TTL_SECONDS = 60;
const ENV = {
  ...ROOMY_RATE_LIMITS,
  SIGNING_KEY_PREPUBLISH_SECONDS: String(PREPUBLISH_SECONDS),
  SIGNING_KEY_RELOAD_INTERVAL_MS: "1000",
  ACCESS_TOKEN_TTL_SECONDS: String(TOKEN_TTL_SECONDS),
  LEGACY_TOKEN_TTL_SECONDS: String(TOKEN_TTL_SECONDS),
};
/** A retired key stays the longest token lifetime + 5 minutes (verifiers' clock skew) past its successor's activation. */
const RETIRED_STAY_SECONDS = TOKEN_TTL_SECONDS + 300;

interface SigningKeyView {
  kid: string;
  state: string;
  activatesAt: string;
  retiredAt: string;
  notAfter: string;
}

describe(`signing-key rotation under load (${isPostgres ? "two instances on one Postgres" : "the embedded default's one instance"})`, () => {
  const clock = new TestClock();
  let storage: Storage;
  const instances: RunningService[] = [];
  let admin: { clientId: string; clientSecret: string };
  before(async () => {
    storage = newStorage();
    const count = isPostgres ? 2 : 1;
    // One after the other: the first creates the first key.
    for (let i = 0; i < count; i++) instances.push(await startTokenService({ storage, env: ENV, now: clock.now }));
    admin = await operatorCall(instances[0]!.baseUrl, "Seed", {});
  });
  after(async () => {
    await Promise.all(instances.map((i) => i.stop()));
    if (storage) await dropStorage(storage);
  });

  const jwksOf = async (running: RunningService) =>
    ((await (await fetch(`${running.baseUrl}/.well-known/jwks.json`)).json()) as JSONWebKeySet).keys.map((k) => k.kid!);
  const tokenFrom = async (running: RunningService) => {
    const response = await fetch(`${running.baseUrl}/v2/auth/oauth2-token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "client_credentials",
        client_id: admin.clientId,
        client_secret: admin.clientSecret,
      }),
    });
    const body = (await response.json()) as { access_token?: string };
    assert.equal(response.status, 200, `token endpoint: ${JSON.stringify(body)}`);
    return body.access_token!;
  };
  /** An authenticated read: the status a client of this instance sees with the token. */
  const readWith = async (running: RunningService, token: string) => {
    const response = await fetch(`${running.baseUrl}/v2/api-users?limit=1`, {
      headers: { authorization: `Bearer ${token}` },
    });
    await response.body?.cancel();
    return response.status;
  };

  test("rotate on the last instance while every instance issues and verifies: 0 refusals; the next key is published everywhere before any token carries it; the retired key stays until its tokens expire", async () => {
    const rotator = instances.at(-1)!;
    // A cache that obeys the JWKS's max-age refetches at least twice within the pre-publication period.
    assert.equal(
      (await fetch(`${rotator.baseUrl}/.well-known/jwks.json`)).headers.get("cache-control"),
      `public, max-age=${Math.floor(PREPUBLISH_SECONDS / 3)}`,
    );
    const oldKid = decodeProtectedHeader(await tokenFrom(instances[0]!)).kid!;

    // When each instance's JWKS was first seen holding each key (polled every 50 ms).
    const jwksSeenAt = instances.map(() => new Map<string, number>());
    // When a token carrying each key was first received, and every verification outcome.
    const firstTokenAt = new Map<string, number>();
    const outcomes: Array<{ kid: string; issuer: number; verifier: number; status: number }> = [];
    const tokensByIssuer = instances.map(() => [] as Array<{ kid: string; iat: number }>);
    let running = true;

    const pollJwks = async () => {
      while (running) {
        await Promise.all(
          instances.map(async (instance, i) => {
            for (const kid of await jwksOf(instance)) if (!jwksSeenAt[i]!.has(kid)) jwksSeenAt[i]!.set(kid, Date.now());
          }),
        );
        await sleep(50);
      }
    };
    // Per instance two workers: get a token there, then read with it on every instance.
    const work = async (issuer: number) => {
      while (running) {
        const token = await tokenFrom(instances[issuer]!);
        const kid = decodeProtectedHeader(token).kid!;
        if (!firstTokenAt.has(kid)) firstTokenAt.set(kid, Date.now());
        tokensByIssuer[issuer]!.push({
          kid,
          iat: JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")).iat,
        });
        await Promise.all(
          instances.map(async (verifierInstance, verifier) =>
            outcomes.push({ kid, issuer, verifier, status: await readWith(verifierInstance, token) }),
          ),
        );
      }
    };
    const load = Promise.all([pollJwks(), ...instances.flatMap((_, i) => [work(i), work(i)])]);

    try {
      await sleep(500);
      const rotated = await operatorCall<{ kid: string; activatesAt: string; publishedKids: string[] }>(
        rotator.baseUrl,
        "RotateSigningKey",
        {},
      );
      assert.deepEqual(rotated.publishedKids, [rotated.kid, oldKid]);
      const activatesAt = Date.parse(rotated.activatesAt);
      // Load until every instance has signed with the new key for a while.
      await waitFor(
        "every instance signing with the new key",
        () =>
          Date.now() > activatesAt + 1_500 &&
          tokensByIssuer.every((tokens) => tokens.some((t) => t.kid === rotated.kid)),
        { timeoutMs: 60_000, intervalMs: 100 },
      );
      running = false;
      await load;

      const refused = outcomes.filter((o) => o.status !== 200);
      assert.deepEqual(refused, [], `${refused.length} of ${outcomes.length} valid tokens refused`);
      assert.ok(
        outcomes.some((o) => o.kid === oldKid) && outcomes.some((o) => o.kid === rotated.kid),
        "tokens of both keys were verified",
      );
      for (const [i, seen] of jwksSeenAt.entries()) {
        const published = seen.get(rotated.kid);
        assert.ok(
          published !== undefined && published < firstTokenAt.get(rotated.kid)!,
          `instance ${i} published the next key before any token carried it`,
        );
      }
      for (const tokens of tokensByIssuer) {
        for (const t of tokens.filter((t) => t.kid === rotated.kid))
          assert.ok(
            t.iat >= Math.floor(activatesAt / 1000),
            "no instance signs with the next key before its activation",
          );
      }

      // Retired, still published until its last token (and the verifiers' skew allowance) has passed, then gone.
      const keys = (await operatorCall<{ keys: SigningKeyView[] }>(instances[0]!.baseUrl, "ListSigningKeys", {})).keys;
      assert.deepEqual(
        keys.map((k) => [k.kid, k.state]),
        [
          [rotated.kid, "ACTIVE"],
          [oldKid, "RETIRED"],
        ],
      );
      const notAfter = Date.parse(keys[1]!.notAfter);
      assert.equal(notAfter, activatesAt + RETIRED_STAY_SECONDS * 1000);
      assert.equal(keys[1]!.retiredAt, rotated.activatesAt);
      clock.advanceSeconds((notAfter - clock.now().getTime()) / 1000 - 1);
      for (const instance of instances)
        assert.deepEqual(await jwksOf(instance), [rotated.kid, oldKid], "one second before notAfter");
      clock.advanceSeconds(1.1);
      for (const instance of instances)
        assert.deepEqual(await jwksOf(instance), [rotated.kid], "at notAfter the retired key is dropped");
      for (const instance of instances) assert.equal(await readWith(instance, await tokenFrom(instance)), 200);
      console.log(
        `# rotation: ${outcomes.length} verifications, ${refused.length} refused; next key seen in every JWKS ${Math.round(firstTokenAt.get(rotated.kid)! - Math.max(...jwksSeenAt.map((s) => s.get(rotated.kid)!)))} ms before its first token`,
      );
    } finally {
      running = false;
      await load.catch(() => {});
      clock.reset();
    }
  });
});
