// Company A1's SCIM client provisions a user with the e-mail of a user of company A2 (of the same
// TMC), and may give it any externalId, the A2 user's IdP subject included. Which user an IdP token
// names must not depend on anything A1 could have planted: a company admin's lookup stays within
// its company, an issuer bound to a company names users of that company only, and a TMC-wide
// issuer's token whose e-mail names users of several companies is refused whatever its `sub`.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { operatorCall, type RunningService } from "../helpers/service.js";
import { newScimCompany, newUser as scimUser, PATCH_OP, scim, type ScimTenant } from "../scim/scim-kit.js";
import {
  assertGrpcFailure,
  assertOAuthError,
  disposeService,
  GRANT_EXCHANGE,
  GRPC,
  grpcClients,
  newApiUser,
  partsOf,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TOKEN_PATH,
  TYPE_JWT,
  type Client,
  type GrpcClients,
} from "../helpers/token-kit.js";

const IDP = "https://idp-squat.example";
const BOUND_IDP = "https://idp-a2.example";
const IDP_AUDIENCE = "https://platform.example";
const EMAIL = "ada@acme.example";
const ADA_SUBJECT = "00u1ada-stable-subject";

type Sign = (claims: Record<string, unknown>) => Promise<string>;

let running: RunningService;
let grpcs: GrpcClients;
let a1: ScimTenant;
let a2: ScimTenant;
let tmcAdmin: Client;
let a2Admin: Client;
let a2UserId: string;
let squatId: string;
let sign: Sign;
let signBound: Sign;

/** Trusts a new ES256 issuer for the TMC (bound to `companyId` when given); returns its signer. */
async function trustIssuer(tmcId: string, issuer: string, companyId?: string): Promise<Sign> {
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  const kid = `${new URL(issuer).hostname}-1`;
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" };
  await operatorCall(running.baseUrl, "AddTrustedIssuer", {
    tmcId,
    issuer,
    jwks: JSON.stringify({ keys: [jwk] }),
    audience: IDP_AUDIENCE,
    ...(companyId ? { companyId } : {}),
  });
  return (claims) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: "ES256", kid })
      .setIssuer(issuer)
      .setAudience(IDP_AUDIENCE)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(privateKey);
}

async function provision(tenant: ScimTenant, email: string, extra: Record<string, unknown> = {}): Promise<string> {
  const created = await scim(running, tenant.scimToken, "POST", "/v2/scim/v2/Users", scimUser(email, extra));
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body.id as string;
}

before(async () => {
  running = await startTokenService({ env: ROOMY_RATE_LIMITS });
  grpcs = grpcClients(running.baseUrl);
  const { tmcId } = await operatorCall<{ tmcId: string }>(running.baseUrl, "CreateTmc", {
    name: `Squat ${crypto.randomUUID()}`,
    maxApiUsers: 50,
  });
  a1 = await newScimCompany(running.baseUrl, tmcId, "A1");
  a2 = await newScimCompany(running.baseUrl, tmcId, "A2");
  tmcAdmin = await newApiUser(running.baseUrl, tmcId, "TMC_ADMIN");
  a2Admin = await newApiUser(running.baseUrl, tmcId, "COMPANY_ADMIN", a2.orgId);
  sign = await trustIssuer(tmcId, IDP);
  signBound = await trustIssuer(tmcId, BOUND_IDP, a2.orgId);
  // Exactly the attack: the real A2 user carries no externalId; A1's SCIM client provisions the
  // same e-mail with the A2 user's IdP subject as externalId.
  a2UserId = await provision(a2, EMAIL);
  squatId = await provision(a1, EMAIL.toUpperCase(), { externalId: ADA_SUBJECT });
});
after(async () => {
  grpcs.close();
  await disposeService(running);
});

const exchange = (caller: Client, subjectToken: string) =>
  postForm(running.baseUrl, TOKEN_PATH, {
    grant_type: GRANT_EXCHANGE,
    client_id: caller.clientId,
    client_secret: caller.clientSecret,
    subject_token: subjectToken,
    subject_token_type: TYPE_JWT,
  });

const exchangeOverGrpc = (caller: Client, subjectToken: string) =>
  grpcs.call("auth", "fetchOauth2Token", {
    grantType: GRANT_EXCHANGE,
    clientId: caller.clientId,
    clientSecret: caller.clientSecret,
    subjectToken,
    subjectTokenType: TYPE_JWT,
  });

/** The exchange names `userId`, over REST and over gRPC. */
async function assertNames(caller: Client, subjectToken: string, userId: string): Promise<void> {
  const res = await exchange(caller, subjectToken);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(partsOf(res.body.access_token).payload.sub, userId);
  const outcome = await exchangeOverGrpc(caller, subjectToken);
  assert.equal(outcome.ok, true, JSON.stringify(outcome.errorResponse));
  assert.equal(partsOf(outcome.response!.accessToken).payload.sub, userId);
}

