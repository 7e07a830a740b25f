import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { decodeJwt, decodeProtectedHeader, generateKeyPair, SignJWT } from "jose";
import { AccessTokens, type NewAccessToken } from "../../../src/domain/tokens/access-tokens.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import {
  ACCESS_TTL,
  AUDIENCE,
  createPgliteFixture,
  ISSUER,
  newApiUser,
  newTenant,
  OTHER_API,
  type PgliteDomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";

const notValid = { code: "USER_NOT_AUTHENTICATED", message: "The access token is not valid" } as const;
const expired = { code: "USER_NOT_AUTHENTICATED", message: "The access token has expired" } as const;
const revoked = { code: "USER_NOT_AUTHENTICATED", message: "The access token has been revoked" } as const;

describe("AccessTokens", () => {
  let f: PgliteDomainFixture;
  let tmcId: string;
  let orgId: string;
  let client: ProvisionedApiUser;
  beforeEach(async () => {
    f = await createPgliteFixture();
    ({ tmcId, orgId } = await newTenant(f));
    client = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", orgId });
  });

  const spec = (overrides: Partial<NewAccessToken> = {}): NewAccessToken => ({
    clientId: client.clientId,
    tmcId,
    orgId,
    role: "COMPANY_ADMIN",
    scopes: ["users:read", "openid"],
    subject: client.clientId,
    subjectKind: "CLIENT",
    audience: [AUDIENCE],
    credentials: [[client.clientId, 1]],
    ttlSeconds: ACCESS_TTL,
    ...overrides,
  });
  const issue = async (overrides: Partial<NewAccessToken> = {}) =>
    (await f.accessTokens.issue(spec(overrides))).accessToken;
  /** A JWT signed with the service's genuine key but claims of the test's choosing. */
  const signed = (claims: Record<string, unknown>, header: Record<string, unknown> = {}) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid: f.signingKeys.signingKey.kid, ...header })
      .sign(f.signingKeys.signingKey.key);

  test("RFC 9068 tokens: at+jwt, EdDSA, the ring's kid, and exactly the documented claims", async () => {
    const token = await issue();
    assert.deepEqual(decodeProtectedHeader(token), { alg: "EdDSA", typ: "at+jwt", kid: f.signingKeys.signingKey.kid });
    const claims = decodeJwt(token);
    const iat = f.clock.epochSeconds;
    assert.match(String(claims.jti), /^[A-Za-z0-9_-]{22}$/);
    assert.deepEqual(
      { ...claims, jti: "<random>" },
      {
        client_id: client.clientId,
        tmc_id: tmcId,
        org_id: orgId,
        role: "COMPANY_ADMIN",
        scope: "users:read openid",
        sub_kind: "CLIENT",
        gen: 1,
        iss: ISSUER,
        sub: client.clientId,
        aud: AUDIENCE,
        iat,
        exp: iat + ACCESS_TTL,
        jti: "<random>",
      },
    );
  });

  test("verify returns the principal the token describes", async () => {
    const token = await issue({ audience: [AUDIENCE, OTHER_API] });
    const principal = await f.accessTokens.verify(token, AUDIENCE);
    assert.deepEqual(
      { ...principal, tokenId: "<jti>" },
      {
        clientId: client.clientId,
        tmcId,
        orgId,
        role: "COMPANY_ADMIN",
        scopes: ["users:read", "openid"],
        subject: client.clientId,
        subjectKind: "CLIENT",
        audience: [AUDIENCE, OTHER_API],
        act: undefined,
        credentials: [[client.clientId, 1]],
        tokenId: "<jti>",
        issuer: ISSUER,
        issuedAt: f.clock.epochSeconds,
        expiresAt: f.clock.epochSeconds + ACCESS_TTL,
        confirmation: undefined,
      },
    );
  });

  test("every token gets its own jti: 128 bits, base64url in 22 characters, over many refills of the random pool", async () => {
    const ids = new Set<string>();
    const count = 2_000; // 256 ids per 4 KB refill: several refills, and their boundaries
    for (let i = 0; i < count; i++) {
      const jti = String(decodeJwt(await issue()).jti);
      assert.match(jti, /^[A-Za-z0-9_-]{22}$/);
      assert.equal(Buffer.from(jti, "base64url").length, 16);
      ids.add(jti);
    }
    assert.equal(ids.size, count, "no jti repeats");
  });

  test("the first bound credential must be the obtaining client's own", async () => {
    await assert.rejects(f.accessTokens.issue(spec({ credentials: [["someone-else", 1]] })), {
      message: "the first bound credential must be the client's own",
    });
    await assert.rejects(f.accessTokens.issue(spec({ credentials: [] })), {
      message: "the first bound credential must be the client's own",
    });
  });

  test("expiry follows the injected clock, with 5 seconds of tolerance", async () => {
    const token = await issue();
    f.clock.advanceSeconds(ACCESS_TTL + 4);
    assert.equal((await f.accessTokens.verify(token)).clientId, client.clientId);
    f.clock.advanceSeconds(1);
    await rejectsWith(f.accessTokens.verify(token), expired);
  });

  test("audience: this service's own RPCs refuse a token meant for another API; unrestricted verification accepts it", async () => {
    const token = await issue({ audience: [OTHER_API] });
    await rejectsWith(f.accessTokens.verify(token, AUDIENCE), {
      code: "USER_NOT_AUTHENTICATED",
      message: "The access token is not meant for this service",
    });
    assert.deepEqual((await f.accessTokens.verify(token)).audience, [OTHER_API]);
  });

  test("forgeries are refused alike: alg none, another key, tampering, wrong typ, wrong issuer, missing claims", async () => {
    const token = await issue();
    const genuineClaims = () => decodeJwt(token);
    const [header, payload, signature] = token.split(".") as [string, string, string];
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    // Another key: one this service never had (another deployment's, say), under its own kid.
    const otherKey = (await generateKeyPair("EdDSA")).privateKey;
    const { gen: _gen, ...withoutGen } = genuineClaims();
    const forgeries = [
      "",
      "not.a.jwt",
      `${b64({ alg: "none", typ: "at+jwt" })}.${payload}.`,
      `${header}.${b64({ ...genuineClaims(), scope: "api-users" })}.${signature}`,
      `${header}.${payload}.${signature.slice(0, -4)}AAAA`,
      await new SignJWT(genuineClaims())
        .setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid: "another-deployments-key" })
        .sign(otherKey),
      await signed(genuineClaims(), { typ: "JWT" }),
      await signed({ ...genuineClaims(), iss: "http://evil.test" }),
      await signed(withoutGen),
      await new SignJWT(genuineClaims()).setProtectedHeader({ alg: "HS256", typ: "at+jwt" }).sign(Buffer.alloc(32, 1)),
    ];
    for (const forged of forgeries) await rejectsWith(f.accessTokens.verify(forged), notValid);
    const otherIssuer = new AccessTokens(f.signingKeys, f.generations, "http://other-issuer.test", f.clock.now);
    await rejectsWith(otherIssuer.verify(token), notValid);
  });

  test("each refusal names, for the operator's log only, the check that failed (the caller's message stays uniform)", async () => {
    const token = await issue();
    const genuineClaims = () => decodeJwt(token);
    const [header, payload, signature] = token.split(".") as [string, string, string];
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const otherKey = (await generateKeyPair("EdDSA")).privateKey;
    const checkOf = async (presented: string, audience?: string) => {
      try {
        await f.accessTokens.verify(presented, audience);
      } catch (error) {
        return (error as { logged?: Record<string, string> }).logged?.refusalReason;
      }
      return "accepted";
    };
    const cases: Array<[string, string, string?]> = [
      ["not.a.jwt", "format"],
      [`${b64({ alg: "none", typ: "at+jwt" })}.${payload}.`, "algorithm"],
      [
        `${header}.${payload}.${signature.slice(0, 10)}${signature[10] === "A" ? "B" : "A"}${signature.slice(11)}`,
        "signature",
      ],
      [
        await new SignJWT(genuineClaims())
          .setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid: "another-deployments-key" })
          .sign(otherKey),
        "key",
      ],
      [await signed(genuineClaims(), { typ: "JWT" }), "type"],
      [await signed({ ...genuineClaims(), iss: "http://evil.test" }), "issuer"],
      [await signed({ ...genuineClaims(), role: "SUPERUSER" }), "claims"],
      [await issue({ audience: [OTHER_API] }), "audience", AUDIENCE],
    ];
    for (const [presented, check, audience] of cases) assert.equal(await checkOf(presented, audience), check, check);
    f.clock.advanceSeconds(ACCESS_TTL + 5);
    assert.equal(await checkOf(token), "expiry");
    const fresh = await issue();
    await f.admin.rotate({ clientId: "operator", tmcId }, client.clientId, "r");
    assert.equal(await checkOf(fresh), "revocation");
  });

  test("well-signed claims of the wrong shape are 'malformed'", async () => {
    const token = await issue();
    const genuineClaims = () => decodeJwt(token);
    await rejectsWith(f.accessTokens.verify(await signed({ ...genuineClaims(), role: "SUPERUSER" })), {
      code: "USER_NOT_AUTHENTICATED",
      message: "The access token is malformed",
    });
    await rejectsWith(f.accessTokens.verify(await signed({ ...genuineClaims(), creds: [["x", "1"]] })), {
      code: "USER_NOT_AUTHENTICATED",
      message: "The access token is malformed",
    });
  });

  test("a rotated or revoked client's tokens are refused at once; so is a token bound to another client's rotated credential", async () => {
    const caller = { clientId: "operator", tmcId };
    const subjectClient = await newApiUser(f, tmcId);
    const token = await issue();
    const bound = await issue({
      credentials: [
        [client.clientId, 1],
        [subjectClient.clientId, 1],
      ],
    });
    assert.equal((await f.accessTokens.verify(bound)).credentials.length, 2);

    await f.admin.rotate(caller, subjectClient.clientId, "r");
    await rejectsWith(f.accessTokens.verify(bound), revoked);
    assert.equal(
      (await f.accessTokens.verify(token)).clientId,
      client.clientId,
      "the client's own token does not depend on the other",
    );

    await f.admin.rotate(caller, client.clientId, "r");
    await rejectsWith(f.accessTokens.verify(token), revoked);
    const fresh = await issue({ credentials: [[client.clientId, 2]] });
    assert.equal((await f.accessTokens.verify(fresh)).clientId, client.clientId);

    await f.admin.revoke(caller, client.clientId, "r");
    await rejectsWith(f.accessTokens.verify(fresh), revoked);
  });

  test("a token verified once is not verified again, yet every use still checks its expiry, its audience, its key and its revocation", async () => {
    const token = await issue();
    const other = await issue();
    await f.accessTokens.verify(token);
    await f.accessTokens.verify(token, AUDIENCE);
    await f.accessTokens.verifyMany([token, other, token], [AUDIENCE]);
    assert.equal(f.verifiedTokens.size, 2, "one entry per token, however often it is presented");

    await rejectsWith(f.accessTokens.verify(token, OTHER_API), {
      code: "USER_NOT_AUTHENTICATED",
      message: "The access token is not meant for this service",
    });
    assert.deepEqual(await f.accessTokens.verifyMany([token], [OTHER_API]), [undefined], "nor for that audience");
    const [header, payload, signature] = token.split(".") as [string, string, string];
    const altered = `${header}.${payload}.${signature.slice(0, -2)}${signature.endsWith("AA") ? "BB" : "AA"}`;
    await rejectsWith(f.accessTokens.verify(altered), notValid);

    f.clock.advanceSeconds(ACCESS_TTL + 4);
    assert.equal((await f.accessTokens.verify(token)).clientId, client.clientId, "within the tolerance");
    f.clock.advanceSeconds(1);
    await rejectsWith(f.accessTokens.verify(token), expired);
    assert.deepEqual(await f.accessTokens.verifyMany([token], [AUDIENCE]), [undefined]);
  });

  test("a verified token's key withdrawn by an emergency rotation: the token is refused at once, remembered or not", async () => {
    const token = await issue();
    await f.accessTokens.verify(token);
    await f.signingKeys.rotate({ immediately: true });
    await rejectsWith(f.accessTokens.verify(token), notValid);
    assert.deepEqual(await f.accessTokens.verifyMany([token], [AUDIENCE]), [undefined]);
  });

  test("a remembered token is still refused once its client is rotated", async () => {
    const token = await issue();
    await f.accessTokens.verify(token);
    await f.admin.rotate({ clientId: "operator", tmcId }, client.clientId, "r");
    await rejectsWith(f.accessTokens.verify(token), revoked);
    assert.deepEqual(await f.accessTokens.verifyMany([token], [AUDIENCE]), [undefined]);
  });

  test("while the cache is healthy, verification reads the database once per client, then never", async () => {
    const token = await issue();
    f.store.calls.length = 0;
    for (let i = 0; i < 5; i++) await f.accessTokens.verify(token);
    assert.deepEqual(f.store.calls, ["apiUsers.credentialStates"]);
    assert.deepEqual(f.cache.reads.length, 5, "one cache round trip per verification");
  });
});
