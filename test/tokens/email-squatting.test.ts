// Issue 18, finding 6: company A1's SCIM client provisions a user with the e-mail of a user of
// company A2 (of the same TMC). Every exchange of an IdP token for the A2 user then failed with
// "names more than one active user of the TMC", for A2's admin and the TMC admin alike. Now a
// company admin's lookup stays within its company, and a TMC admin's tells the users apart by
// the IdP's stable subject (`sub`, provisioned as the SCIM externalId).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { operatorCall, type RunningService } from "../helpers/service.js";
import { newScimCompany, newUser as scimUser, scim, type ScimTenant } from "../scim/scim-kit.js";
import {
  disposeService,
  GRANT_EXCHANGE,
  newApiUser,
  partsOf,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TOKEN_PATH,
  TYPE_JWT,
  type Client,
} from "../helpers/token-kit.js";

const IDP = "https://idp-squat.example";
const IDP_AUDIENCE = "https://platform.example";
const EMAIL = "ada@acme.example";
const ADA_SUBJECT = "00u1ada-stable-subject";

let running: RunningService;
let a1: ScimTenant;
let a2: ScimTenant;
let tmcAdmin: Client;
let a2Admin: Client;
let a2UserId: string;
let squatId: string;
let sign: (claims: Record<string, unknown>) => Promise<string>;

before(async () => {
  running = await startTokenService({ env: ROOMY_RATE_LIMITS });
  const { tmcId } = await operatorCall<{ tmcId: string }>(running.baseUrl, "CreateTmc", {
    name: `Squat ${crypto.randomUUID()}`,
    maxApiUsers: 50,
  });
  a1 = await newScimCompany(running.baseUrl, tmcId, "A1");
  a2 = await newScimCompany(running.baseUrl, tmcId, "A2");
  tmcAdmin = await newApiUser(running.baseUrl, tmcId, "TMC_ADMIN");
  a2Admin = await newApiUser(running.baseUrl, tmcId, "COMPANY_ADMIN", a2.orgId);
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: "squat-1", alg: "ES256", use: "sig" };
  await operatorCall(running.baseUrl, "AddTrustedIssuer", {
    tmcId,
    issuer: IDP,
    jwks: JSON.stringify({ keys: [jwk] }),
    audience: IDP_AUDIENCE,
  });
  sign = (claims) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: "ES256", kid: "squat-1" })
      .setIssuer(IDP)
      .setAudience(IDP_AUDIENCE)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(privateKey);
  // A2's IdP provisions its user with the IdP's subject as externalId; then A1's SCIM client squats the e-mail.
  const provisioned = await scim(
    running,
    a2.scimToken,
    "POST",
    "/v2/scim/v2/Users",
    scimUser(EMAIL, { externalId: ADA_SUBJECT }),
  );
  assert.equal(provisioned.status, 201, JSON.stringify(provisioned.body));
  a2UserId = provisioned.body.id;
  const squat = await scim(
    running,
    a1.scimToken,
    "POST",
    "/v2/scim/v2/Users",
    scimUser(EMAIL.toUpperCase(), { externalId: "a1-guess" }),
  );
  assert.equal(squat.status, 201, JSON.stringify(squat.body));
  squatId = squat.body.id;
});
after(() => disposeService(running));

const exchange = (caller: Client, subjectToken: string) =>
  postForm(running.baseUrl, TOKEN_PATH, {
    grant_type: GRANT_EXCHANGE,
    client_id: caller.clientId,
    client_secret: caller.clientSecret,
    subject_token: subjectToken,
    subject_token_type: TYPE_JWT,
  });

