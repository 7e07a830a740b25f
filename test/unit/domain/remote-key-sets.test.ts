// RemoteKeySets with a fake fetcher and a moved clock: lifetimes clamped to their bounds, one
// fetch per URL however many clients wait for it, a bounded number of URLs fetched at once, a new
// registration (version) dropping what was held, and the URL rules.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { JWK } from "jose";
import { DomainError } from "../../../src/errors/domain-error.js";
import { clientKeySetOf } from "../../../src/domain/shared/client-assertion.js";
import { issuerKeySetOf } from "../../../src/domain/tokens/issuer-key-set.js";
import {
  JWKS_URI_MAX_CONCURRENT_FETCHES,
  KeySetFetchFailed,
  RemoteKeySets,
  type FetchedJwksDocument,
  type RemoteKeySetSettings,
} from "../../../src/domain/shared/remote-key-sets.js";

/** A P-256 public key (RFC 7517 A.1). */
const EC_KEY: JWK = {
  kty: "EC",
  crv: "P-256",
  x: "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4",
  y: "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM",
  kid: "1",
};
const KEY: JWK = { kty: "OKP", crv: "Ed25519", x: "UJx7EKp-xKWg_EniHNZ653W1xk8WMwFf62dD2E_kRdk", kid: "k1" };
const SETTINGS: RemoteKeySetSettings = {
  jwksFetchTimeoutMs: 1000,
  jwksCooldownMs: 30_000,
  jwksCacheMinAgeMs: 60_000,
  jwksCacheMaxAgeMs: 600_000,
  jwksUriAllowHttpLoopback: false,
};

/** A fetcher that answers `answer()` for every URL, counting calls; `gate` holds answers until opened. */
function fakeFetcher(
  answer: () => FetchedJwksDocument = () => ({ document: { keys: [KEY] }, maxAgeSeconds: undefined }),
) {
  const calls: string[] = [];
  let open: () => void = () => {};
  let gate: Promise<void> | undefined;
  return {
    calls,
    hold: () => {
      gate = new Promise<void>((resolve) => (open = resolve));
    },
    release: () => open(),
    fetch: async (uri: string) => {
      calls.push(uri);
      await gate;
      return answer();
    },
  };
}

