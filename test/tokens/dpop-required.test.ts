// The per-client policy "DPoP required" (RFC 9449 5.2, client metadata dpop_bound_access_tokens),
// set by the TMC admin (REST POST /v2/api-users/dpop) and by the operator (SetApiUserDpopPolicy).
// Changes go through instance A and are checked on instance B at once (on Postgres two instances
// share the database; on the embedded default one instance plays both). Proofs come from panva's
// `dpop` package, unmodified.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as DPoP from "dpop";
import { isPostgres, newStorage, type Storage } from "../helpers/backend.js";
import { dropStorage, operatorCall, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  assertError,
  assertOAuthError,
  dpopTokenRequest,
  getWith,
  GRANT_EXCHANGE,
  LEGACY_PATH,
  newApiUser,
  newTenant,
  postJson,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TYPE_ACCESS_TOKEN,
  type Client,
  type HttpReply,
  type Tenant,
} from "../helpers/token-kit.js";

const POLICY_PATH = "/v2/api-users/dpop";

let storage: Storage;
let a: RunningService;
let b: RunningService;
let tenant: Tenant;

before(async () => {
  storage = newStorage();
  a = await startTokenService({ storage, env: ROOMY_RATE_LIMITS });
  b = isPostgres ? await startTokenService({ storage, env: ROOMY_RATE_LIMITS }) : a;
  tenant = await newTenant(a.baseUrl);
});
after(async () => {
  await Promise.all([...new Set([a, b])].map((instance) => instance?.stop()));
  if (storage) await dropStorage(storage);
});

const tokenRequest = dpopTokenRequest;

/** The TMC admin sets `client`'s policy through instance A (REST). */
async function setPolicy(client: Client, required: boolean): Promise<HttpReply> {
  return postJson(
    a.baseUrl,
    POLICY_PATH,
    { clientId: client.clientId, dpopBoundAccessTokens: required },
    { authorization: `Bearer ${await accessTokenOf(a.baseUrl, tenant.admin)}` },
  );
}

const clientCredentials = { grant_type: "client_credentials" };

