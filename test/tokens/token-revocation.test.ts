// RFC 7009 token revocation at POST /v2/auth/revoke: with openid-client's tokenRevocation,
// unmodified; an access token revoked by its jti is refused at once, on every instance, and
// stays refused when Redis loses the revocation; a refresh token takes its family with it.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as client from "openid-client";
import { createClient, type RedisClientType } from "redis";
import { bucketOf, credentialKey, watermarkKey } from "../../src/store/redis/credential-keys.js";
import { isPostgres, redisKeyPrefixOf, TEST_REDIS_URL } from "../helpers/backend.js";
import type { RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  assertOAuthError,
  disposeService,
  getWith,
  GRANT_EXCHANGE,
  INTROSPECT_PATH,
  ISSUER,
  newApiUser,
  newTenant,
  partsOf,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TOKEN_PATH,
  TYPE_ACCESS_TOKEN,
  type Client,
} from "../helpers/token-kit.js";

const REVOKE_PATH = "/v2/auth/revoke";
const LIST = "/v2/api-users?limit=1";

let a: RunningService;
let admin: Client;
let other: Client;

before(async () => {
  a = await startTokenService({ env: ROOMY_RATE_LIMITS });
  const tenant = await newTenant(a.baseUrl);
  admin = tenant.admin;
  other = await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN");
});
after(() => disposeService(a));

/** The openid-client configuration of `who` against `baseUrl` (the issuer http://auth.test does not resolve here). */
function configuration(baseUrl: string, who: Client): client.Configuration {
  const config = new client.Configuration(
    {
      issuer: ISSUER,
      token_endpoint: `${baseUrl}${TOKEN_PATH}`,
      revocation_endpoint: `${baseUrl}${REVOKE_PATH}`,
      introspection_endpoint: `${baseUrl}${INTROSPECT_PATH}`,
    },
    who.clientId,
    undefined,
    client.ClientSecretBasic(who.clientSecret),
  );
  client.allowInsecureRequests(config);
  return config;
}

const revoke = (baseUrl: string, who: Client, token: string, extra: Record<string, string> = {}) =>
  postForm(baseUrl, REVOKE_PATH, { token, client_id: who.clientId, client_secret: who.clientSecret, ...extra });

