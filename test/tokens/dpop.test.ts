// DPoP (RFC 9449) end to end, with the clients users have, unmodified: oauth4webapi (token
// request with the nonce retry, then protected requests) and panva's `dpop` package for the
// proofs an attacker would vary. Over REST, gRPC (@grpc/grpc-js) and Connect
// (@connectrpc/connect-node), on the backend of the run.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as DPoP from "dpop";
import { calculateJwkThumbprint, exportJWK } from "jose";
import * as oauth from "oauth4webapi";
import { ApiUserService } from "../../gen/travel/apiuser/v2/api_user_pb.js";
import type { RunningService } from "../helpers/service.js";
import {
  basicAuthorization,
  disposeService,
  getWith,
  grpcClients,
  GRPC,
  INTROSPECT_PATH,
  newTenant,
  postForm,
  startServiceAtOwnAddress,
  TestClock,
  TOKEN_PATH,
  type Client,
  type HttpReply,
} from "../helpers/token-kit.js";

const API_USERS_PATH = "/v2/api-users";

let running: RunningService;
let baseUrl: string;
let admin: Client;
const clock = new TestClock();

before(async () => {
  // The issuer is this address, so oauth4webapi's discovery checks it.
  running = await startServiceAtOwnAddress({ now: clock.now });
  baseUrl = running.baseUrl;
  admin = (await newTenant(baseUrl)).admin;
});
after(() => disposeService(running));

const tokenUrl = () => `${baseUrl}${TOKEN_PATH}`;

/** A token request with a DPoP header (client_secret_basic). */
function tokenRequest(proof: string | undefined, extra: Record<string, string> = {}): Promise<HttpReply> {
  return postForm(
    baseUrl,
    TOKEN_PATH,
    { grant_type: "client_credentials", ...extra },
    {
      authorization: basicAuthorization(admin.clientId, admin.clientSecret),
      ...(proof !== undefined ? { dpop: proof } : {}),
    },
  );
}

/** The nonce the token endpoint offers (the DPoP-Nonce of its refusal of a proof without one). */
async function currentNonce(keys: DPoP.KeyPair): Promise<string> {
  const refused = await tokenRequest(await DPoP.generateProof(keys, tokenUrl(), "POST"));
  assert.equal(refused.status, 400);
  assert.equal(refused.body.error, "use_dpop_nonce");
  const nonce = refused.headers.get("dpop-nonce");
  assert.ok(nonce);
  return nonce;
}

/** A DPoP-bound token for `keys`, through the `dpop` package's proofs. */
async function boundToken(keys: DPoP.KeyPair): Promise<{ token: string; nonce: string }> {
  const nonce = await currentNonce(keys);
  const issued = await tokenRequest(await DPoP.generateProof(keys, tokenUrl(), "POST", nonce));
  assert.equal(issued.status, 200, JSON.stringify(issued.body));
  assert.equal(issued.body.token_type, "DPoP");
  return { token: issued.body.access_token, nonce: issued.headers.get("dpop-nonce") ?? nonce };
}

