// Token exchange (RFC 8693) with a trusted issuer registered by `jwksUri`: the issuer's key set
// is served here by a loopback http server (JWKS_URI_ALLOW_HTTP_LOOPBACK) and fetched by the
// service under the rules of a client's jwks_uri (https only, one deadline, 64 KiB, no redirect,
// held per issuer for a bounded time, an unknown kid refetched at most once per cooldown), with
// an identity provider's lenient key check (keys it cannot verify with are dropped, a private
// member refuses the set). Every failure refuses the exchange like a token that does not verify
// (400 invalid_request, the reason in the log only), never a 500.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fromBinary } from "@bufbuild/protobuf";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from "jose";
import { ErrorResponseSchema } from "../../gen/travel/common/v1/error_pb.js";
import { backend } from "../helpers/backend.js";
import { COOLDOWN_MS, JWKS_URI_ENV, startJwksServer, type JwksServer } from "../helpers/jwks-server.js";
import { operatorCall, operatorHeaders, type RunningService } from "../helpers/service.js";
import {
  assertOAuthError,
  disposeService,
  GRANT_EXCHANGE,
  newTenant,
  newUser,
  partsOf,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TOKEN_PATH,
  TYPE_JWT,
  type HttpReply,
  type Tenant,
} from "../helpers/token-kit.js";

const IDP_AUDIENCE = "https://travel.test/token-exchange";
const EMAIL = "ada.lovelace@acme.example";
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface IdpKey {
  readonly alg: string;
  readonly privateKey: CryptoKey;
  readonly jwk: JWK;
}

let serial = 0;
/** A key pair of an identity provider; `jwk` is its published public half (kid, alg, use sig unless told). */
async function idpKey(alg: string, extra: Partial<JWK> = {}): Promise<IdpKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: `k${++serial}-${alg}`, alg, use: "sig", ...extra };
  return { alg, privateKey, jwk };
}