describe("issue 18 finding 6: another company's SCIM client cannot squat an e-mail to block exchanges", () => {
  test("A2's company admin exchanges the A2 user's IdP token: the squat in A1 is not even looked at", async () => {
    for (const claims of [{ email: EMAIL, sub: ADA_SUBJECT }, { email: EMAIL }]) {
      const res = await exchange(a2Admin, await sign(claims));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(partsOf(res.body.access_token).payload.sub, a2UserId);
    }
  });

  test("the TMC admin's exchange is resolved by the IdP's stable subject (sub = the SCIM externalId), not refused", async () => {
    const res = await exchange(tmcAdmin, await sign({ email: EMAIL, sub: ADA_SUBJECT }));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(partsOf(res.body.access_token).payload.sub, a2UserId);
    assert.notEqual(a2UserId, squatId);
  });

  test("with nothing to tell them apart (no sub, or a sub neither carries) the TMC admin is refused, never handed one of them", async () => {
    for (const claims of [{ email: EMAIL }, { email: EMAIL, sub: "someone-else" }]) {
      const res = await exchange(tmcAdmin, await sign(claims));
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.error, "invalid_grant");
    }
  });
});

describe("issue 18 finding 6: an issuer bound to its company's users cannot be confused by another company at all", () => {
  const BOUND_IDP = "https://idp-a2.example";
  let signBound: (claims: Record<string, unknown>) => Promise<string>;
  let a1Admin: Client;
  before(async () => {
    const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), kid: "a2-1", alg: "ES256", use: "sig" };
    const tmcId = tmcAdmin.tmcId;
    await operatorCall(running.baseUrl, "AddTrustedIssuer", {
      tmcId,
      issuer: BOUND_IDP,
      jwks: JSON.stringify({ keys: [jwk] }),
      audience: IDP_AUDIENCE,
      companyId: a2.orgId,
    });
    signBound = (claims) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: "ES256", kid: "a2-1" })
        .setIssuer(BOUND_IDP)
        .setAudience(IDP_AUDIENCE)
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(privateKey);
    a1Admin = await newApiUser(running.baseUrl, tmcId, "COMPANY_ADMIN", a1.orgId);
    // The squatter copies the victim's stable subject too: the subject alone no longer tells them apart.
    const copy = await scim(
      running,
      a1.scimToken,
      "POST",
      "/v2/scim/v2/Users",
      scimUser(`copy-${EMAIL}`, { externalId: ADA_SUBJECT }),
    );
    assert.equal(copy.status, 201, JSON.stringify(copy.body));
    const patched = await scim(running, a1.scimToken, "PATCH", `/v2/scim/v2/Users/${squatId}`, {
      schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
      Operations: [{ op: "replace", path: "externalId", value: "x" }],
    });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
  });

  test("the TMC admin's exchange of the bound issuer's token names the A2 user, with or without sub", async () => {
    for (const claims of [{ email: EMAIL }, { email: EMAIL, sub: "someone-else" }]) {
      const res = await exchange(tmcAdmin, await signBound(claims));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(partsOf(res.body.access_token).payload.sub, a2UserId);
    }
  });

  test("another company's admin cannot use A2's issuer: 400 invalid_request (names no user of its company), and the binding shows in the operator's list", async () => {
    const res = await exchange(a1Admin, await signBound({ email: EMAIL }));
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.equal(res.body.error, "invalid_request");
    const listed = await operatorCall<{ issuers: Array<{ issuer: string; companyId: string }> }>(
      running.baseUrl,
      "ListTrustedIssuers",
      { tmcId: tmcAdmin.tmcId },
    );
    assert.equal(listed.issuers.find((i) => i.issuer === BOUND_IDP)?.companyId, a2.orgId);
    const tmcWide = listed.issuers.find((i) => i.issuer === IDP);
    assert.ok(tmcWide, "the TMC-wide issuer is listed");
    assert.equal(tmcWide.companyId ?? "", "", "and bound to no company");
  });

  test("binding to a company of another TMC (or none) is refused with 404 naming companyId", async () => {
    const other = await operatorCall<{ tmcId: string }>(running.baseUrl, "CreateTmc", {
      name: `Other ${crypto.randomUUID()}`,
    });
    await assert.rejects(
      operatorCall(running.baseUrl, "AddTrustedIssuer", {
        tmcId: other.tmcId,
        issuer: "https://x.example",
        jwksUri: "https://x.example/jwks",
        audience: "a",
        companyId: a2.orgId,
      }),
      /failed with 404: .*companyId/,
    );
  });
});
