import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { decodeJwt, exportJWK, generateKeyPair, SignJWT } from "jose";
import { TokenService } from "../../../src/domain/tokens/token-service.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import {
  ACCESS_TTL,
  AUDIENCE,
  COMPANY_ADMIN_SCOPES,
  createDomainFixture,
  currentUser,
  LEGACY_TTL,
  newApiUser,
  newTenant,
  OTHER_API,
  REFRESH_TTL,
  TMC_ADMIN_SCOPES,
  tokenRequest,
  type DomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";

const EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";
const JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt";
const subjectTokenParam = [{ name: "subject_token", value: "invalid" }];

describe("TokenService", () => {
  let f: DomainFixture;
  let tmcId: string;
  let orgId: string;
  let admin: ProvisionedApiUser;
  let companyAdmin: ProvisionedApiUser;
  beforeEach(async () => {
    f = await createDomainFixture();
    ({ tmcId, orgId } = await newTenant(f));
    admin = await newApiUser(f, tmcId);
    companyAdmin = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", orgId });
  });

  const grant = (client: ProvisionedApiUser, fields: Parameters<typeof tokenRequest>[0] = {}) => f.tokenService.grant(client.user, tokenRequest(fields));
  const exchange = (client: ProvisionedApiUser, subjectToken: string, fields: Parameters<typeof tokenRequest>[0] = {}) =>
    grant(client, { grantType: EXCHANGE, subjectToken, subjectTokenType: ACCESS_TOKEN_TYPE, ...fields });

  describe("client_credentials", () => {
    test("no scope asked: every scope of the role; never a refresh token", async () => {
      const issued = await grant(admin);
      assert.deepEqual({ ...issued, accessToken: "<jwt>" }, { accessToken: "<jwt>", tokenType: "Bearer", expiresIn: ACCESS_TTL, scope: TMC_ADMIN_SCOPES.join(" ") });
      const claims = decodeJwt(issued.accessToken);
      assert.deepEqual(
        [claims.sub, claims.client_id, claims.aud, claims.role, claims.gen, claims.exp, claims.org_id],
        [admin.clientId, admin.clientId, AUDIENCE, "TMC_ADMIN", 1, f.clock.epochSeconds + ACCESS_TTL, undefined],
      );
      assert.equal((await grant(companyAdmin)).scope, COMPANY_ADMIN_SCOPES.join(" "));
      assert.equal(decodeJwt((await grant(companyAdmin)).accessToken).org_id, orgId);
    });

    test("asked scopes within the role are granted as asked (duplicates once); anything else is INVALID_SCOPE", async () => {
      assert.equal((await grant(admin, { scope: "users:read api-users users:read" })).scope, "users:read api-users");
      await rejectsWith(grant(companyAdmin, { scope: "users:read api-users" }), { code: "INVALID_SCOPE", message: "Scope not allowed: api-users" });
      await rejectsWith(grant(admin, { scope: "admin root" }), { code: "INVALID_SCOPE", message: "Scope not allowed: admin root" });
      for (const malformed of ["users:read  openid", " openid", "openid ", 'a"b', "a\\b", "ünïcode"]) {
        await rejectsWith(grant(admin, { scope: malformed }), { code: "INVALID_SCOPE", message: "The scope parameter is malformed" });
      }
    });

    test("audience: this service's by default, an allowed one on request, anything else INVALID_TARGET", async () => {
      assert.equal(decodeJwt((await grant(admin, { audience: OTHER_API })).accessToken).aud, OTHER_API);
      assert.equal(decodeJwt((await grant(admin, { audience: AUDIENCE })).accessToken).aud, AUDIENCE);
      await rejectsWith(grant(admin, { audience: "http://evil.test" }), {
        code: "INVALID_TARGET",
        message: "The requested audience is not allowed",
        params: [{ name: "audience", value: "http://evil.test" }],
      });
    });

    test("a subject_token or refresh_token with client_credentials is INVALID_REQUEST", async () => {
      const expected = { code: "INVALID_REQUEST", message: "client_credentials takes neither subject_token nor refresh_token" } as const;
      await rejectsWith(grant(admin, { refreshToken: "x" }), expected);
      await rejectsWith(grant(admin, { subjectToken: "x" }), expected);
    });
  });

  test("grant types: missing is INVALID_REQUEST, unknown is UNSUPPORTED_GRANT_TYPE", async () => {
    assert.throws(() => TokenService.checkGrantType(""), (e: unknown) => (e as { code: string; message: string }).message === "grant_type is required" && (e as { code: string }).code === "INVALID_REQUEST");
    for (const grantType of ["client_credentials", EXCHANGE, "refresh_token"]) TokenService.checkGrantType(grantType);
    await rejectsWith(grant(admin, { grantType: "password" }), {
      code: "UNSUPPORTED_GRANT_TYPE",
      message: 'Unsupported grant_type "password"',
      params: [{ name: "grant_type", value: "password" }],
    });
    await rejectsWith(async () => TokenService.checkGrantType("authorization_code"), {
      code: "UNSUPPORTED_GRANT_TYPE",
      message: 'Unsupported grant_type "authorization_code"',
      params: [{ name: "grant_type", value: "authorization_code" }],
    });
  });

  test("the legacy token: every scope of the role, the documented 86400 seconds", async () => {
    const issued = await f.tokenService.legacyToken(companyAdmin.user);
    assert.deepEqual([issued.expiresIn, issued.scope, issued.refreshToken], [LEGACY_TTL, COMPANY_ADMIN_SCOPES.join(" "), undefined]);
    assert.equal(decodeJwt(issued.accessToken).exp, f.clock.epochSeconds + LEGACY_TTL);
  });

  describe("token exchange of our own access token", () => {
    test("keeps sub, names the caller in act, binds both credentials, never widens, and returns a refresh token", async () => {
      const subject = (await grant(admin, { scope: "api-users users:read openid" })).accessToken;
      const issued = await exchange(companyAdmin, subject);
      assert.equal(issued.issuedTokenType, ACCESS_TOKEN_TYPE);
      assert.match(issued.refreshToken!, /^[A-Za-z0-9_-]{43}$/);
      assert.equal(issued.scope, "users:read openid", "api-users is outside the caller's role and is dropped");
      const claims = decodeJwt(issued.accessToken);
      assert.deepEqual(
        [claims.sub, claims.sub_kind, claims.client_id, claims.act, claims.gen, claims.creds, claims.aud],
        [admin.clientId, "CLIENT", companyAdmin.clientId, { sub: companyAdmin.clientId }, 1, [[admin.clientId, 1]], AUDIENCE],
      );
      const principal = await f.accessTokens.verify(issued.accessToken, AUDIENCE);
      assert.deepEqual(principal.credentials, [[companyAdmin.clientId, 1], [admin.clientId, 1]]);
    });

    test("an exchange of an exchanged token nests act, outermost actor first", async () => {
      const third = await newApiUser(f, tmcId);
      const first = (await exchange(companyAdmin, (await grant(admin)).accessToken)).accessToken;
      const second = decodeJwt((await exchange(third, first)).accessToken);
      assert.deepEqual(second.act, { sub: third.clientId, act: { sub: companyAdmin.clientId } });
      assert.equal(second.sub, admin.clientId);
      assert.deepEqual(second.creds, [[companyAdmin.clientId, 1], [admin.clientId, 1]]);
    });

    test("scope and audience may only narrow", async () => {
      const subject = (await grant(admin, { scope: "users:read", audience: OTHER_API })).accessToken;
      await rejectsWith(exchange(companyAdmin, subject, { scope: "users:read users:write" }), { code: "INVALID_SCOPE", message: "Scope wider than allowed: users:write" });
      await rejectsWith(exchange(companyAdmin, subject, { audience: AUDIENCE }), {
        code: "INVALID_TARGET",
        message: "The requested audience is not allowed",
        params: [{ name: "audience", value: AUDIENCE }],
      });
      const narrowed = decodeJwt((await exchange(companyAdmin, subject, { scope: "users:read", audience: OTHER_API })).accessToken);
      assert.deepEqual([narrowed.scope, narrowed.aud], ["users:read", OTHER_API]);
    });

    test("only a client of the same TMC may exchange; inactive or forged subject tokens are INVALID_REQUEST", async () => {
      const foreign = await newApiUser(f, (await newTenant(f)).tmcId);
      const subject = (await grant(admin)).accessToken;
      await rejectsWith(exchange(foreign, subject), { code: "INVALID_REQUEST", message: "The subject_token belongs to another TMC", params: subjectTokenParam });
      const [h, p, s] = subject.split(".");
      await rejectsWith(exchange(companyAdmin, `${h}.${p}.${s!.slice(0, -4)}AAAA`), {
        code: "INVALID_REQUEST",
        message: "The subject_token is not an active access token",
        params: subjectTokenParam,
      });
      await f.admin.rotate({ clientId: "operator", tmcId }, admin.clientId, "r");
      await rejectsWith(exchange(companyAdmin, subject), { code: "INVALID_REQUEST", message: "The subject_token is not an active access token", params: subjectTokenParam });
    });

    test("missing or unsupported exchange parameters are INVALID_REQUEST naming the parameter", async () => {
      await rejectsWith(grant(admin, { grantType: EXCHANGE }), { code: "INVALID_REQUEST", message: "subject_token is required for token exchange", params: subjectTokenParam });
      await rejectsWith(grant(admin, { grantType: EXCHANGE, subjectToken: "x" }), {
        code: "INVALID_REQUEST",
        message: "subject_token_type is required for token exchange",
        params: [{ name: "subject_token_type", value: "invalid" }],
      });
      await rejectsWith(grant(admin, { grantType: EXCHANGE, subjectToken: "x", subjectTokenType: "urn:example:saml" }), {
        code: "INVALID_REQUEST",
        message: "Unsupported subject_token_type",
        params: [{ name: "subject_token_type", value: "invalid" }],
      });
    });

    test("the exchanged token dies when either credential it is bound to is rotated", async () => {
      const exchanged = (await exchange(companyAdmin, (await grant(admin)).accessToken)).accessToken;
      await f.admin.rotate({ clientId: "operator", tmcId }, admin.clientId, "r");
      await rejectsWith(f.accessTokens.verify(exchanged), { code: "USER_NOT_AUTHENTICATED", message: "The access token has been revoked" });
    });
  });

  describe("token exchange of a trusted issuer's JWT", () => {
    const IDP = "https://idp.example";
    let signIdp: (claims: Record<string, unknown>, kid?: string) => Promise<string>;
    let userId: string;
    beforeEach(async () => {
      const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
      await f.trustedIssuers.add(tmcId, { issuer: IDP, jwksUri: undefined, jwks: JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: "idp-1", alg: "ES256" }] }), audience: undefined });
      signIdp = (claims, kid = "idp-1") =>
        new SignJWT(claims)
          .setProtectedHeader({ alg: "ES256", ...(kid ? { kid } : {}) })
          .setIssuer(IDP)
          .setIssuedAt(f.clock.epochSeconds)
          .setExpirationTime(f.clock.epochSeconds + 300)
          .sign(privateKey);
      userId = (await f.tenants.createUser({ orgId, email: "Ada@Acme.example", givenName: "Ada", familyName: "Lovelace", isActive: true })).id;
    });

    test("names a user of the TMC by email (case-insensitive): the new token's subject is that user", async () => {
      const issued = await grant(companyAdmin, { grantType: EXCHANGE, subjectToken: await signIdp({ email: "ada@acme.EXAMPLE" }), subjectTokenType: JWT_TYPE });
      const claims = decodeJwt(issued.accessToken);
      assert.deepEqual([claims.sub, claims.sub_kind, claims.act, claims.client_id, claims.creds], [userId, "USER", { sub: companyAdmin.clientId }, companyAdmin.clientId, undefined]);
      assert.equal(issued.scope, COMPANY_ADMIN_SCOPES.join(" "));
    });

    test("refusals: no kid, untrusted issuer, unknown user, another TMC's client", async () => {
      const bad = (why: string) => ({ code: "INVALID_REQUEST", message: `The subject_token is not acceptable: ${why}`, params: subjectTokenParam }) as const;
      const viaJwt = (client: ProvisionedApiUser, subjectToken: string) => grant(client, { grantType: EXCHANGE, subjectToken, subjectTokenType: JWT_TYPE });
      await rejectsWith(viaJwt(companyAdmin, "garbage"), bad("not a JWT"));
      await rejectsWith(viaJwt(companyAdmin, await signIdp({ email: "ada@acme.example" }, "")), bad("no key id (kid)"));
      await rejectsWith(viaJwt(companyAdmin, await signIdp({ email: "nobody@acme.example" })), {
        code: "INVALID_REQUEST",
        message: "The subject_token names no active user of the caller's TMC",
        params: subjectTokenParam,
      });
      const foreign = await newApiUser(f, (await newTenant(f)).tmcId);
      await rejectsWith(viaJwt(foreign, await signIdp({ email: "ada@acme.example" })), bad("its issuer is not trusted by the caller's TMC"));
      const expiring = await signIdp({ email: "ada@acme.example" });
      f.clock.advanceSeconds(300 + 30);
      await rejectsWith(viaJwt(companyAdmin, expiring), bad("its signature or claims do not verify"));
    });
  });

  describe("refresh", () => {
    const refresh = (client: ProvisionedApiUser, refreshToken: string, scope = "") => grant(client, { grantType: "refresh_token", refreshToken, scope });
    let first: { accessToken: string; refreshToken: string };
    beforeEach(async () => {
      const issued = await exchange(companyAdmin, (await grant(admin, { scope: "users:read openid" })).accessToken);
      first = { accessToken: issued.accessToken, refreshToken: issued.refreshToken! };
    });

    test("each use rotates the refresh token and keeps the subject, scope and audience", async () => {
      const second = await refresh(companyAdmin, first.refreshToken);
      assert.notEqual(second.refreshToken, first.refreshToken);
      assert.equal(second.scope, "users:read openid");
      const claims = decodeJwt(second.accessToken);
      assert.deepEqual([claims.sub, claims.act, claims.aud, claims.creds], [admin.clientId, { sub: companyAdmin.clientId }, AUDIENCE, [[admin.clientId, 1]]]);
      const narrowed = await refresh(companyAdmin, second.refreshToken!, "openid");
      assert.equal(narrowed.scope, "openid");
      const rows = f.store.db.refreshTokens.values();
      assert.equal(new Set(rows.map((r) => r.familyId)).size, 1, "one family");
      assert.deepEqual(rows.map((r) => r.usedAt?.toISOString()), ["2026-11-22T10:00:00.000Z", "2026-11-22T10:00:00.000Z", undefined]);
      assert.equal(rows.some((r) => r.tokenHash.toString("base64url") === first.refreshToken), false, "only HMACs are stored");
    });

    test("reusing a used refresh token revokes its whole family (RFC 9700 4.14.2)", async () => {
      const second = await refresh(companyAdmin, first.refreshToken);
      const reused = { code: "INVALID_GRANT", message: "The refresh token was already used; its family is revoked" } as const;
      await rejectsWith(refresh(companyAdmin, first.refreshToken), reused);
      await rejectsWith(refresh(companyAdmin, second.refreshToken!), reused);
      assert.ok(f.store.db.refreshTokens.values().every((r) => r.revokedAt?.toISOString() === "2026-11-22T10:00:00.000Z"));
    });

    test("a refused scope does not burn the refresh token (the transaction rolls back)", async () => {
      await rejectsWith(refresh(companyAdmin, first.refreshToken, "users:write"), { code: "INVALID_SCOPE", message: "Scope wider than allowed: users:write" });
      assert.equal((await refresh(companyAdmin, first.refreshToken)).scope, "users:read openid");
    });

    test("unknown, another client's, and expired refresh tokens are INVALID_GRANT", async () => {
      await rejectsWith(refresh(companyAdmin, "no-such-token"), { code: "INVALID_GRANT", message: "The refresh token is not valid" });
      await rejectsWith(refresh(admin, first.refreshToken), { code: "INVALID_GRANT", message: "The refresh token is not valid" });
      await rejectsWith(grant(companyAdmin, { grantType: "refresh_token" }), {
        code: "INVALID_REQUEST",
        message: "refresh_token is required",
        params: [{ name: "refresh_token", value: "invalid" }],
      });
      f.clock.advanceSeconds(REFRESH_TTL - 1);
      const stillValid = await refresh(companyAdmin, first.refreshToken);
      f.clock.advanceSeconds(REFRESH_TTL);
      await rejectsWith(refresh(companyAdmin, stillValid.refreshToken!), { code: "INVALID_GRANT", message: "The refresh token has expired" });
    });

    test("after the client's own credential is rotated, its refresh tokens are refused and their family revoked", async () => {
      await f.admin.rotate({ clientId: "operator", tmcId }, companyAdmin.clientId, "r");
      const rotatedClient = { ...companyAdmin, user: (await currentUser(f, companyAdmin.clientId))! };
      await rejectsWith(refresh(rotatedClient, first.refreshToken), { code: "INVALID_GRANT", message: "The refresh token's credential has been rotated" });
      assert.ok(f.store.db.refreshTokens.values().every((r) => r.revokedAt !== undefined));
    });

    test("revoking the client revokes its refresh tokens", async () => {
      await f.admin.revoke({ clientId: "operator", tmcId }, companyAdmin.clientId, "r");
      await rejectsWith(refresh(companyAdmin, first.refreshToken), { code: "INVALID_GRANT", message: "The refresh token was already used; its family is revoked" });
    });

    // The refresh-token row keeps `act`: a nested delegation chain survives a refresh.
    test("a refreshed token keeps the delegation chain of the exchange it descends from", async () => {
      const third = await newApiUser(f, tmcId);
      const nested = await exchange(third, first.accessToken);
      assert.deepEqual(decodeJwt(nested.accessToken).act, { sub: third.clientId, act: { sub: companyAdmin.clientId } });
      const refreshed = await refresh(third, nested.refreshToken!);
      assert.deepEqual(decodeJwt(refreshed.accessToken).act, { sub: third.clientId, act: { sub: companyAdmin.clientId } });
    });

    // Every bound credential is checked on refresh, not only the client's own.
    test("after the subject's credential is rotated, refresh must not hand out a token that is dead on arrival", async () => {
      await f.admin.rotate({ clientId: "operator", tmcId }, admin.clientId, "r");
      const outcome = await refresh(companyAdmin, first.refreshToken).then(
        async (issued) => `issued a token that verify answers: ${await f.accessTokens.verify(issued.accessToken).then(() => "valid", (e: Error) => e.message)}`,
        (e: Error) => e.message,
      );
      assert.equal(outcome, "The refresh token's credential has been rotated");
    });
  });
});