describe("DPoP required (dpop_bound_access_tokens)", () => {
  test("set by the TMC admin: from the moment the call returns, instance B refuses token requests without a proof (400 invalid_request) and the client's earlier bearer tokens; with a proof it gets DPoP tokens", async () => {
    const user = await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const earlier = await accessTokenOf(b.baseUrl, user);
    assert.equal((await getWith(b.baseUrl, "/v2/api-users", { authorization: `Bearer ${earlier}` })).status, 200);

    const set = await setPolicy(user, true);
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.deepEqual(set.body, { clientId: user.clientId, dpopBoundAccessTokens: true });

    const refused = await tokenRequest(b.baseUrl, user, clientCredentials);
    assertOAuthError(refused, 400, "INVALID_REQUEST", "invalid_request");
    assert.match(refused.body.error_description, /DPoP proof is missing/);
    // The legacy endpoint takes no proof: refused too.
    const legacy = await postJson(b.baseUrl, LEGACY_PATH, { clientId: user.clientId, clientSecret: user.clientSecret });
    assertOAuthError(legacy, 400, "INVALID_REQUEST", "invalid_request");
    // A bearer token issued before the change died with it: no unbound token of the client outlives the policy.
    assert.equal((await getWith(b.baseUrl, "/v2/api-users", { authorization: `Bearer ${earlier}` })).status, 401);

    const keys = await DPoP.generateKeyPair("ES256");
    const bound = await tokenRequest(b.baseUrl, user, clientCredentials, keys);
    assert.equal(bound.status, 200, JSON.stringify(bound.body));
    assert.equal(bound.body.token_type, "DPoP");
  });

  test("token exchange and refresh are token requests too: refused without a proof, answered with one", async () => {
    const user = await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN");
    assert.equal((await setPolicy(user, true)).status, 200);
    const keys = await DPoP.generateKeyPair("Ed25519");
    const subject = (await tokenRequest(b.baseUrl, user, clientCredentials, keys)).body.access_token as string;
    const exchange = {
      grant_type: GRANT_EXCHANGE,
      subject_token: subject,
      subject_token_type: TYPE_ACCESS_TOKEN,
    };
    assertOAuthError(await tokenRequest(b.baseUrl, user, exchange), 400, "INVALID_REQUEST", "invalid_request");
    const exchanged = await tokenRequest(b.baseUrl, user, exchange, keys);
    assert.equal(exchanged.status, 200, JSON.stringify(exchanged.body));
    assert.equal(exchanged.body.token_type, "DPoP");
    const refresh = { grant_type: "refresh_token", refresh_token: exchanged.body.refresh_token as string };
    assertOAuthError(await tokenRequest(b.baseUrl, user, refresh), 400, "INVALID_REQUEST", "invalid_request");
    // The refused refresh did not spend the refresh token.
    const refreshed = await tokenRequest(b.baseUrl, user, refresh, keys);
    assert.equal(refreshed.status, 200, JSON.stringify(refreshed.body));
    assert.equal(refreshed.body.token_type, "DPoP");
  });

  test("the operator's SetApiUserDpopPolicy turns it off again (bearer tokens on B at once) and the listing shows it; setting the policy in force changes nothing", async () => {
    const user = await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const policy = (required: boolean) =>
      operatorCall(a.baseUrl, "SetApiUserDpopPolicy", {
        tmcId: tenant.tmcId,
        clientId: user.clientId,
        ...(required ? { dpopBoundAccessTokens: true } : {}),
      });
    const listed = async () => {
      const { apiUsers } = await operatorCall<{ apiUsers: Array<Record<string, unknown>> }>(a.baseUrl, "ListApiUsers", {
        tmcId: tenant.tmcId,
        limit: 1000,
      });
      return apiUsers.find((u) => u.clientId === user.clientId)?.dpopBoundAccessTokens ?? false;
    };
    assert.deepEqual(await policy(true), {
      tmcId: tenant.tmcId,
      clientId: user.clientId,
      dpopBoundAccessTokens: true,
    });
    assert.equal(await listed(), true);
    assertOAuthError(await tokenRequest(b.baseUrl, user, clientCredentials), 400, "INVALID_REQUEST", "invalid_request");
    const keys = await DPoP.generateKeyPair("ES256");
    const bound = (await tokenRequest(b.baseUrl, user, clientCredentials, keys)).body.access_token as string;
    // Already required: no change, so the token issued under it stays good.
    await policy(true);
    const proofUrl = `${b.baseUrl}/v2/api-users`;
    const nonceReply = await fetch(proofUrl, {
      headers: {
        authorization: `DPoP ${bound}`,
        dpop: await DPoP.generateProof(keys, proofUrl, "GET", undefined, bound),
      },
    });
    const nonce = nonceReply.headers.get("dpop-nonce") ?? undefined;
    const used = await fetch(proofUrl, {
      headers: { authorization: `DPoP ${bound}`, dpop: await DPoP.generateProof(keys, proofUrl, "GET", nonce, bound) },
    });
    assert.equal(used.status, 200, "a token issued under the policy survives setting it again");

    await policy(false);
    assert.equal(await listed(), false);
    const bearer = await tokenRequest(b.baseUrl, user, clientCredentials);
    assert.equal(bearer.status, 200, JSON.stringify(bearer.body));
    assert.equal(bearer.body.token_type, "Bearer");
  });

  test("only the TMC's own client-credentials users: another TMC's is not found (and unchanged), a SCIM-token user is refused", async () => {
    const stranger = (await newTenant(a.baseUrl)).admin;
    assertError(await setPolicy(stranger, true), 404, "NOT_FOUND");
    assert.equal((await tokenRequest(b.baseUrl, stranger, clientCredentials)).body.token_type, "Bearer");
    const scim = await operatorCall<{ clientId: string }>(a.baseUrl, "CreateApiUser", {
      tmcId: tenant.tmcId,
      orgId: tenant.orgId,
      role: "COMPANY_ADMIN",
      credentialType: "SCIM_TOKEN",
    });
    const refused = await setPolicy({ ...tenant.admin, clientId: scim.clientId }, true);
    assertError(refused, 400, "API_VALIDATION_FAILED");
  });
});