describe("oauth4webapi (unmodified): DPoP token request with the nonce retry, then protected requests", () => {
  test("token_type DPoP, cnf.jkt = the key's thumbprint, the API answers with a proof and refuses Bearer", async () => {
    const issuer = new URL(baseUrl);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: "oauth2", [oauth.allowInsecureRequests]: true }),
    );
    assert.ok(as.dpop_signing_alg_values_supported?.includes("ES256"));
    const who: oauth.Client = { client_id: admin.clientId };
    const auth = oauth.ClientSecretBasic(admin.clientSecret);
    const keyPair = await oauth.generateKeyPair("ES256");
    const dpop = oauth.DPoP(who, keyPair);
    const options = { DPoP: dpop, [oauth.allowInsecureRequests]: true };
    const request = () => oauth.clientCredentialsGrantRequest(as, who, auth, { scope: "api-users" }, options);
    let retried = false;
    let tokens: oauth.TokenEndpointResponse;
    try {
      tokens = await oauth.processClientCredentialsResponse(as, who, await request());
    } catch (error) {
      // RFC 9449 8: the first proof has no nonce; the client retries with the one the answer gave.
      assert.ok(oauth.isDPoPNonceError(error), String(error));
      retried = true;
      tokens = await oauth.processClientCredentialsResponse(as, who, await request());
    }
    assert.ok(retried, "the server asked for a nonce");
    assert.equal(tokens.token_type, "dpop");
    const api = new URL(`${baseUrl}${API_USERS_PATH}`);
    const listed = await oauth.protectedResourceRequest(tokens.access_token, "GET", api, new Headers(), null, options);
    assert.equal(listed.status, 200, await listed.clone().text());
    assert.ok(listed.headers.get("dpop-nonce"), "the next nonce is offered");

    // The same token as a bearer token: refused, and the challenge names the scheme to use (RFC 9449 7.1).
    const asBearer = await getWith(baseUrl, API_USERS_PATH, { authorization: `Bearer ${tokens.access_token}` });
    assert.equal(asBearer.status, 401);
    assert.match(asBearer.headers.get("www-authenticate") ?? "", /^DPoP error="invalid_token"/);
    // With another key's proofs: refused.
    const other = oauth.DPoP(who, await oauth.generateKeyPair("ES256"));
    // oauth4webapi answers a 401 with a challenge by throwing it.
    await assert.rejects(
      oauth.protectedResourceRequest(tokens.access_token, "GET", api, new Headers(), null, { ...options, DPoP: other }),
      (error: unknown) => {
        assert.ok(error instanceof oauth.WWWAuthenticateChallengeError, String(error));
        assert.equal(error.response.status, 401);
        assert.equal(error.cause[0]?.scheme, "dpop");
        assert.equal(error.cause[0]?.parameters.error, "invalid_dpop_proof");
        return true;
      },
    );

    // Introspection (RFC 9449 6.2): token_type DPoP and cnf.jkt.
    const introspected = await postForm(
      baseUrl,
      INTROSPECT_PATH,
      { token: tokens.access_token },
      {
        authorization: basicAuthorization(admin.clientId, admin.clientSecret),
      },
    );
    assert.equal(introspected.body.active, true);
    assert.equal(introspected.body.token_type, "DPoP");
    assert.deepEqual(introspected.body.cnf, { jkt: await calculateJwkThumbprint(await exportJWK(keyPair.publicKey)) });
  });
});

describe("the token endpoint refuses bad proofs (dpop package)", () => {
  test("a replayed proof", async () => {
    const keys = await DPoP.generateKeyPair("ES256");
    const proof = await DPoP.generateProof(keys, tokenUrl(), "POST", await currentNonce(keys));
    assert.equal((await tokenRequest(proof)).status, 200);
    const replayed = await tokenRequest(proof);
    assert.equal(replayed.status, 400);
    assert.equal(replayed.body.error, "invalid_dpop_proof");
  });

  test("wrong htm, wrong htu", async () => {
    const keys = await DPoP.generateKeyPair("Ed25519");
    const nonce = await currentNonce(keys);
    for (const proof of [
      await DPoP.generateProof(keys, tokenUrl(), "GET", nonce),
      await DPoP.generateProof(keys, `${baseUrl}/v2/auth/introspect`, "POST", nonce),
      await DPoP.generateProof(keys, `https://elsewhere.test${TOKEN_PATH}`, "POST", nonce),
    ]) {
      const refused = await tokenRequest(proof);
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error, "invalid_dpop_proof");
    }
  });

  test("an iat too old or in the future (the service's clock moved)", async () => {
    const keys = await DPoP.generateKeyPair("ES256");
    const nonce = await currentNonce(keys);
    try {
      for (const seconds of [+90, -90]) {
        clock.reset();
        const proof = await DPoP.generateProof(keys, tokenUrl(), "POST", nonce);
        clock.advanceSeconds(seconds);
        const refused = await tokenRequest(proof);
        assert.equal(refused.status, 400, `clock ${seconds} s`);
        assert.equal(refused.body.error, "invalid_dpop_proof");
        assert.match(refused.body.error_description, /iat|too old/);
      }
    } finally {
      clock.reset();
    }
  });

  test("alg none, and HMAC keyed with the proof's own public key: refused", async () => {
    const keys = await DPoP.generateKeyPair("ES256");
    const nonce = await currentNonce(keys);
    const jwk = await exportJWK(keys.publicKey);
    const claims = {
      htm: "POST",
      htu: tokenUrl(),
      iat: Math.floor(Date.now() / 1000),
      jti: crypto.randomUUID(),
      nonce,
    };
    const encode = (part: object) => Buffer.from(JSON.stringify(part)).toString("base64url");
    const unsigned = (alg: string) => `${encode({ typ: "dpop+jwt", alg, jwk })}.${encode(claims)}`;
    const hmacKey = JSON.stringify(jwk);
    for (const proof of [
      `${unsigned("none")}.`,
      `${unsigned("HS256")}.${crypto.createHmac("sha256", hmacKey).update(unsigned("HS256")).digest("base64url")}`,
    ]) {
      const refused = await tokenRequest(proof);
      assert.equal(refused.status, 400, proof.split(".")[0]);
      assert.equal(refused.body.error, "invalid_dpop_proof");
    }
  });

  test("a request with no proof gets a bearer token", async () => {
    const issued = await tokenRequest(undefined);
    assert.equal(issued.status, 200);
    assert.equal(issued.body.token_type, "Bearer");
  });
});