/** The exchange is refused as ambiguous: 400 invalid_grant on REST, INVALID_ARGUMENT with INVALID_GRANT on gRPC. */
async function assertAmbiguous(caller: Client, subjectToken: string): Promise<void> {
  const res = await exchange(caller, subjectToken);
  if (res.status === 200) {
    const named = partsOf(res.body.access_token).payload.sub;
    assert.fail(
      `200: the exchange names ${named === squatId ? "A1's squatter" : named === a2UserId ? "the A2 user" : named}`,
    );
  }
  assertOAuthError(res, 400, "INVALID_GRANT", "invalid_grant");
  assert.match(res.body.error_description, /more than one company of the TMC/);
  assert.deepEqual(res.body.errorMessages[0].errorParameters, [{ name: "subject_token", value: "ambiguous email" }]);
  const outcome = await exchangeOverGrpc(caller, subjectToken);
  const body = assertGrpcFailure(outcome, GRPC.INVALID_ARGUMENT, "INVALID_GRANT");
  assert.equal(body.error, "invalid_grant");
}

describe("a TMC-wide issuer: an e-mail held in two companies names no one, whatever externalId was planted", () => {
  test("A2's company admin exchanges the A2 user's IdP token: the squat in A1 is not even looked at", async () => {
    for (const claims of [{ email: EMAIL, sub: ADA_SUBJECT }, { email: EMAIL }]) {
      await assertNames(a2Admin, await sign(claims), a2UserId);
    }
  });

  test("planted externalId: the A2 user carries none, A1's squatter carries the A2 user's sub: the TMC admin's exchange is refused (400 invalid_grant), never the squatter", async () => {
    await assertAmbiguous(tmcAdmin, await sign({ email: EMAIL, sub: ADA_SUBJECT }));
    assert.notEqual(a2UserId, squatId);
  });

  test("with no sub, or a sub neither carries, the TMC admin is refused the same way", async () => {
    for (const claims of [{ email: EMAIL }, { email: EMAIL, sub: "someone-else" }]) {
      await assertAmbiguous(tmcAdmin, await sign(claims));
    }
  });

  test("both carry the sub (A2's own SCIM client sets it too): still refused, never one of them", async () => {
    const patched = await scim(running, a2.scimToken, "PATCH", `/v2/scim/v2/Users/${a2UserId}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: "replace", path: "externalId", value: ADA_SUBJECT }],
    });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    await assertAmbiguous(tmcAdmin, await sign({ email: EMAIL, sub: ADA_SUBJECT }));
  });

  test("the duplicate is logged at warn with the companies and users, and neither the token nor the e-mail", async () => {
    const token = await sign({ email: EMAIL, sub: ADA_SUBJECT });
    await assertAmbiguous(tmcAdmin, token);
    const lines = running
      .logs()
      .split("\n")
      .filter((line) => line.includes("names active users of several companies"))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.ok(lines.length > 0, "a warning is logged");
    const last = lines.at(-1)!;
    assert.equal(last.level, 40);
    assert.equal(last.issuer, IDP);
    assert.equal(last.clientId, tmcAdmin.clientId);
    assert.equal(last.outcome, "refused");
    assert.deepEqual(new Set(last.companyIds as string[]), new Set([a1.orgId, a2.orgId]));
    assert.deepEqual(new Set(last.userIds as string[]), new Set([a2UserId, squatId]));
    const logs = running.logs();
    assert.equal(logs.includes(token), false, "the subject token is not logged");
    assert.equal(logs.includes(token.split(".")[2]!), false, "nor its signature");
    assert.equal(logs.toLowerCase().includes(EMAIL), false, "nor the e-mail");
  });

  test("an e-mail only one company holds names its user, sub or not", async () => {
    const lin = await provision(a1, "lin@initech.example", { externalId: "lin-sub" });
    for (const claims of [{ email: "lin@initech.example" }, { email: "LIN@initech.example", sub: "other" }]) {
      await assertNames(tmcAdmin, await sign(claims), lin);
    }
  });
});

describe("an issuer bound to A2: its tokens name A2's users only, so nothing A1 provisions can change the answer", () => {
  let a1Admin: Client;
  before(async () => {
    a1Admin = await newApiUser(running.baseUrl, tmcAdmin.tmcId, "COMPANY_ADMIN", a1.orgId);
  });

  test("the TMC admin's exchange names the A2 user (whose externalId A2's own SCIM client wrote), with its sub, another or none, over REST and gRPC", async () => {
    for (const claims of [
      { email: EMAIL, sub: ADA_SUBJECT },
      { email: EMAIL },
      { email: EMAIL, sub: "someone-else" },
    ]) {
      await assertNames(tmcAdmin, await signBound(claims), a2UserId);
    }
    const resolved = running
      .logs()
      .split("\n")
      .filter((line) => line.includes("names active users of several companies") && line.includes(BOUND_IDP));
    assert.ok(resolved.length > 0, "the duplicate is logged here too");
    assert.match(resolved.at(-1)!, /"outcome":"named within the issuer's company"/);
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
