import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { decodeJwt, exportJWK, generateKeyPair, SignJWT } from "jose";
import { tenantScope } from "../../../src/domain/shared/tenant-scope.js";
import { TokenService } from "../../../src/domain/tokens/token-service.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import {
  ACCESS_TTL,
  AUDIENCE,
  COMPANY_ADMIN_SCOPES,
  createPgliteFixture,
  currentUser,
  LEGACY_TTL,
  newApiUser,
  newTenant,
  OTHER_API,
  REFRESH_TTL,
  TMC_ADMIN_SCOPES,
  tokenRequest,
  type PgliteDomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";

const EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";
const JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt";
const subjectTokenParam = [{ name: "subject_token", value: "invalid" }];
/** mayActFor's refusal. */
const notYours = {
  code: "INVALID_REQUEST",
  message: "The caller may not obtain a token for the subject of this subject_token",
  params: subjectTokenParam,
} as const;
/** The audience the IdPs' tokens carry for this platform (trusted issuers need one). */
const IDP_AUDIENCE = "https://auth.test/idp-audience";

describe("TokenService", () => {
  let f: PgliteDomainFixture;
  /** The stored refresh tokens, oldest first. */
  const refreshTokenRows = async () =>
    (
      (await f.store.db("refresh_tokens").orderBy("created_at")) as Array<{
        family_id: string;
        token_hash: Uint8Array;
        used_at: Date | null;
        revoked_at: Date | null;
      }>
    ).map((r) => ({
      familyId: r.family_id,
      tokenHash: Buffer.from(r.token_hash),
      usedAt: r.used_at ?? undefined,
      revokedAt: r.revoked_at ?? undefined,
    }));
  let tmcId: string;
  let orgId: string;
  let admin: ProvisionedApiUser;
  let companyAdmin: ProvisionedApiUser;
  /** A second TMC admin, and a second company admin of the same company. */
  let admin2: ProvisionedApiUser;
  let colleague: ProvisionedApiUser;
  beforeEach(async () => {
    f = await createPgliteFixture();
    ({ tmcId, orgId } = await newTenant(f, 10));
    admin = await newApiUser(f, tmcId);
    companyAdmin = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", orgId });
    admin2 = await newApiUser(f, tmcId);
    colleague = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", orgId });
  });

  const grant = (client: ProvisionedApiUser, fields: Parameters<typeof tokenRequest>[0] = {}) =>
    f.tokenService.grant(client.user, tokenRequest(fields));
  const exchange = (
    client: ProvisionedApiUser,
    subjectToken: string,
    fields: Parameters<typeof tokenRequest>[0] = {},
  ) => grant(client, { grantType: EXCHANGE, subjectToken, subjectTokenType: ACCESS_TOKEN_TYPE, ...fields });

  describe("client_credentials", () => {
    test("no scope asked: every scope of the role; never a refresh token", async () => {
      const issued = await grant(admin);
      assert.deepEqual(
        { ...issued, accessToken: "<jwt>" },
        { accessToken: "<jwt>", tokenType: "Bearer", expiresIn: ACCESS_TTL, scope: TMC_ADMIN_SCOPES.join(" ") },
      );
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
      await rejectsWith(grant(companyAdmin, { scope: "users:read api-users" }), {
        code: "INVALID_SCOPE",
        message: "Scope not allowed: api-users",
      });
      await rejectsWith(grant(admin, { scope: "admin root" }), {
        code: "INVALID_SCOPE",
        message: "Scope not allowed: admin root",
      });
      for (const malformed of ["users:read  openid", " openid", "openid ", 'a"b', "a\\b", "ünïcode"]) {
        await rejectsWith(grant(admin, { scope: malformed }), {
          code: "INVALID_SCOPE",
          message: "The scope parameter is malformed",
        });
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

    test("resource (RFC 8707): an allowed absolute URI is the audience; a fragment, a relative URI, another target or an audience that is none of them is INVALID_TARGET", async () => {
      assert.equal(decodeJwt((await grant(admin, { resources: [OTHER_API] })).accessToken).aud, OTHER_API);
      assert.equal(
        decodeJwt((await grant(admin, { resources: [OTHER_API], audience: OTHER_API })).accessToken).aud,
        OTHER_API,
      );
      assert.deepEqual(
        decodeJwt((await grant(admin, { resources: [OTHER_API, AUDIENCE, OTHER_API] })).accessToken).aud,
        [OTHER_API, AUDIENCE],
        "repeated resources are all in aud, each once",
      );
      for (const [resources, audience, named] of [
        [["http://evil.test"], "", "http://evil.test"],
        [[`${OTHER_API}#frag`], "", `${OTHER_API}#frag`],
        [["/v2"], "", "/v2"],
        [["not a uri"], "", "not a uri"],
        [[OTHER_API, "http://evil.test"], "", "http://evil.test"],
        [[OTHER_API], AUDIENCE, AUDIENCE],
      ] as const) {
        await rejectsWith(grant(admin, { resources, audience }), {
          code: "INVALID_TARGET",
          message: "The requested audience is not allowed",
          params: [{ name: "audience", value: named }],
        });
      }
      const subject = (await grant(companyAdmin, { scope: "users:read", audience: OTHER_API })).accessToken;
      assert.equal(decodeJwt((await exchange(admin, subject, { resources: [OTHER_API] })).accessToken).aud, OTHER_API);
      await rejectsWith(exchange(admin, subject, { resources: [AUDIENCE] }), {
        code: "INVALID_TARGET",
        message: "The requested audience is not allowed",
        params: [{ name: "audience", value: AUDIENCE }],
      });
    });

    test("a subject_token or refresh_token with client_credentials is INVALID_REQUEST", async () => {
      const expected = {
        code: "INVALID_REQUEST",
        message: "client_credentials takes neither subject_token nor refresh_token",
      } as const;
      await rejectsWith(grant(admin, { refreshToken: "x" }), expected);
      await rejectsWith(grant(admin, { subjectToken: "x" }), expected);
    });
  });

  test("grant types: missing is INVALID_REQUEST, unknown is UNSUPPORTED_GRANT_TYPE", async () => {
    assert.throws(
      () => TokenService.checkGrantType(""),
      (e: unknown) =>
        (e as { code: string; message: string }).message === "grant_type is required" &&
        (e as { code: string }).code === "INVALID_REQUEST",
    );
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
    assert.deepEqual(
      [issued.expiresIn, issued.scope, issued.refreshToken],
      [LEGACY_TTL, COMPANY_ADMIN_SCOPES.join(" "), undefined],
    );
    assert.equal(decodeJwt(issued.accessToken).exp, f.clock.epochSeconds + LEGACY_TTL);
  });

  describe("token exchange of our own access token", () => {
    test("keeps sub, names the caller in act, binds both credentials, never widens, and returns a refresh token", async () => {
      // A TMC admin acting for a company admin of its TMC.
      const subject = (await grant(companyAdmin, { scope: "users:read openid" })).accessToken;
      const issued = await exchange(admin, subject);
      assert.equal(issued.issuedTokenType, ACCESS_TOKEN_TYPE);
      assert.match(issued.refreshToken!, /^[A-Za-z0-9_-]{43}$/);
      assert.equal(issued.scope, "users:read openid", "the subject's scopes, not the (wider) caller's role");
      const claims = decodeJwt(issued.accessToken);
      assert.deepEqual(
        [claims.sub, claims.sub_kind, claims.client_id, claims.role, claims.act, claims.gen, claims.creds, claims.aud],
        [
          companyAdmin.clientId,
          "CLIENT",
          admin.clientId,
          "TMC_ADMIN",
          { sub: admin.clientId },
          1,
          [[companyAdmin.clientId, 1]],
          AUDIENCE,
        ],
      );
      const principal = await f.accessTokens.verify(issued.accessToken, AUDIENCE);
      assert.deepEqual(principal.credentials, [
        [admin.clientId, 1],
        [companyAdmin.clientId, 1],
      ]);
    });

    test("a company admin may act for a colleague of its company (and for itself); the caller's role caps the scopes", async () => {
      const issued = await exchange(companyAdmin, (await grant(colleague, { scope: "users:read openid" })).accessToken);
      const claims = decodeJwt(issued.accessToken);
      assert.deepEqual(
        [claims.sub, claims.client_id, claims.org_id, claims.role, claims.act, claims.creds, issued.scope],
        [
          colleague.clientId,
          companyAdmin.clientId,
          orgId,
          "COMPANY_ADMIN",
          { sub: companyAdmin.clientId },
          [[colleague.clientId, 1]],
          "users:read openid",
        ],
      );
      assert.equal(
        decodeJwt((await exchange(companyAdmin, (await grant(companyAdmin)).accessToken)).accessToken).sub,
        companyAdmin.clientId,
        "its own token",
      );
      // A token of the colleague carrying a scope outside the company admin's role (minted with the service's key): dropped.
      const wide = (
        await f.accessTokens.issue({
          clientId: colleague.clientId,
          tmcId,
          orgId,
          role: "COMPANY_ADMIN",
          scopes: ["api-users", "users:read"],
          subject: colleague.clientId,
          subjectKind: "CLIENT",
          audience: [AUDIENCE],
          credentials: [[colleague.clientId, 1]],
          ttlSeconds: ACCESS_TTL,
        })
      ).accessToken;
      assert.equal(
        (await exchange(companyAdmin, wide)).scope,
        "users:read",
        "api-users is outside the caller's role and is dropped",
      );
      await rejectsWith(exchange(companyAdmin, wide, { scope: "api-users" }), {
        code: "INVALID_SCOPE",
        message: "Scope wider than allowed: api-users",
      });
    });

    test("an exchange of an exchanged token nests act, outermost actor first", async () => {
      const first = (await exchange(admin, (await grant(companyAdmin)).accessToken)).accessToken;
      const second = decodeJwt((await exchange(colleague, first)).accessToken);
      assert.deepEqual(second.act, { sub: colleague.clientId, act: { sub: admin.clientId } });
      assert.equal(second.sub, companyAdmin.clientId);
      assert.deepEqual(second.creds, [
        [admin.clientId, 1],
        [companyAdmin.clientId, 1],
      ]);
      const third = decodeJwt((await exchange(admin2, (await exchange(colleague, first)).accessToken)).accessToken);
      assert.deepEqual(third.act, {
        sub: admin2.clientId,
        act: { sub: colleague.clientId, act: { sub: admin.clientId } },
      });
      assert.equal(third.sub, companyAdmin.clientId);
    });

    test("scope and audience may only narrow", async () => {
      const subject = (await grant(companyAdmin, { scope: "users:read", audience: OTHER_API })).accessToken;
      await rejectsWith(exchange(admin, subject, { scope: "users:read users:write" }), {
        code: "INVALID_SCOPE",
        message: "Scope wider than allowed: users:write",
      });
      await rejectsWith(exchange(admin, subject, { audience: AUDIENCE }), {
        code: "INVALID_TARGET",
        message: "The requested audience is not allowed",
        params: [{ name: "audience", value: AUDIENCE }],
      });
      const narrowed = decodeJwt(
        (await exchange(admin, subject, { scope: "users:read", audience: OTHER_API })).accessToken,
      );
      assert.deepEqual([narrowed.scope, narrowed.aud], ["users:read", OTHER_API]);
    });

    test("only a client of the same TMC may exchange; inactive or forged subject tokens are INVALID_REQUEST", async () => {
      const foreign = await newApiUser(f, (await newTenant(f)).tmcId);
      const subject = (await grant(companyAdmin)).accessToken;
      await rejectsWith(exchange(foreign, subject), {
        code: "INVALID_REQUEST",
        message: "The subject_token belongs to another TMC",
        params: subjectTokenParam,
      });
      const [h, p, s] = subject.split(".");
      await rejectsWith(exchange(admin, `${h}.${p}.${s!.slice(0, -4)}AAAA`), {
        code: "INVALID_REQUEST",
        message: "The subject_token is not an active access token",
        params: subjectTokenParam,
      });
      await f.admin.rotate({ clientId: "operator", tmcId }, companyAdmin.clientId, "r");
      await rejectsWith(exchange(admin, subject), {
        code: "INVALID_REQUEST",
        message: "The subject_token is not an active access token",
        params: subjectTokenParam,
      });
    });

    test("missing or unsupported exchange parameters are INVALID_REQUEST naming the parameter", async () => {
      await rejectsWith(grant(admin, { grantType: EXCHANGE }), {
        code: "INVALID_REQUEST",
        message: "subject_token is required for token exchange",
        params: subjectTokenParam,
      });
      await rejectsWith(grant(admin, { grantType: EXCHANGE, subjectToken: "x" }), {
        code: "INVALID_REQUEST",
        message: "subject_token_type is required for token exchange",
        params: [{ name: "subject_token_type", value: "invalid" }],
      });
      await rejectsWith(
        grant(admin, { grantType: EXCHANGE, subjectToken: "x", subjectTokenType: "urn:example:saml" }),
        {
          code: "INVALID_REQUEST",
          message: "Unsupported subject_token_type",
          params: [{ name: "subject_token_type", value: "invalid" }],
        },
      );
    });

    test("the exchanged token dies when either credential it is bound to is rotated", async () => {
      const subjectSide = (await exchange(admin, (await grant(companyAdmin)).accessToken)).accessToken;
      const actorSide = (await exchange(companyAdmin, (await grant(colleague)).accessToken)).accessToken;
      await f.accessTokens.verify(subjectSide);
      await f.accessTokens.verify(actorSide);
      await f.admin.rotate({ clientId: "operator", tmcId }, companyAdmin.clientId, "r");
      await rejectsWith(f.accessTokens.verify(subjectSide), {
        code: "USER_NOT_AUTHENTICATED",
        message: "The access token has been revoked",
      }); // its subject's
      await rejectsWith(f.accessTokens.verify(actorSide), {
        code: "USER_NOT_AUTHENTICATED",
        message: "The access token has been revoked",
      }); // its actor's
    });
  });

  describe("who may exchange whose token: a TMC admin anyone's of its TMC, a company admin only its own company's, never a TMC admin's", () => {
    let otherOrgId: string;
    let otherCompanyAdmin: ProvisionedApiUser;
    beforeEach(async () => {
      otherOrgId = (await f.tenants.createCompany(tmcId, "Globex")).id;
      otherCompanyAdmin = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", orgId: otherOrgId });
    });

    test("a company admin may not exchange a TMC admin's token", async () => {
      await rejectsWith(exchange(companyAdmin, (await grant(admin)).accessToken), notYours);
      await rejectsWith(
        exchange(companyAdmin, (await grant(admin2, { scope: "users:read" })).accessToken, { scope: "users:read" }),
        notYours,
      );
    });

    test("a company admin may not exchange the token of another company's API user", async () => {
      await rejectsWith(exchange(companyAdmin, (await grant(otherCompanyAdmin)).accessToken), notYours);
      await rejectsWith(exchange(otherCompanyAdmin, (await grant(companyAdmin)).accessToken), notYours);
      // The TMC admin may act for both.
      for (const subject of [companyAdmin, otherCompanyAdmin])
        assert.equal(
          decodeJwt((await exchange(admin, (await grant(subject)).accessToken)).accessToken).sub,
          subject.clientId,
        );
    });

    test("nested exchange: the subject decides, not who obtained the token presented", async () => {
      // A TMC admin's token exchanged by another TMC admin still has a TMC admin as subject.
      const ofTmcAdmin = (await exchange(admin2, (await grant(admin)).accessToken)).accessToken;
      assert.equal(decodeJwt(ofTmcAdmin).sub, admin.clientId);
      await rejectsWith(exchange(companyAdmin, ofTmcAdmin), notYours);
      // A TMC admin's exchange for company A's admin: A's colleague may go on, company B's admin may not.
      const ofCompanyA = (await exchange(admin, (await grant(companyAdmin)).accessToken)).accessToken;
      await rejectsWith(exchange(otherCompanyAdmin, ofCompanyA), notYours);
      assert.equal(decodeJwt((await exchange(colleague, ofCompanyA)).accessToken).sub, companyAdmin.clientId);
      // A company admin's own exchange cannot launder another company's subject through it either.
      const ofCompanyB = (await exchange(otherCompanyAdmin, (await grant(otherCompanyAdmin)).accessToken)).accessToken;
      await rejectsWith(exchange(companyAdmin, ofCompanyB), notYours);
    });

    test("a user subject (from an external JWT exchanged by the TMC admin): only its own company's admin may go on", async () => {
      const IDP = "https://idp.nested.example";
      const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
      await f.trustedIssuers.add(tmcId, {
        issuer: IDP,
        jwksUri: undefined,
        jwks: JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: "k", alg: "ES256" }] }),
        audience: IDP_AUDIENCE,
      });
      const ada = await f.tenants.createUser({
        orgId,
        email: "ada@acme.example",
        givenName: "Ada",
        familyName: "Lovelace",
        isActive: true,
      });
      const jwt = await new SignJWT({ email: "ada@acme.example" })
        .setProtectedHeader({ alg: "ES256", kid: "k" })
        .setIssuer(IDP)
        .setAudience(IDP_AUDIENCE)
        .setIssuedAt(f.clock.epochSeconds)
        .setExpirationTime(f.clock.epochSeconds + 300)
        .sign(privateKey);
      const ofAda = (await grant(admin, { grantType: EXCHANGE, subjectToken: jwt, subjectTokenType: JWT_TYPE }))
        .accessToken;
      assert.deepEqual([decodeJwt(ofAda).sub, decodeJwt(ofAda).sub_kind], [ada.id, "USER"]);
      await rejectsWith(exchange(otherCompanyAdmin, ofAda), notYours);
      const onward = decodeJwt((await exchange(companyAdmin, ofAda)).accessToken);
      assert.deepEqual(
        [onward.sub, onward.sub_kind, onward.act],
        [ada.id, "USER", { sub: companyAdmin.clientId, act: { sub: admin.clientId } }],
      );
    });

    test("introspection follows the same rule: a company admin sees only its own company's tokens as active", async () => {
      const adminToken = (await grant(admin)).accessToken;
      const colleagueToken = (await grant(colleague)).accessToken;
      const otherCompanyToken = (await grant(otherCompanyAdmin)).accessToken;
      assert.equal(
        await f.tokenService.introspect(companyAdmin.user, adminToken),
        undefined,
        "a TMC admin's token is inactive to a company admin",
      );
      assert.equal(
        await f.tokenService.introspect(companyAdmin.user, otherCompanyToken),
        undefined,
        "another company's",
      );
      assert.equal(
        await f.tokenService.introspect(companyAdmin.user, (await exchange(admin2, adminToken)).accessToken),
        undefined,
        "a TMC admin subject, obtained by exchange",
      );
      assert.equal((await f.tokenService.introspect(companyAdmin.user, colleagueToken))?.subject, colleague.clientId);
      assert.equal(
        (await f.tokenService.introspect(companyAdmin.user, (await exchange(admin, colleagueToken)).accessToken))
          ?.clientId,
        admin.clientId,
        "a colleague subject, whoever obtained it",
      );
      for (const token of [adminToken, colleagueToken, otherCompanyToken])
        assert.ok(await f.tokenService.introspect(admin.user, token), "the TMC admin sees them all");
    });
  });

  describe("requested_token_type", () => {
    const refusedType = {
      code: "INVALID_REQUEST",
      message:
        "requested_token_type: only urn:ietf:params:oauth:token-type:access_token can be issued, by token exchange",
      params: [{ name: "requested_token_type", value: "invalid" }],
    } as const;

    test("the access-token type is honoured with token exchange", async () => {
      const issued = await exchange(admin, (await grant(companyAdmin)).accessToken, {
        requestedTokenType: ACCESS_TOKEN_TYPE,
      });
      assert.deepEqual(
        [issued.issuedTokenType, decodeJwt(issued.accessToken).sub],
        [ACCESS_TOKEN_TYPE, companyAdmin.clientId],
      );
    });

    test("any other type with token exchange is INVALID_REQUEST naming requested_token_type", async () => {
      const subject = (await grant(companyAdmin)).accessToken;
      for (const requestedTokenType of [
        "urn:ietf:params:oauth:token-type:refresh_token",
        "urn:ietf:params:oauth:token-type:id_token",
        JWT_TYPE,
        "urn:example:unknown",
        "access_token",
      ]) {
        await rejectsWith(exchange(admin, subject, { requestedTokenType }), refusedType);
      }
    });

    test("any value with client_credentials or refresh_token is INVALID_REQUEST, and the refresh token is not spent", async () => {
      await rejectsWith(grant(admin, { requestedTokenType: ACCESS_TOKEN_TYPE }), refusedType);
      await rejectsWith(
        grant(admin, { requestedTokenType: "urn:ietf:params:oauth:token-type:refresh_token" }),
        refusedType,
      );
      const { refreshToken } = await exchange(admin, (await grant(companyAdmin)).accessToken);
      await rejectsWith(
        grant(admin, {
          grantType: "refresh_token",
          refreshToken: refreshToken!,
          requestedTokenType: ACCESS_TOKEN_TYPE,
        }),
        refusedType,
      );
      await rejectsWith(
        grant(admin, {
          grantType: "refresh_token",
          refreshToken: refreshToken!,
          requestedTokenType: "urn:ietf:params:oauth:token-type:refresh_token",
        }),
        refusedType,
      );
      assert.match(
        (await grant(admin, { grantType: "refresh_token", refreshToken: refreshToken! })).refreshToken!,
        /^[A-Za-z0-9_-]{43}$/,
      );
    });
  });

  describe("token exchange of a trusted issuer's JWT", () => {
    const IDP = "https://idp.example";
    const bad = (why: string) =>
      ({
        code: "INVALID_REQUEST",
        message: `The subject_token is not acceptable: ${why}`,
        params: subjectTokenParam,
      }) as const;
    const viaJwt = (client: ProvisionedApiUser, subjectToken: string) =>
      grant(client, { grantType: EXCHANGE, subjectToken, subjectTokenType: JWT_TYPE });
    let jwks: string;
    let privateKey: Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];
    /** A JWT of the IdP: iss, aud, iat now and exp in 300 s unless overridden (`null` leaves the claim out). */
    let signIdp: (
      claims: Record<string, unknown>,
      options?: { kid?: string; aud?: string | null; iat?: number | null; exp?: number },
    ) => Promise<string>;
    let userId: string;
    beforeEach(async () => {
      const pair = await generateKeyPair("ES256", { extractable: true });
      privateKey = pair.privateKey;
      jwks = JSON.stringify({ keys: [{ ...(await exportJWK(pair.publicKey)), kid: "idp-1", alg: "ES256" }] });
      await f.trustedIssuers.add(tmcId, { issuer: IDP, jwksUri: undefined, jwks, audience: IDP_AUDIENCE });
      signIdp = (
        claims,
        { kid = "idp-1", aud = IDP_AUDIENCE, iat = f.clock.epochSeconds, exp = f.clock.epochSeconds + 300 } = {},
      ) => {
        const jwt = new SignJWT(claims)
          .setProtectedHeader({ alg: "ES256", ...(kid ? { kid } : {}) })
          .setIssuer(IDP)
          .setExpirationTime(exp);
        if (aud !== null) jwt.setAudience(aud);
        if (iat !== null) jwt.setIssuedAt(iat);
        return jwt.sign(privateKey);
      };
      userId = (
        await f.tenants.createUser({
          orgId,
          email: "Ada@Acme.example",
          givenName: "Ada",
          familyName: "Lovelace",
          isActive: true,
        })
      ).id;
    });

    test("names a user of the TMC by email (case-insensitive): the new token's subject is that user", async () => {
      const issued = await viaJwt(companyAdmin, await signIdp({ email: "ada@acme.EXAMPLE" }));
      const claims = decodeJwt(issued.accessToken);
      assert.deepEqual(
        [claims.sub, claims.sub_kind, claims.act, claims.client_id, claims.creds],
        [userId, "USER", { sub: companyAdmin.clientId }, companyAdmin.clientId, undefined],
      );
      assert.equal(issued.scope, COMPANY_ADMIN_SCOPES.join(" "));
      assert.equal(
        decodeJwt((await viaJwt(admin, await signIdp({ email: "ada@acme.example" }))).accessToken).sub,
        userId,
        "the TMC admin too",
      );
    });

    test("refusals: not a JWT, no kid, untrusted issuer, unknown user, another TMC's client, expired", async () => {
      await rejectsWith(viaJwt(companyAdmin, "garbage"), bad("not a JWT"));
      await rejectsWith(
        viaJwt(companyAdmin, await signIdp({ email: "ada@acme.example" }, { kid: "" })),
        bad("no key id (kid)"),
      );
      await rejectsWith(viaJwt(companyAdmin, await signIdp({ email: "nobody@acme.example" })), {
        code: "INVALID_REQUEST",
        message: "The subject_token names no active user of the caller's company",
        params: subjectTokenParam,
      });
      const foreign = await newApiUser(f, (await newTenant(f)).tmcId);
      await rejectsWith(
        viaJwt(foreign, await signIdp({ email: "ada@acme.example" })),
        bad("its issuer is not trusted by the caller's TMC"),
      );
      const expiring = await signIdp({ email: "ada@acme.example" });
      f.clock.advanceSeconds(300 + 30);
      await rejectsWith(viaJwt(companyAdmin, expiring), bad("its signature or claims do not verify"));
    });

    test("a company admin may not exchange the JWT of a user of another company; the TMC admin may", async () => {
      const otherOrgId = (await f.tenants.createCompany(tmcId, "Globex")).id;
      const bob = await f.tenants.createUser({
        orgId: otherOrgId,
        email: "bob@globex.example",
        givenName: "Bob",
        familyName: "B",
        isActive: true,
      });
      // Looked up within the company admin's own company: another company's user is not there (nothing learnt about it).
      await rejectsWith(viaJwt(companyAdmin, await signIdp({ email: "bob@globex.example" })), {
        code: "INVALID_REQUEST",
        message: "The subject_token names no active user of the caller's company",
        params: subjectTokenParam,
      });
      const otherCompanyAdmin = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", orgId: otherOrgId });
      assert.equal(
        decodeJwt((await viaJwt(otherCompanyAdmin, await signIdp({ email: "bob@globex.example" }))).accessToken).sub,
        bob.id,
      );
      await rejectsWith(viaJwt(otherCompanyAdmin, await signIdp({ email: "ada@acme.example" })), {
        code: "INVALID_REQUEST",
        message: "The subject_token names no active user of the caller's company",
        params: subjectTokenParam,
      });
      assert.equal(
        decodeJwt((await viaJwt(admin, await signIdp({ email: "bob@globex.example" }))).accessToken).sub,
        bob.id,
      );
    });

    test("an email two companies hold (a SCIM squat): a company admin looks within its company; a TMC-wide issuer names no one, whatever externalId either carries; an issuer bound to a company names its user", async () => {
      const squatterOrg = (await f.tenants.createCompany(tmcId, "Initech")).id;
      const twin = await f.tenants.createUser({
        orgId: squatterOrg,
        email: "ADA@acme.example",
        givenName: "Ada",
        familyName: "Twin",
        isActive: true,
      });
      const setExternalId = (id: string, externalId: string | null) =>
        f.store.db("users").where({ id }).update({ external_id: externalId });
      // The company admin looks within its company: the squat changes nothing for it.
      assert.equal(
        decodeJwt((await viaJwt(companyAdmin, await signIdp({ email: "ada@acme.example" }))).accessToken).sub,
        userId,
      );
      // The TMC admin through a TMC-wide issuer: any company's SCIM client writes any externalId, so
      // neither the token's sub nor an externalId picks one of them: refused, never one picked.
      const ambiguous = {
        code: "INVALID_GRANT",
        message:
          "The subject_token's email names active users of more than one company of the TMC: only an issuer bound to a company names one of them",
        params: [{ name: "subject_token", value: "ambiguous email" }],
      } as const;
      const carried = [
        [null, null],
        [null, "idp-user-ada"], // the planted externalId: the squatter carries the real user's subject
        ["idp-user-ada", "squatter-guess"],
        ["idp-user-ada", "idp-user-ada"],
      ] as const;
      for (const [real, squatter] of carried) {
        await setExternalId(userId, real);
        await setExternalId(twin.id, squatter);
        for (const claims of [{ email: "ada@acme.example" }, { email: "ada@acme.example", sub: "idp-user-ada" }]) {
          await rejectsWith(viaJwt(admin, await signIdp(claims)), ambiguous);
        }
      }
      const warning = f.logger.lines.findLast((l) => l.level === "warn");
      assert.ok(warning);
      assert.deepEqual(
        { ...warning.object, companyIds: new Set((warning.object as { companyIds: string[] }).companyIds) },
        {
          tmcId,
          clientId: admin.clientId,
          issuer: IDP,
          companyIds: new Set([orgId, squatterOrg]),
          userIds: [userId, twin.id].sort(),
          outcome: "refused",
        },
      );
      // Bound to the real user's company, the issuer names that company's user, planted externalId or not.
      await f.trustedIssuers.add(tmcId, {
        issuer: IDP,
        jwksUri: undefined,
        jwks,
        audience: IDP_AUDIENCE,
        companyId: orgId,
      });
      assert.equal(
        decodeJwt((await viaJwt(admin, await signIdp({ email: "ada@acme.example", sub: "idp-user-ada" }))).accessToken)
          .sub,
        userId,
      );
      assert.equal(
        (f.logger.lines.findLast((l) => l.level === "warn")?.object as { outcome?: string }).outcome,
        "named within the issuer's company",
      );
      // Added again without a company: unbound, so ambiguous again; once one of them is inactive, it names one user.
      await f.trustedIssuers.add(tmcId, { issuer: IDP, jwksUri: undefined, jwks, audience: IDP_AUDIENCE });
      await rejectsWith(viaJwt(admin, await signIdp({ email: "ada@acme.example" })), ambiguous);
      await f.store.db("users").where({ id: twin.id }).update({ is_active: false });
      assert.equal(
        decodeJwt((await viaJwt(admin, await signIdp({ email: "ada@acme.example" }))).accessToken).sub,
        userId,
      );
    });

    test("an issuer is added only with an audience: API_VALIDATION_FAILED naming audience", async () => {
      const other = "https://idp.other.example";
      const noAudience = {
        code: "API_VALIDATION_FAILED",
        message: "audience is required: the audience the issuer's tokens carry for this platform",
        params: [{ name: "audience", value: "" }],
      } as const;
      await rejectsWith(
        f.trustedIssuers.add(tmcId, { issuer: other, jwksUri: undefined, jwks, audience: undefined }),
        noAudience,
      );
      await rejectsWith(
        f.trustedIssuers.add(tmcId, {
          issuer: other,
          jwksUri: "https://idp.other.example/jwks",
          jwks: undefined,
          audience: "",
        }),
        noAudience,
      );
      assert.equal(
        await f.repos.trustedIssuers.find(f.uow.direct, tenantScope(tmcId), other),
        undefined,
        "nothing stored",
      );
    });

    test("an issuer stored without an audience (registered before it was required) is refused at exchange", async () => {
      await f.repos.trustedIssuers.upsert(f.uow.direct, tenantScope(tmcId), {
        issuer: IDP,
        jwksUri: undefined,
        jwks: JSON.parse(jwks) as { keys: unknown[] },
        audience: undefined,
        companyId: undefined,
      });
      await rejectsWith(
        viaJwt(admin, await signIdp({ email: "ada@acme.example" })),
        bad("its issuer is registered without an audience"),
      );
      await rejectsWith(
        viaJwt(admin, await signIdp({ email: "ada@acme.example" }, { aud: null })),
        bad("its issuer is registered without an audience"),
      );
    });

    test("a jwksUri is registered under a client's jwks_uri rules: http to another host is API_VALIDATION_FAILED naming jwksUri", async () => {
      const other = "https://idp.http.example";
      for (const [jwksUri, message] of [
        ["http://idp.http.example/jwks", "jwks_uri must use https"],
        ["https://user:pw@idp.http.example/jwks", "jwks_uri must not carry user info"],
        ["https://idp.http.example/jwks#k", "jwks_uri must not carry a fragment"],
        ["not a url", "jwks_uri must be an absolute URL"],
      ]) {
        await rejectsWith(
          f.trustedIssuers.add(tmcId, { issuer: other, jwksUri, jwks: undefined, audience: IDP_AUDIENCE }),
          {
            code: "API_VALIDATION_FAILED",
            message: message!,
            params: [{ name: "jwksUri", value: "invalid" }],
          },
        );
      }
      assert.equal(await f.repos.trustedIssuers.find(f.uow.direct, tenantScope(tmcId), other), undefined);
      // An https URL is registered as the URL parser writes it, and not fetched (the fixture has no network).
      await f.trustedIssuers.add(tmcId, {
        issuer: other,
        jwksUri: "HTTPS://IdP.Http.Example:443/jwks",
        jwks: undefined,
        audience: IDP_AUDIENCE,
      });
      assert.equal(
        (await f.repos.trustedIssuers.find(f.uow.direct, tenantScope(tmcId), other))?.jwksUri,
        "https://idp.http.example/jwks",
      );
    });

    test("an issuer whose key set cannot be had refuses the exchange like a token that does not verify, reason logged", async () => {
      const cases = [
        // Registered before the URL rules applied: never fetched in clear text.
        ["http://idp.example/jwks", "jwks_uri must use https"],
        // The fixture's fetcher reaches nothing.
        ["https://idp.example/jwks", "jwks_uri could not be reached"],
      ] as const;
      for (const [jwksUri, reason] of cases) {
        await f.repos.trustedIssuers.upsert(f.uow.direct, tenantScope(tmcId), {
          issuer: IDP,
          jwksUri,
          jwks: undefined,
          audience: IDP_AUDIENCE,
          companyId: undefined,
        });
        await rejectsWith(
          viaJwt(admin, await signIdp({ email: "ada@acme.example" })),
          bad("its signature or claims do not verify"),
        );
        const warning = f.logger.lines.findLast((l) => l.level === "warn");
        assert.deepEqual(warning, {
          level: "warn",
          object: { tmcId, issuer: IDP, reason },
          message: "token exchange: the trusted issuer's key set is unavailable",
        });
      }
    });

    test("the token must carry the registered audience", async () => {
      await rejectsWith(
        viaJwt(admin, await signIdp({ email: "ada@acme.example" }, { aud: "https://another-relying-party.example" })),
        bad("its signature or claims do not verify"),
      );
      await rejectsWith(
        viaJwt(admin, await signIdp({ email: "ada@acme.example" }, { aud: null })),
        bad("its signature or claims do not verify"),
      );
    });

    test("email_verified present and not true is refused; true or absent is accepted", async () => {
      for (const emailVerified of [false, "true", 1, null]) {
        await rejectsWith(
          viaJwt(admin, await signIdp({ email: "ada@acme.example", email_verified: emailVerified })),
          bad("its email is not verified"),
        );
      }
      assert.equal(
        decodeJwt((await viaJwt(admin, await signIdp({ email: "ada@acme.example", email_verified: true }))).accessToken)
          .sub,
        userId,
      );
      assert.equal(
        decodeJwt((await viaJwt(admin, await signIdp({ email: "ada@acme.example" }))).accessToken).sub,
        userId,
      );
    });

    test("a lifetime (exp − iat, or exp − now without iat) longer than the configured 86400 seconds is refused", async () => {
      const now = f.clock.epochSeconds;
      const tooLong = bad("its lifetime is longer than 86400 seconds");
      await rejectsWith(
        viaJwt(admin, await signIdp({ email: "ada@acme.example" }, { iat: now, exp: now + 86_401 })),
        tooLong,
      );
      await rejectsWith(
        viaJwt(admin, await signIdp({ email: "ada@acme.example" }, { iat: now - 86_000, exp: now + 401 })),
        tooLong,
      ); // issued long ago, still valid: its lifetime counts
      await rejectsWith(
        viaJwt(admin, await signIdp({ email: "ada@acme.example" }, { iat: null, exp: now + 86_401 })),
        tooLong,
      );
      await rejectsWith(
        viaJwt(admin, await signIdp({ email: "ada@acme.example" }, { iat: now, exp: now + 365 * 86_400 })),
        tooLong,
      );
      assert.equal(
        decodeJwt(
          (await viaJwt(admin, await signIdp({ email: "ada@acme.example" }, { iat: now, exp: now + 86_400 })))
            .accessToken,
        ).sub,
        userId,
        "exactly the maximum",
      );
      assert.equal(
        decodeJwt(
          (await viaJwt(admin, await signIdp({ email: "ada@acme.example" }, { iat: null, exp: now + 86_400 })))
            .accessToken,
        ).sub,
        userId,
      );
      assert.equal(
        decodeJwt(
          (await viaJwt(admin, await signIdp({ email: "ada@acme.example" }, { iat: now - 86_000, exp: now + 400 })))
            .accessToken,
        ).sub,
        userId,
      );
    });

    // A src bug (see the report): the lifetime is exp − iat as the token states it, and jose does not
    // refuse an iat in the future (it checks iat only with maxTokenAge), so iat = now + 10 years and
    // exp = iat + 60 passes as a 60-second token that stays exchangeable for ten years
    // Was a todo (src bug): exp − iat trusted a future iat; the lifetime now counts from now at the latest.
    test("a token whose iat lies in the future cannot stretch its lifetime past the maximum", async () => {
      const now = f.clock.epochSeconds;
      const tenYears = 10 * 365 * 86_400;
      await rejectsWith(
        viaJwt(admin, await signIdp({ email: "ada@acme.example" }, { iat: now + tenYears, exp: now + tenYears + 60 })),
        bad("its lifetime is longer than 86400 seconds"),
      );
    });
  });

  describe("refresh", () => {
    const refresh = (client: ProvisionedApiUser, refreshToken: string, scope = "") =>
      grant(client, { grantType: "refresh_token", refreshToken, scope });
    let first: { accessToken: string; refreshToken: string };
    beforeEach(async () => {
      const issued = await exchange(admin, (await grant(companyAdmin, { scope: "users:read openid" })).accessToken);
      first = { accessToken: issued.accessToken, refreshToken: issued.refreshToken! };
    });

    test("each use rotates the refresh token and keeps the subject, scope and audience", async () => {
      const second = await refresh(admin, first.refreshToken);
      assert.notEqual(second.refreshToken, first.refreshToken);
      assert.equal(second.scope, "users:read openid");
      const claims = decodeJwt(second.accessToken);
      assert.deepEqual(
        [claims.sub, claims.act, claims.aud, claims.creds],
        [companyAdmin.clientId, { sub: admin.clientId }, AUDIENCE, [[companyAdmin.clientId, 1]]],
      );
      const narrowed = await refresh(admin, second.refreshToken!, "openid");
      assert.equal(narrowed.scope, "openid");
      const rows = await refreshTokenRows();
      assert.equal(new Set(rows.map((r) => r.familyId)).size, 1, "one family");
      assert.deepEqual(
        rows.map((r) => r.usedAt?.toISOString()),
        ["2026-11-22T10:00:00.000Z", "2026-11-22T10:00:00.000Z", undefined],
      );
      assert.equal(
        rows.some((r) => r.tokenHash.toString("base64url") === first.refreshToken),
        false,
        "only HMACs are stored",
      );
    });

    test("reusing a used refresh token revokes its whole family (RFC 9700 4.14.2)", async () => {
      const second = await refresh(admin, first.refreshToken);
      const reused = {
        code: "INVALID_GRANT",
        message: "The refresh token was already used; its family is revoked",
      } as const;
      await rejectsWith(refresh(admin, first.refreshToken), reused);
      await rejectsWith(refresh(admin, second.refreshToken!), reused);
      assert.ok((await refreshTokenRows()).every((r) => r.revokedAt?.toISOString() === "2026-11-22T10:00:00.000Z"));
    });

    test("a refused scope does not burn the refresh token (the transaction rolls back)", async () => {
      await rejectsWith(refresh(admin, first.refreshToken, "users:write"), {
        code: "INVALID_SCOPE",
        message: "Scope wider than allowed: users:write",
      });
      assert.equal((await refresh(admin, first.refreshToken)).scope, "users:read openid");
    });

    test("unknown, another client's, and expired refresh tokens are INVALID_GRANT", async () => {
      await rejectsWith(refresh(admin, "no-such-token"), {
        code: "INVALID_GRANT",
        message: "The refresh token is not valid",
      });
      await rejectsWith(refresh(companyAdmin, first.refreshToken), {
        code: "INVALID_GRANT",
        message: "The refresh token is not valid",
      });
      await rejectsWith(refresh(admin2, first.refreshToken), {
        code: "INVALID_GRANT",
        message: "The refresh token is not valid",
      });
      await rejectsWith(grant(admin, { grantType: "refresh_token" }), {
        code: "INVALID_REQUEST",
        message: "refresh_token is required",
        params: [{ name: "refresh_token", value: "invalid" }],
      });
      f.clock.advanceSeconds(REFRESH_TTL - 1);
      const stillValid = await refresh(admin, first.refreshToken);
      f.clock.advanceSeconds(REFRESH_TTL);
      await rejectsWith(refresh(admin, stillValid.refreshToken!), {
        code: "INVALID_GRANT",
        message: "The refresh token has expired",
      });
    });

    test("after the client's own credential is rotated, its refresh tokens are refused and their family revoked", async () => {
      await f.admin.rotate({ clientId: "operator", tmcId }, admin.clientId, "r");
      const rotatedClient = { ...admin, user: (await currentUser(f, admin.clientId))! };
      await rejectsWith(refresh(rotatedClient, first.refreshToken), {
        code: "INVALID_GRANT",
        message: "The refresh token's credential has been rotated",
      });
      assert.ok((await refreshTokenRows()).every((r) => r.revokedAt !== undefined));
    });

    test("revoking the client revokes its refresh tokens", async () => {
      await f.admin.revoke({ clientId: "operator", tmcId }, admin.clientId, "r");
      await rejectsWith(refresh(admin, first.refreshToken), {
        code: "INVALID_GRANT",
        message: "The refresh token was already used; its family is revoked",
      });
    });

    // The refresh-token row keeps `act`: a nested delegation chain survives a refresh.
    test("a refreshed token keeps the delegation chain of the exchange it descends from", async () => {
      const nested = await exchange(colleague, first.accessToken);
      assert.deepEqual(decodeJwt(nested.accessToken).act, { sub: colleague.clientId, act: { sub: admin.clientId } });
      const refreshed = await refresh(colleague, nested.refreshToken!);
      assert.deepEqual(decodeJwt(refreshed.accessToken).act, { sub: colleague.clientId, act: { sub: admin.clientId } });
      assert.equal(decodeJwt(refreshed.accessToken).sub, companyAdmin.clientId);
    });

    // Every bound credential is checked on refresh, not only the client's own.
    test("after the subject's credential is rotated, refresh must not hand out a token that is dead on arrival", async () => {
      await f.admin.rotate({ clientId: "operator", tmcId }, companyAdmin.clientId, "r");
      const outcome = await refresh(admin, first.refreshToken).then(
        async (issued) =>
          `issued a token that verify answers: ${await f.accessTokens.verify(issued.accessToken).then(
            () => "valid",
            (e: Error) => e.message,
          )}`,
        (e: Error) => e.message,
      );
      assert.equal(outcome, "The refresh token's credential has been rotated");
    });
  });
});