describe(`token exchange with a trusted issuer's jwksUri (${backend})`, () => {
  let running: RunningService;
  let baseUrl: string;
  let jwks: JwksServer;
  let tenant: Tenant;
  let userId: string;

  const serve = (path: string, keys: readonly IdpKey[], extra: Partial<JWK>[] = []) =>
    jwks.answers.set(path, { body: JSON.stringify({ keys: [...keys.map((k) => k.jwk), ...extra] }) });
  const issuerAt = (path: string) => `https://idp${path.replace(/\W/g, "-")}.example`;
  /** Trusts an issuer whose keys are at `path` of the JWKS server; answers the issuer. */
  async function trust(path: string): Promise<string> {
    const issuer = issuerAt(path);
    await operatorCall(baseUrl, "AddTrustedIssuer", {
      tmcId: tenant.tmcId,
      issuer,
      jwksUri: jwks.url(path),
      audience: IDP_AUDIENCE,
    });
    return issuer;
  }
  /** The IdP's token naming the user by e-mail, signed with `key` (its kid in the header). */
  const subjectToken = (key: IdpKey, issuer: string) =>
    new SignJWT({ email: EMAIL })
      .setProtectedHeader({ alg: key.alg, kid: key.jwk.kid!, typ: "JWT" })
      .setIssuer(issuer)
      .setAudience(IDP_AUDIENCE)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(key.privateKey);
  const exchange = async (key: IdpKey, issuer: string): Promise<HttpReply> =>
    postForm(baseUrl, TOKEN_PATH, {
      grant_type: GRANT_EXCHANGE,
      client_id: tenant.admin.clientId,
      client_secret: tenant.admin.clientSecret,
      subject_token: await subjectToken(key, issuer),
      subject_token_type: TYPE_JWT,
    });
  /** The exchange's answer is a token for the user the IdP's token names. */
  const assertExchanged = (res: HttpReply) => {
    assert.equal(res.status, 200, `${JSON.stringify(res.body)}; ${warningsIn(running.logs())}`);
    assert.equal(partsOf(res.body.access_token).payload.sub, userId);
  };
  /** Refused like a token that does not verify: 400 invalid_request, and nothing of the document. */
  const assertRefused = (res: HttpReply) => {
    assertOAuthError(res, 400, "INVALID_REQUEST", "invalid_request");
    assert.equal(
      res.body.error_description,
      "The subject_token is not acceptable: its signature or claims do not verify",
    );
  };

  before(async () => {
    jwks = await startJwksServer();
    running = await startTokenService({ env: { ...ROOMY_RATE_LIMITS, ...JWKS_URI_ENV } });
    baseUrl = running.baseUrl;
    tenant = await newTenant(baseUrl);
    userId = await newUser(baseUrl, tenant.orgId, EMAIL);
  });
  after(async () => {
    await disposeService(running);
    await jwks?.close();
  });

  test("an IdP's set as IdPs publish it (x5c, an encryption key, other curves): its RS256 and ES256 keys verify", async () => {
    const [rsa, ec, enc, p384] = [
      await idpKey("RS256", { x5c: ["MIIBfake"], x5t: "abc" }),
      await idpKey("ES256"),
      await idpKey("RS256", { use: "enc", alg: "RSA-OAEP-256" }),
      await idpKey("ES384"),
    ];
    serve("/entra.json", [rsa, ec, enc, p384], [{ kty: "OKP", crv: "X25519", x: "abc", kid: "x25519" }]);
    const issuer = await trust("/entra.json");
    assert.equal(jwks.requests("/entra.json"), 0, "registration fetches nothing");
    assertExchanged(await exchange(rsa, issuer));
    assertExchanged(await exchange(ec, issuer));
    assert.equal(jwks.requests("/entra.json"), 1, "the set is held: one fetch");
    // The key published for encryption (and one of an algorithm not accepted) verify nothing.
    assertRefused(await exchange(enc, issuer));
    assertRefused(await exchange(p384, issuer));
  });

  test("a key rotated at the IdP (a new kid) verifies after the cooldown, with one refetch", async () => {
    const [first, next] = [await idpKey("RS256"), await idpKey("ES256")];
    serve("/rotating.json", [first]);
    const issuer = await trust("/rotating.json");
    assertExchanged(await exchange(first, issuer));
    const fetched = jwks.requests("/rotating.json");
    serve("/rotating.json", [next]); // the old key withdrawn, the new one published
    await sleep(COOLDOWN_MS + 100); // past the cooldown, well within the held set's 3 s
    assertExchanged(await exchange(next, issuer));
    assert.equal(jwks.requests("/rotating.json"), fetched + 1, "one refetch, for the unknown kid");
  });

  test("a key withdrawn at the IdP is cut off at once by registering the issuer again (the held set is dropped)", async () => {
    const [withdrawn, kept] = [await idpKey("RS256"), await idpKey("ES256")];
    serve("/withdrawn.json", [withdrawn, kept]);
    const issuer = await trust("/withdrawn.json");
    assertExchanged(await exchange(withdrawn, issuer));
    serve("/withdrawn.json", [kept]);
    assertExchanged(await exchange(withdrawn, issuer)); // the held set lives up to 3 s
    const fetched = jwks.requests("/withdrawn.json");
    await trust("/withdrawn.json");
    assertRefused(await exchange(withdrawn, issuer));
    assertExchanged(await exchange(kept, issuer));
    assert.equal(jwks.requests("/withdrawn.json"), fetched + 1, "one fetch for the new registration");
  });

  test("an oversized, slow, redirected or unusable set refuses the exchange (400, reason logged); others go on", async () => {
    const key = await idpKey("ES256");
    const steady = await trust("/steady.json");
    serve("/steady.json", [key]);
    assertExchanged(await exchange(key, steady));

    const document = JSON.stringify({ keys: [key.jwk] });
    jwks.answers.set("/big.json", { body: JSON.stringify({ keys: [key.jwk], pad: "x".repeat(70_000) }) });
    jwks.answers.set("/moved.json", { status: 302, headers: { location: jwks.url("/steady.json") } });
    jwks.answers.set("/private.json", { body: JSON.stringify({ keys: [{ ...key.jwk, d: "AAAA" }] }) });
    jwks.answers.set("/enc-only.json", { body: JSON.stringify({ keys: [{ ...key.jwk, use: "enc" }] }) });
    jwks.answers.set("/slow.json", { body: document, delayMs: 1_500 });
    const cases: Array<[string, RegExp]> = [
      ["/big.json", /jwks_uri answered more than 65536 bytes/],
      ["/moved.json", /jwks_uri answered a redirect \(302\), which is not followed/],
      ["/private.json", /jwks_uri is not a usable JWK Set: .*must be a public key/],
      ["/enc-only.json", /jwks_uri is not a usable JWK Set: jwks has no key usable/],
    ];
    for (const [path, reason] of cases) {
      const res = await exchange(key, await trust(path));
      assertRefused(res);
      assert.doesNotMatch(JSON.stringify(res.body), /xxxx|"keys"/, "nothing of the document");
      assert.match(warningsIn(running.logs()), reason, path);
    }

    const slowIssuer = await trust("/slow.json");
    const slow = exchange(key, slowIssuer);
    const started = performance.now();
    assertExchanged(await exchange(key, steady));
    assert.ok(performance.now() - started < 400, "another issuer's exchange is answered while the slow URL is fetched");
    assertRefused(await slow);
    assert.match(warningsIn(running.logs()), /jwks_uri did not answer within 500 ms/);

    assertExchanged(await exchange(key, steady));
    assert.doesNotMatch(running.logs(), /"statusCode":500|INTERNAL_ERROR/);
  });

  test("AddTrustedIssuer refuses a jwksUri outside the rules (http to another host, …): 400 naming jwksUri, nothing registered", async () => {
    const cases: Array<[string, RegExp]> = [
      ["http://idp.example/jwks.json", /^jwks_uri must use https \(http only on a loopback host\)$/],
      ["https://user:pass@idp.example/jwks.json", /^jwks_uri must not carry user info$/],
      ["https://idp.example/jwks.json#keys", /^jwks_uri must not carry a fragment$/],
      [`https://idp.example/${"a".repeat(2048)}`, /^jwks_uri must be an absolute URL$/],
    ];
    for (const [jwksUri, message] of cases) {
      const issuer = `https://refused-${cases.findIndex(([uri]) => uri === jwksUri)}.example`;
      const response = await fetch(`${baseUrl}/travel.operator.v1.OperatorService/AddTrustedIssuer`, {
        method: "POST",
        headers: { ...operatorHeaders, "content-type": "application/json" },
        body: JSON.stringify({ tmcId: tenant.tmcId, issuer, jwksUri, audience: IDP_AUDIENCE }),
      });
      const body = (await response.json()) as { code: string; message: string; details?: Array<{ value: string }> };
      assert.equal(response.status, 400, `${jwksUri}: ${JSON.stringify(body)}`);
      assert.equal(body.code, "invalid_argument");
      assert.match(body.message, message);
      const detail = fromBinary(ErrorResponseSchema, Buffer.from(body.details![0]!.value, "base64"));
      assert.deepEqual(
        detail.errorMessages.map((m) => [m.errorCode, m.errorParameters.map((p) => [p.name, p.value])]),
        [["API_VALIDATION_FAILED", [["jwksUri", "invalid"]]]],
      );
    }
    const listed = await operatorCall<{ issuers?: Array<{ issuer: string }> }>(baseUrl, "ListTrustedIssuers", {
      tmcId: tenant.tmcId,
    });
    assert.deepEqual(
      (listed.issuers ?? []).filter((i) => i.issuer.startsWith("https://refused-")),
      [],
      "nothing registered",
    );
  });
});

/** The service's log lines saying an issuer's key set is unavailable, with the reason. */
function warningsIn(logs: string): string {
  return logs
    .split("\n")
    .filter((line) => line.includes("the trusted issuer's key set is unavailable"))
    .join("\n");
}