function clock() {
  let now = 0;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

const owner = (id: string, uri = "https://keys.example/jwks", version = 1) => ({ id, version, jwksUri: uri });

describe("RemoteKeySets", () => {
  test("a max-age below the lower bound is raised to it; above the upper, lowered; none: the upper", async () => {
    for (const [maxAgeSeconds, livesMs] of [
      [1, 60_000],
      [0, 60_000],
      [86_400, 600_000],
      [undefined, 600_000],
      [120, 120_000],
    ] as const) {
      const fetcher = fakeFetcher(() => ({ document: { keys: [KEY] }, maxAgeSeconds }));
      const time = clock();
      const sets = new RemoteKeySets(fetcher, SETTINGS, clientKeySetOf, time.now);
      await sets.keySetOf(owner("c"));
      time.advance(livesMs - 1);
      await sets.keySetOf(owner("c"));
      assert.equal(fetcher.calls.length, 1, `max-age ${maxAgeSeconds}: held until ${livesMs} ms`);
      time.advance(1);
      await sets.keySetOf(owner("c"));
      assert.equal(fetcher.calls.length, 2, `max-age ${maxAgeSeconds}: refetched at ${livesMs} ms`);
    }
  });

  test("clients of one URL waiting together share one fetch", async () => {
    const fetcher = fakeFetcher();
    fetcher.hold();
    const sets = new RemoteKeySets(fetcher, SETTINGS, clientKeySetOf, clock().now);
    const waiting = Array.from({ length: 10 }, (_, i) => sets.keySetOf(owner(`c${i}`)));
    fetcher.release();
    for (const set of await Promise.all(waiting)) assert.ok("keys" in set);
    assert.equal(fetcher.calls.length, 1);
  });

  test("at most JWKS_URI_MAX_CONCURRENT_FETCHES URLs are fetched at once; beyond, refused without a fetch", async () => {
    const fetcher = fakeFetcher();
    fetcher.hold();
    const sets = new RemoteKeySets(fetcher, SETTINGS, clientKeySetOf, clock().now);
    const waiting = Array.from({ length: JWKS_URI_MAX_CONCURRENT_FETCHES }, (_, i) =>
      sets.keySetOf(owner(`c${i}`, `https://keys.example/${i}`)),
    );
    assert.deepEqual(await sets.keySetOf(owner("late", "https://keys.example/late")), {
      unavailable: "not fetched: too many key set fetches under way",
    });
    fetcher.release();
    await Promise.all(waiting);
    assert.equal(fetcher.calls.length, JWKS_URI_MAX_CONCURRENT_FETCHES);
  });

  test("a new registration (version) or another URL drops the held set", async () => {
    const fetcher = fakeFetcher();
    const sets = new RemoteKeySets(fetcher, SETTINGS, clientKeySetOf, clock().now);
    await sets.keySetOf(owner("c"));
    await sets.keySetOf(owner("c"));
    await sets.keySetOf(owner("c", undefined, 2));
    await sets.keySetOf(owner("c", "https://keys.example/other", 2));
    assert.equal(fetcher.calls.length, 3);
  });

  test("a failed fetch after expiry leaves no set (fail closed), and is not retried within the cooldown", async () => {
    let fail = false;
    const fetcher = fakeFetcher(() => {
      if (fail) throw new KeySetFetchFailed("answered HTTP 503");
      return { document: { keys: [KEY] }, maxAgeSeconds: undefined };
    });
    const time = clock();
    const sets = new RemoteKeySets(fetcher, SETTINGS, clientKeySetOf, time.now);
    await sets.keySetOf(owner("c"));
    fail = true;
    time.advance(SETTINGS.jwksCacheMaxAgeMs);
    assert.deepEqual(await sets.keySetOf(owner("c")), { unavailable: "answered HTTP 503" });
    assert.deepEqual(await sets.keySetOf(owner("c")), { unavailable: "answered HTTP 503" });
    assert.equal(fetcher.calls.length, 2);
    fail = false;
    time.advance(SETTINGS.jwksCooldownMs);
    assert.ok("keys" in (await sets.keySetOf(owner("c"))));
  });

  test("a fetched document that is not a valid public key set is refused with the rule it breaks", async () => {
    const fetcher = fakeFetcher(() => ({
      document: { keys: [{ kty: "EC", crv: "P-384", x: "AA", y: "AA" }] },
      maxAgeSeconds: undefined,
    }));
    const set = await new RemoteKeySets(fetcher, SETTINGS, clientKeySetOf, clock().now).keySetOf(owner("c"));
    assert.deepEqual(set, {
      unavailable: "is not a usable JWK Set: jwks.keys[0]: only Ed25519, P-256 and RSA keys are accepted",
    });
  });

  test("the instance's check decides what is held: an IdP's lenient one keeps the usable keys of the same document", async () => {
    const document = { keys: [{ ...EC_KEY, kid: "enc", use: "enc" }, EC_KEY] };
    const fetcher = fakeFetcher(() => ({ document, maxAgeSeconds: undefined }));
    const strict = await new RemoteKeySets(fetcher, SETTINGS, clientKeySetOf, clock().now).keySetOf(owner("c"));
    assert.deepEqual(strict, { unavailable: 'is not a usable JWK Set: jwks.keys[0]: use must be "sig"' });
    const lenient = await new RemoteKeySets(fetcher, SETTINGS, issuerKeySetOf, clock().now).keySetOf(owner("i"));
    assert.deepEqual(lenient, { keys: { keys: [EC_KEY] } });
  });

  test("URL rules: https; http only on loopback and only when allowed; no user info nor fragment", () => {
    const strict = new RemoteKeySets(fakeFetcher(), SETTINGS, clientKeySetOf);
    const loose = new RemoteKeySets(fakeFetcher(), { ...SETTINGS, jwksUriAllowHttpLoopback: true }, clientKeySetOf);
    assert.equal(strict.uriOf("https://keys.example/jwks"), "https://keys.example/jwks");
    for (const uri of ["http://127.0.0.1:8080/j", "http://localhost/j", "http://[::1]/j", "http://127.9.9.9/j"]) {
      assert.equal(loose.uriOf(uri), uri);
      assert.throws(() => strict.uriOf(uri), DomainError);
    }
    for (const uri of [
      "http://10.0.0.1/j",
      "http://localhost.example/j",
      "http://128.0.0.1/j",
      "https://u:p@keys.example/j",
      "https://keys.example/j#k",
      "file:///etc/passwd",
      "https://keys.example/" + "x".repeat(2048),
    ])
      assert.throws(() => loose.uriOf(uri), DomainError, uri);
  });
});