describe("RFC 7009 token revocation", () => {
  test("openid-client's tokenRevocation revokes an access token: refused at once, inactive to introspection; revoking again is 200", async () => {
    const token = await accessTokenOf(a.baseUrl, admin);
    const untouched = await accessTokenOf(a.baseUrl, admin);
    assert.equal((await getWith(a.baseUrl, LIST, { token })).status, 200);
    await client.tokenRevocation(configuration(a.baseUrl, admin), token, { token_type_hint: "access_token" });
    const refused = await getWith(a.baseUrl, LIST, { token });
    assert.equal(refused.status, 401);
    assert.equal(refused.body.errorMessages[0].message, "The access token has been revoked");
    assert.equal((await client.tokenIntrospection(configuration(a.baseUrl, other), token)).active, false);
    assert.equal(
      (await getWith(a.baseUrl, LIST, { token: untouched })).status,
      200,
      "only that token: the client's other tokens live on",
    );
    const again = await revoke(a.baseUrl, admin, token);
    assert.equal(again.status, 200);
    // An empty JSON object with a JSON content type (simple-oauth2 refused a 200 without one).
    assert.deepEqual(again.body, {});
    assert.match(again.headers.get("content-type") ?? "", /^application\/json/);
    assert.equal(again.headers.get("cache-control"), "no-store");
  });

  test("a refresh token is revoked with its whole family; its access tokens are not (they end with their own lifetime)", async () => {
    const subject = await accessTokenOf(a.baseUrl, admin);
    const exchanged = await client.genericGrantRequest(configuration(a.baseUrl, other), GRANT_EXCHANGE, {
      subject_token: subject,
      subject_token_type: TYPE_ACCESS_TOKEN,
    });
    const refreshed = await client.refreshTokenGrant(configuration(a.baseUrl, other), exchanged.refresh_token!);
    await client.tokenRevocation(configuration(a.baseUrl, other), exchanged.refresh_token!);
    await assert.rejects(
      client.refreshTokenGrant(configuration(a.baseUrl, other), refreshed.refresh_token!),
      (error: unknown) => {
        assert.ok(error instanceof client.ResponseBodyError);
        assert.equal(error.error, "invalid_grant", "the newer refresh token of the family died too");
        return true;
      },
    );
  });

  test("unknown, malformed or already dead tokens are 200 (RFC 7009 2.2); credentials are required", async () => {
    for (const token of ["garbage", "eyJhbGciOiJub25lIn0.e30.", "x".repeat(2000)]) {
      const res = await revoke(a.baseUrl, admin, token, { token_type_hint: "refresh_token" });
      assert.equal(res.status, 200, token.slice(0, 20));
    }
    assert.equal(
      (await revoke(a.baseUrl, admin, "garbage", { token_type_hint: "something_else" })).status,
      200,
      "an unknown hint is ignored",
    );
    const othersToken = await accessTokenOf(a.baseUrl, other);
    const anonymous = await postForm(a.baseUrl, REVOKE_PATH, { token: othersToken });
    assertOAuthError(anonymous, 401, "CLIENT_AUTHENTICATION_REQUIRED", "invalid_client");
    assertOAuthError(
      await revoke(a.baseUrl, { ...admin, clientSecret: "wrong" }, othersToken),
      403,
      "INVALID_CLIENT",
      "invalid_client",
    );
    assertOAuthError(
      await postForm(a.baseUrl, REVOKE_PATH, { client_id: admin.clientId, client_secret: admin.clientSecret }),
      400,
      "API_VALIDATION_FAILED",
      "invalid_request",
    );
  });

  test("another client's live token (same TMC or another) gets the same 200 as a dead one and is not revoked", async () => {
    const stranger = (await newTenant(a.baseUrl)).admin;
    const dead = await accessTokenOf(a.baseUrl, other);
    assert.equal((await revoke(a.baseUrl, other, dead)).status, 200, "revoked by its own client: now dead");
    /** Everything a caller sees of an answer but its request id. */
    const seen = (res: Awaited<ReturnType<typeof revoke>>) => ({
      status: res.status,
      body: res.body,
      cacheControl: res.headers.get("cache-control"),
      contentType: res.headers.get("content-type"),
    });
    for (const caller of [admin, stranger]) {
      const live = await accessTokenOf(a.baseUrl, other);
      const subject = await accessTokenOf(a.baseUrl, admin);
      const exchanged = await client.genericGrantRequest(configuration(a.baseUrl, other), GRANT_EXCHANGE, {
        subject_token: subject,
        subject_token_type: TYPE_ACCESS_TOKEN,
      });
      const answers = [];
      for (const [token, hint] of [
        [live, "access_token"],
        [live, "refresh_token"],
        [exchanged.refresh_token!, "refresh_token"],
        [dead, "access_token"],
        ["unknown", "refresh_token"],
      ] as const) {
        const res = await revoke(a.baseUrl, caller, token, { token_type_hint: hint });
        answers.push(seen(res));
      }
      for (const answer of answers) assert.deepEqual(answer, answers[3], "indistinguishable from a dead token");
      assert.equal(answers[0]!.status, 200);
      assert.equal((await getWith(a.baseUrl, LIST, { token: live })).status, 200, "the live token is not revoked");
      const refreshed = await client.refreshTokenGrant(configuration(a.baseUrl, other), exchanged.refresh_token!);
      assert.ok(refreshed.access_token, "nor is the refresh token");
    }
  });

  test("the metadata advertises the revocation endpoint", async () => {
    const meta = (await (await fetch(`${a.baseUrl}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      unknown
    >;
    assert.equal(meta.revocation_endpoint, `${ISSUER}${REVOKE_PATH}`);
    assert.deepEqual(meta.revocation_endpoint_auth_methods_supported, [
      "client_secret_basic",
      "client_secret_post",
      "private_key_jwt",
    ]);
  });
});

describe(
  "revocation across instances and Redis loss",
  { skip: !isPostgres && "needs a shared Postgres and Redis" },
  () => {
    let b: RunningService;
    let redis: RedisClientType;
    before(async () => {
      b = await startTokenService({ env: ROOMY_RATE_LIMITS, storage: a.storage });
      redis = createClient({ url: TEST_REDIS_URL });
      redis.on("error", () => {});
      await redis.connect();
    });
    after(async () => {
      await redis?.close();
      await b?.stop();
    });

    test("revoked through A, the token is refused by B on the very next request", async () => {
      const token = await accessTokenOf(a.baseUrl, admin);
      assert.equal((await getWith(b.baseUrl, LIST, { token })).status, 200, "B has checked it once");
      assert.equal((await revoke(a.baseUrl, admin, token)).status, 200);
      assert.equal((await getWith(b.baseUrl, LIST, { token })).status, 401);
    });

    test("Redis losing the revocation (restored from before it) never brings the token back", async () => {
      const token = await accessTokenOf(a.baseUrl, admin);
      const prefix = redisKeyPrefixOf(a.storage);
      const jti = `jti:${partsOf(token).payload.jti}`;
      const watermarkBefore = await redis.get(watermarkKey(prefix, bucketOf(jti)));
      assert.equal((await revoke(a.baseUrl, admin, token)).status, 200);
      const key = credentialKey(prefix, jti);
      assert.match((await redis.get(key)) ?? "", /^r:\d+$/, "the revocation is in Redis");
      assert.ok((await redis.ttl(key)) > 3000, "kept as long as the token lives (1 h), not the cache's 5 min");
      // A restore from a snapshot taken just before: the key and the watermark's raise are gone.
      await redis.del(key);
      await redis.set(watermarkKey(prefix, bucketOf(jti)), watermarkBefore ?? "0");
      for (const service of [a, b])
        assert.equal(
          (await getWith(service.baseUrl, LIST, { token })).status,
          401,
          "Postgres answers while the cache is behind",
        );
    });
  },
);