describe("protected RPCs: a bound token only with a proof by its key, for this request, once", () => {
  test("REST: ath, htu, key and replay are checked", async () => {
    const keys = await DPoP.generateKeyPair("ES256");
    const { token, nonce } = await boundToken(keys);
    const url = `${baseUrl}${API_USERS_PATH}`;
    const call = async (proof: string, authorization = `DPoP ${token}`) => {
      const response = await fetch(url, { headers: { authorization, dpop: proof } });
      return { status: response.status, headers: response.headers };
    };
    const good = await DPoP.generateProof(keys, url, "GET", nonce, token);
    assert.equal((await call(good)).status, 200);
    const replayed = await call(good);
    assert.equal(replayed.status, 401);
    assert.match(replayed.headers.get("www-authenticate") ?? "", /^DPoP error="invalid_dpop_proof"/);
    // A proof for another URL, or without ath (not bound to this token).
    for (const proof of [
      await DPoP.generateProof(keys, `${baseUrl}/v2/api-users/rotate`, "GET", nonce, token),
      await DPoP.generateProof(keys, url, "GET", nonce),
      await DPoP.generateProof(keys, url, "POST", nonce, token),
    ]) {
      const refused = await call(proof);
      assert.equal(refused.status, 401);
      assert.match(refused.headers.get("www-authenticate") ?? "", /^DPoP error="invalid_dpop_proof"/);
    }
    // Without a nonce: use_dpop_nonce, and the nonce to use.
    const noNonce = await call(await DPoP.generateProof(keys, url, "GET", undefined, token));
    assert.equal(noNonce.status, 401);
    assert.match(noNonce.headers.get("www-authenticate") ?? "", /^DPoP error="use_dpop_nonce"/);
    assert.ok(noNonce.headers.get("dpop-nonce"));
    // An unbound token under the DPoP scheme: refused.
    const bearer = (await tokenRequest(undefined)).body.access_token as string;
    assert.equal((await call(good, `DPoP ${bearer}`)).status, 401);
  });

  test("a bound token without the scope: 403 insufficient_scope challenged in the DPoP scheme (RFC 9449 7.1)", async () => {
    const keys = await DPoP.generateKeyPair("ES256");
    const nonce = await currentNonce(keys);
    const issued = await tokenRequest(await DPoP.generateProof(keys, tokenUrl(), "POST", nonce), {
      scope: "users:read",
    });
    assert.equal(issued.body.token_type, "DPoP", JSON.stringify(issued.body));
    const token = issued.body.access_token as string;
    const url = `${baseUrl}${API_USERS_PATH}`;
    const response = await fetch(url, {
      headers: { authorization: `DPoP ${token}`, dpop: await DPoP.generateProof(keys, url, "GET", nonce, token) },
    });
    assert.equal(response.status, 403);
    assert.match(
      response.headers.get("www-authenticate") ?? "",
      /^DPoP error="insufficient_scope", scope="api-users", algs="[^"]*ES256/,
    );
  });

  test("gRPC (@grpc/grpc-js): the same headers as metadata", async () => {
    const keys = await DPoP.generateKeyPair("ES256");
    const { token, nonce } = await boundToken(keys);
    const grpc = grpcClients(baseUrl);
    try {
      const url = `${baseUrl}/travel.apiuser.v2.ApiUserService/GetApiUsers`;
      const call = (proof: string | undefined, scheme = "DPoP") =>
        grpc.call("apiUser", "GetApiUsers", {}, undefined, {
          authorization: `${scheme} ${token}`,
          ...(proof !== undefined ? { dpop: proof } : {}),
        });
      const proof = await DPoP.generateProof(keys, url, "POST", nonce, token);
      const ok = await call(proof);
      assert.equal(ok.ok, true, ok.details);
      const replayed = await call(proof);
      assert.equal(replayed.code, GRPC.UNAUTHENTICATED);
      assert.match(String(replayed.metadata?.get("www-authenticate")[0]), /^DPoP error="invalid_dpop_proof"/);
      const asBearer = await call(undefined, "Bearer");
      assert.equal(asBearer.code, GRPC.UNAUTHENTICATED);
      const otherKeys = await DPoP.generateKeyPair("ES256");
      const stolen = await call(await DPoP.generateProof(otherKeys, url, "POST", nonce, token));
      assert.equal(stolen.code, GRPC.UNAUTHENTICATED);
      assert.match(String(stolen.metadata?.get("www-authenticate")[0]), /invalid_dpop_proof/);
    } finally {
      grpc.close();
    }
  });

  test("Connect (@connectrpc/connect-node): the same headers, refusals as UNAUTHENTICATED with the challenge", async () => {
    const keys = await DPoP.generateKeyPair("ES256");
    const { token, nonce } = await boundToken(keys);
    const apiUsers = createClient(ApiUserService, createConnectTransport({ baseUrl, httpVersion: "1.1" }));
    const url = `${baseUrl}/travel.apiuser.v2.ApiUserService/GetApiUsers`;
    const call = (proof: string | undefined, scheme = "DPoP") =>
      apiUsers.getApiUsers({}, { headers: { authorization: `${scheme} ${token}`, ...(proof ? { dpop: proof } : {}) } });
    /** The refusal of a call: UNAUTHENTICATED, with its WWW-Authenticate and DPoP-Nonce. */
    const refusalOf = async (answer: Promise<unknown>) => {
      const error = await answer.then(
        () => assert.fail("accepted"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof ConnectError, String(error));
      assert.equal(error.code, Code.Unauthenticated);
      return { challenge: error.metadata.get("www-authenticate") ?? "", nonce: error.metadata.get("dpop-nonce") };
    };
    const proof = await DPoP.generateProof(keys, url, "POST", nonce, token);
    let offered: string | null = null;
    const listed = await apiUsers.getApiUsers(
      {},
      { headers: { authorization: `DPoP ${token}`, dpop: proof }, onHeader: (h) => (offered = h.get("dpop-nonce")) },
    );
    assert.ok(listed.totalCount >= 1);
    assert.ok(offered, "the next nonce is offered");
    assert.match((await refusalOf(call(proof))).challenge, /^DPoP error="invalid_dpop_proof"/, "a replayed proof");
    assert.match((await refusalOf(call(undefined, "Bearer"))).challenge, /^DPoP error="invalid_token"/, "as Bearer");
    const stolen = await DPoP.generateProof(await DPoP.generateKeyPair("ES256"), url, "POST", nonce, token);
    assert.match((await refusalOf(call(stolen))).challenge, /^DPoP error="invalid_dpop_proof"/, "another key");
    const wrongMethod = await DPoP.generateProof(keys, url, "GET", nonce, token);
    assert.match((await refusalOf(call(wrongMethod))).challenge, /^DPoP error="invalid_dpop_proof"/, "wrong htm");
    const noNonce = await refusalOf(call(await DPoP.generateProof(keys, url, "POST", undefined, token)));
    assert.match(noNonce.challenge, /^DPoP error="use_dpop_nonce"/);
    assert.ok(noNonce.nonce, "the nonce to use");
  });
});
